"""Event severity has one home: storage/kinds.py EVENT_KINDS.

A writer names the kind; the write path (storage/repo `add_event` / `insert_events`,
collectors/base.py `EventRow`) fills the table's severity. A writer that stores another severity
passes it together with `severity_reason=`, so an override is visible where it is made.

The static half walks every module that writes events (all of the repository but tests/ and the
simulator, which writes no events of ours) and finds each write: `add_event(...)`, `EventRow(...)`,
`HealthEvent(...)` and every dict literal that is an event row (a "kind" key naming an event kind
and a "severity" key). It fails on a severity that contradicts the table, on one that merely
repeats it, on a computed one, on a reason that overrides nothing, and on a second kind ->
severity table (a dict or (kind, severity) pairs spelled again). The dynamic half writes events
through both write paths into a real SQLite file and reads back the table's severities.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

from collectors.base import EventRow
from runner.writer import Batch, BatchWriter
from storage import repo
from storage.kinds import EVENT_KINDS

REPO = Path(__file__).resolve().parents[2]
SKIP = ("tests", "simulator")  # the simulator writes no events to our database
SEVERITIES = ("info", "warning", "error", "critical")
#: writer call -> (position of `kind`, position of `severity`) among its positional arguments
WRITERS: dict[str, tuple[int | None, int | None]] = {
    "add_event": (None, None),  # keyword-only
    "EventRow": (2, 4),
    "HealthEvent": (0, 2),
}
#: computed severities that copy a row already through the write path (not a new choice)
PASS_THROUGH = {("runner/writer.py", "ev['severity']")}


def _sources() -> list[Path]:
    out = []
    for path in sorted(REPO.rglob("*.py")):
        rel = path.relative_to(REPO)
        if rel.parts[0] in SKIP or any(p.startswith(".") for p in rel.parts):
            continue
        out.append(path)
    return out


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _callee(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _arg(node: ast.Call, name: str, pos: int | None) -> ast.AST | None:
    for kw in node.keywords:
        if kw.arg == name:
            return kw.value
    if pos is not None and len(node.args) > pos and not isinstance(node.args[pos], ast.Starred):
        return node.args[pos]
    return None


def _judge(where: str, rel: str, kind_node: ast.AST | None, sev: ast.AST | None,
           reason: ast.AST | None) -> list[str]:
    """What is wrong with one write: its kind, the severity it passes (None: the table's) and
    its stated reason."""
    if sev is None or (isinstance(sev, ast.Constant) and sev.value is None):
        return [f"{where}: severity_reason without a severity"] if reason is not None else []
    kind, level = _literal(kind_node), _literal(sev)
    table = EVENT_KINDS[kind][0] if kind in EVENT_KINDS else None
    named = kind or (ast.unparse(kind_node) if kind_node is not None else "?")
    if level is not None and level not in SEVERITIES:
        return [f"{where}: {named} severity {level!r} is not one of {SEVERITIES}"]
    if reason is not None:
        if not (_literal(reason) or "").strip():
            return [f"{where}: {named} states no reason (severity_reason must be a sentence)"]
        if level is None:
            return [f"{where}: {named} overrides with a computed severity; pass a literal one"]
        if table is not None and level == table:
            return [f"{where}: {named} severity_reason for {level!r}, which the table already says; drop both"]
        return []
    if level is None:
        if (rel, ast.unparse(sev)) in PASS_THROUGH:
            return []
        return [f"{where}: {named} computes its severity ({ast.unparse(sev)}); name only the kind"]
    if table is None:
        return [f"{where}: {named} passes severity {level!r} for a kind the test cannot read; "
                "name only the kind, or state why with severity_reason"]
    if level != table:
        return [f"{where}: {kind} written as {level!r}, EVENT_KINDS says {table!r}; drop the "
                "severity (or fix the table, or state why with severity_reason)"]
    return [f"{where}: {kind} repeats the table's {level!r}; drop it (the write path fills it)"]


def _second_table(node: ast.AST) -> bool:
    """A dict {event kind: severity} or a sequence of (event kind, severity) pairs."""
    if isinstance(node, ast.Dict):
        keys = [_literal(k) for k in node.keys]
        vals = [_literal(v) for v in node.values]
        return len(keys) >= 2 and all(k in EVENT_KINDS for k in keys) and all(v in SEVERITIES for v in vals)
    if isinstance(node, (ast.Tuple, ast.List)):
        pairs = [e for e in node.elts if isinstance(e, ast.Tuple) and len(e.elts) == 2]
        return len(pairs) >= 2 and len(pairs) == len(node.elts) and all(
            _literal(p.elts[0]) in EVENT_KINDS and _literal(p.elts[1]) in SEVERITIES for p in pairs)
    return False


def event_writes(path: Path, root: Path = REPO) -> tuple[int, list[str]]:
    """(how many event writes `path` holds, what is wrong with them)."""
    rel = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    seen, problems = 0, []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call) and _callee(node) in WRITERS:
            kind_pos, sev_pos = WRITERS[_callee(node) or ""]
            seen += 1
            problems += _judge(where, rel, _arg(node, "kind", kind_pos), _arg(node, "severity", sev_pos),
                               _arg(node, "severity_reason", None))
        elif isinstance(node, ast.Dict):
            keys = {_literal(k): v for k, v in zip(node.keys, node.values, strict=True) if k is not None}
            if _literal(keys.get("kind")) in EVENT_KINDS:
                seen += 1
                problems += _judge(where, rel, keys["kind"], keys.get("severity"), keys.get("severity_reason"))
        if _second_table(node):
            problems.append(f"{where}: spells event kind -> severity again; read storage/kinds.py EVENT_KINDS")
    return seen, problems


def test_every_written_event_takes_its_severity_from_event_kinds() -> None:
    seen, problems = 0, []
    for path in _sources():
        n, found = event_writes(path)
        seen += n
        problems += found
    assert seen >= 30, f"found only {seen} event writes: the walk no longer recognises the writers"
    assert problems == [], "\n".join(problems)


def test_the_walk_recognises_each_way_to_get_it_wrong(tmp_path: Path) -> None:
    """The rules above, on a module written for the purpose (a walk that finds nothing passes
    vacuously, so each rule is seen to fire)."""
    bad = tmp_path / "writer.py"
    bad.write_text(
        "SEVERITY = {'crash': 'error', 'oom': 'error'}\n"
        "PAIRS = (('oom', 'error'), ('crash', 'critical'))\n"
        "def f(repo, e, EventRow, sev):\n"
        "    repo.add_event(e, kind='crash', message='m', severity='error')\n"
        "    repo.add_event(e, kind='oom', message='m', severity='error')\n"
        "    EventRow(0.0, None, 'nccl_timeout', 'm', 'error')\n"
        "    EventRow(0.0, None, 'oom', 'm', sev)\n"
        "    repo.add_event(e, kind='oom', message='m', severity='error', severity_reason='why')\n"
        "    repo.add_event(e, kind='oom', message='m', severity='warning', severity_reason='')\n"
        "    rows = [{'kind': 'health_down', 'severity': 'warning', 'message': 'm'}]\n"
        "    repo.add_event(e, kind='oom', message='m', severity='warning', severity_reason='a reason')\n"
        "    repo.add_event(e, kind='crash', message='m')\n",
        encoding="utf-8",
    )
    seen, problems = event_writes(bad, tmp_path)
    assert seen == 9
    said = "\n".join(problems)
    for expected in (":1: spells", ":2: spells", ":4: crash written as 'error', EVENT_KINDS says 'critical'",
                     ":5: oom repeats", ":6: nccl_timeout written as 'error'", ":7: oom computes",
                     ":8: oom severity_reason for 'error'", ":9: oom states no reason",
                     ":10: health_down written as 'warning', EVENT_KINDS says 'error'"):
        assert expected in said, said
    assert len(problems) == 9, said  # line 11 (a stated override) and 12 (the kind alone) pass


def test_the_write_paths_fill_the_tables_severity(engine) -> None:
    """Real SQLite file: add_event, insert_events and the runner's BatchWriter store every kind
    with EVENT_KINDS's severity when the writer names only the kind; an override with its reason
    is stored as given (the reason is not a column)."""
    sid = repo.upsert_server(engine, name="s", base_url="http://127.0.0.1:1").id
    now = time.time()
    kinds = list(EVENT_KINDS)
    for i, kind in enumerate(kinds):
        repo.add_event(engine, kind=kind, server_id=sid, message=f"one {kind}", ts=now - 3 * i)
    with engine.begin() as conn:
        repo.insert_events(conn, rows=[{"ts": now - 3 * i - 1, "server_id": sid, "launch_id": None, "kind": kind,
                                        "message": f"batch {kind}", "raw": None} for i, kind in enumerate(kinds)])
    writer = BatchWriter(engine)
    writer.put(Batch(events=[EventRow(now - 3 * i - 2, sid, kind, f"row {kind}") for i, kind in enumerate(kinds)]))
    writer.flush()

    def stored() -> dict[tuple[str, str], str]:
        ev = repo.list_events(engine, server_id=sid, limit=1000)
        return {(m.split(" ")[0], k): s for m, k, s in zip(ev["message"], ev["kind"], ev["severity"], strict=True)}

    for how in ("one", "batch", "row"):
        got = {k: s for (h, k), s in stored().items() if h == how}
        assert got == {k: sev for k, (sev, _) in EVENT_KINDS.items()}, how
    repo.add_event(engine, kind="server_exit", server_id=sid, message="override", ts=now + 1,
                   severity="warning", severity_reason="a replaced process, not an outage")
    assert stored()[("override", "server_exit")] == "warning"
    assert EventRow(0.0, None, "crash", "m").severity == "critical"
    assert EventRow(0.0, None, "no_such_kind", "m").severity is None  # set aside by the writer for its kind
