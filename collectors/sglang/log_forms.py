"""The drift guard for the scheduler log: the forms of its batch lines per launch, and what a
relaunch or an upgrade changed in them.

The log parser is generic (`Decode batch, <name>: <value>, ...`), so a release that renames a
field (`#running-req` to `#running`) still parses, and the figure that read the old name goes
quiet without an error. Per launch, the catalogue counts each batch kind's records and, per
field, the records that carried it; a field the previous launch wrote in EVERY one of its
records of a kind (a steady field: `#replay-token`, written only when non-zero, is not one) and
the new launch writes in none of its first MIN_RECORDS records of that kind is lost. A batch
line (`Prefill batch` / `Decode batch` in its text) that yields no record is in a form the
parser does not read; MIN_RECORDS of those of a kind, and no record of that kind, is lost too.
The standard a launch is judged against is, kind by kind, the last launch that logged at least
MIN_RECORDS lines of it (short launches of a crash loop do not replace it).

Each kind is judged once a launch, when the launch has MIN_RECORDS records of a kind the previous
launch logged at least MIN_RECORDS times (or MIN_RECORDS unread batch lines and no record); a
kind stops counting once judged or at CAP records (no state write per poll after that), and
keeps at most MAX_FIELDS field names. A kind the new launch does not log at all (a prefill
server never logs `Decode batch`) is not judged: a role change is not drift. A watched server
without launches has one epoch and is never judged. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from collectors.base import EventRow, ServerTarget
from collectors.sglang.log_fields import KEY_MAP

KINDS = ("prefill", "decode")
MIN_RECORDS = 5
CAP = 1000
MAX_FIELDS = 64  # field names kept a kind (a hostile log cannot grow the state)
HEADS = (b"Prefill batch", b"Decode batch")


@dataclass(frozen=True)
class FormDrift:
    kind: str  # prefill | decode
    lost: tuple[str, ...]  # field names (the parser's), or () for unread lines
    unread: int = 0

    def sentence(self, label: dict[str, str]) -> str:
        if not self.lost:
            return (f"{self.unread} {self.kind.capitalize()} batch lines are in a form Pitwall does not read "
                    "(no record came from them)")
        names = ", ".join(label.get(f, f) for f in self.lost)
        return f"{self.kind.capitalize()} batch lines no longer carry {names}"


def _new(epoch: Any) -> dict[str, Any]:
    return {"epoch": epoch, "kinds": {}, "unread": {}, "judged": []}


def _standard(ending: dict[str, Any], older: dict[str, Any] | None) -> dict[str, Any] | None:
    """The catalogue the next launch is judged against: the ending launch's, kind by kind, where
    it logged at least MIN_RECORDS lines of that kind; the older standard's where it logged fewer
    (a crash loop of short launches must not wipe the standard a long launch set)."""
    kinds = {k: v for k, v in ((older or {}).get("kinds") or {}).items()}
    kinds.update({k: v for k, v in ending["kinds"].items() if v["n"] >= MIN_RECORDS})
    return {**ending, "kinds": kinds} if kinds else older


def step(state: dict[str, Any] | None, epoch: Any, records: list[tuple[str, list[str]]],
         unread: dict[str, int]) -> tuple[dict[str, Any], list[FormDrift]]:
    """(new state, what this step judged lost). `records`: (kind, field names) of this poll's
    batch records; `unread`: batch lines of a kind that gave no record. The state holds the
    current launch's catalogue and the standard (earlier launches'); each kind is judged once a
    launch (`judged`), its unread lines under "lines:<kind>"."""
    state = {"current": _new(epoch), "previous": None} if not state or "current" not in state else {
        "current": state["current"], "previous": state.get("previous")}
    cur = state["current"]
    if epoch is not None and cur["epoch"] != epoch:
        state["previous"], cur = _standard(cur, state.get("previous")), _new(epoch)
        state["current"] = cur
    raw_judged = cur.get("judged")
    # a state written before kinds were judged one by one holds `True`: all of them were
    judged = ({*cur["kinds"], *(f"lines:{k}" for k in KINDS)} if raw_judged is True else set(raw_judged or []))
    old_unread = cur.get("unread")
    cur = state["current"] = {**cur, "judged": sorted(judged), "unread": dict(old_unread) if isinstance(old_unread, dict) else {},
                              "kinds": {k: {"n": v["n"], "fields": dict(v["fields"])} for k, v in cur["kinds"].items()}}
    for kind, fields in records:
        entry = cur["kinds"].setdefault(kind, {"n": 0, "fields": {}})
        if entry["n"] >= CAP or kind in judged:
            continue  # enough to judge by: the state stops changing
        entry["n"] += 1
        for f in fields:
            if f in entry["fields"] or len(entry["fields"]) < MAX_FIELDS:
                entry["fields"][f] = entry["fields"].get(f, 0) + 1
    for kind, n in unread.items():
        if n > 0 and f"lines:{kind}" not in judged:
            cur["unread"][kind] = min(cur["unread"].get(kind, 0) + n, CAP)
    prev = state.get("previous")
    if prev is None or cur["epoch"] is None:
        return state, []
    drift: list[FormDrift] = []
    for kind, entry in cur["kinds"].items():
        before = prev["kinds"].get(kind)
        if kind in judged or before is None or before["n"] < MIN_RECORDS or entry["n"] < MIN_RECORDS:
            continue
        judged.add(kind)
        steady = {f for f, c in before["fields"].items() if c == before["n"]}
        lost = tuple(sorted(steady - set(entry["fields"])))
        if lost:
            drift.append(FormDrift(kind, lost))
    for kind, n in cur["unread"].items():
        got = cur["kinds"].get(kind, {}).get("n", 0)
        if f"lines:{kind}" not in judged and n >= MIN_RECORDS and not got and kind in prev["kinds"]:
            judged.add(f"lines:{kind}")
            drift.append(FormDrift(kind, (), n))
    cur["judged"] = sorted(judged)
    return state, drift


def batch_records(records: list[Any]) -> list[tuple[str, list[str]]]:
    """(kind, field names) of the batch records among parsed log records."""
    return [(r.kind, list(r.fields)) for r in records if r.kind in KINDS]


def batch_lines(data: list[bytes]) -> dict[str, int]:
    """Lines whose text names a batch, by kind (cheap: a bytes search)."""
    out = {k: 0 for k in KINDS}
    for d in data:
        for kind, head in zip(KINDS, HEADS, strict=True):
            if head in d:
                out[kind] += 1
    return out


def unread_lines(lines: dict[str, int], records: list[tuple[str, list[str]]]) -> dict[str, int]:
    """Batch lines of each kind that gave no record of it."""
    return {k: max(n - sum(1 for kind, _ in records if kind == k), 0) for k, n in lines.items()}


#: a field's name as the log writes it, for the drift event (the parser's name otherwise)
FIELD_WORDS: dict[str, str] = {v: k for k, v in reversed(list(KEY_MAP.items()))}


def form_event(server: ServerTarget, drift: list[FormDrift], ts: float,
               dependents: Callable[[Iterable[str]], list[str]] | None, fed: dict[str, str]) -> EventRow:
    """ONE `metric_drift` event for a launch whose batch lines lost steady fields: each field,
    the Pitwall key it fed (`fed`: field -> key), and what reads that key."""
    words = {f: f"`{FIELD_WORDS.get(f, f)}`" for d in drift for f in d.lost}
    parts, losing = [], False
    for d in drift:
        keys = [k for f in d.lost if (k := fed.get(f)) is not None]
        if not d.lost:
            keys = sorted(set(fed.values()))
        readers = (dependents(keys) if dependents is not None else keys) if keys else []
        losing = losing or bool(readers)
        parts.append(d.sentence(words) + (f". It fed {'; '.join(readers)}." if readers else ". Nothing in Pitwall read it."))
    when = f"since launch #{server.launch_id}" if server.launch_id is not None else "since the server restarted"
    msg = (f"Server {server.name!r}: its scheduler log changed {when}. " + " ".join(parts)
           + (" Those figures stay empty from the log until it writes them again (the /metrics families still "
              "feed theirs): check the release notes of the version now running." if losing else ""))
    raw = json.dumps([{"kind": d.kind, "lost": list(d.lost), "unread": d.unread} for d in drift])
    if losing:
        return EventRow(ts, server.id, "metric_drift", msg, raw=raw, launch_id=server.launch_id)
    return EventRow(ts, server.id, "metric_drift", msg, severity="info", raw=raw, launch_id=server.launch_id,
                    severity_reason="the lost fields fed nothing of Pitwall's")
