"""`make test-fast` leaves out every test that starts a server process: each test that uses a
helper starting PostgreSQL, Prometheus, Alertmanager, the demo or a runner process carries the
`integration` marker (or `browser` / `real_sglang`, which test-fast leaves out too), on its module
(`pytestmark`), on itself, or on the fixture parameter that reaches the helper.

Read from the source (ast), not by running anything: a function "uses" a helper when it names it
(a call, an argument, a string such as `request.getfixturevalue("pg_url")`) or builds a
`-m cli collect` / `-m cli up` command line; a fixture or helper function that uses
one passes the use on to every function of its module that names it.
"""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

from pwtest import REPO, SERIAL_GROUPS, test_group

TESTS = REPO / "tests"
# What each helper starts: the name a test module reaches it by.
HELPERS = {
    "pg_url": "PostgreSQL (tests/pg.py)",
    "fleet_db": "PostgreSQL (tests/fleet/conftest.py)",
    "PromRig": "Prometheus (tests/prom_rig.py)",
    "rig_fixture": "Prometheus (tests/prom_rig.py)",
    "Alertmanager": "Alertmanager (tests/alerts/alert_receivers.py)",
    "free_demo_port": "the demo (its fixed port block)",
    "stop_group": "a `pitwall up` / `pitwall collect` process group",
    "collect_measured": "a `pitwall collect --duration` process",
}
RUNNER_COMMANDS = {"collect", "up"}  # `python -m cli <these>` starts a runner (and the demo)
LEFT_OUT = {"integration", "browser", "real_sglang", "real_vllm"}  # markers `make test-fast` deselects


def _marks(node: ast.AST) -> set[str]:
    """Marker names written as `pytest.mark.<name>` anywhere inside `node`."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}


def _module_marks(path: Path, tree: ast.Module) -> set[str]:
    """The module's `pytestmark` markers, those it imports from a sibling module included."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets):
            found |= _marks(node.value)
        if isinstance(node, ast.ImportFrom) and any(a.name == "pytestmark" for a in node.names):
            sibling = path.with_name(f"{node.module}.py")
            found |= _module_marks(sibling, ast.parse(sibling.read_text()))
    return found


def _names(fn: ast.FunctionDef) -> set[str]:
    """Every name `fn` mentions: identifiers, attributes, arguments and string constants."""
    out = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
    return out


def _starts_runner(fn: ast.FunctionDef) -> bool:
    for n in ast.walk(fn):
        if isinstance(n, (ast.List, ast.Tuple)):
            words = [e.value for e in n.elts if isinstance(e, ast.Constant)]
            if any(a == "cli" and b in RUNNER_COMMANDS for a, b in pairwise(words)):
                return True
    return False


def unmarked_uses(path: Path) -> list[str]:
    """`path::function uses what` for each test in `path` that reaches a helper with no marker
    that `make test-fast` leaves out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    if _module_marks(path, tree) & LEFT_OUT:
        return []
    fns = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    own = {fn.name for fn in fns}  # a fixture of the module's own (say `fleet_db` on SQLite) hides the helper
    reached = {k: v for k, v in HELPERS.items() if k not in own}  # name -> what it starts; grows below
    for fn in fns:
        if _starts_runner(fn):
            reached[fn.name] = "a runner process (`python -m cli collect|up`)"
    changed = True
    while changed:
        changed = False
        for fn in fns:
            if fn.name in reached or fn.name.startswith("test_"):
                continue
            hit = sorted(_names(fn) & reached.keys())
            covered = any(_marks(d) & LEFT_OUT for d in fn.decorator_list)  # e.g. a marked fixture param
            if hit and not covered:
                reached[fn.name] = reached[hit[0]]
                changed = True
    problems = []
    for fn in fns:
        if not fn.name.startswith("test_") or any(_marks(d) & LEFT_OUT for d in fn.decorator_list):
            continue
        hit = sorted(_names(fn) & reached.keys() - {fn.name})
        if hit or fn.name in reached:
            what = reached[hit[0]] if hit else reached[fn.name]
            problems.append(f"{path.relative_to(TESTS.parent) if path.is_relative_to(TESTS) else path.name}::{fn.name} starts {what}")
    return problems


def test_every_test_that_starts_a_server_is_left_out_of_test_fast() -> None:
    problems = [p for path in sorted(TESTS.rglob("test_*.py")) for p in unmarked_uses(path)]
    assert not problems, (
        "these tests start a server process but `make test-fast` would run them; mark them "
        "`@pytest.mark.integration` (or the module: `pytestmark = pytest.mark.integration`):\n  "
        + "\n  ".join(problems))


def test_the_check_sees_a_helper_a_fixture_passes_on(tmp_path: Path) -> None:
    """The check itself: a test reaching PostgreSQL through a local fixture is caught; marking
    the test, or the fixture's parameter that reaches it, clears it."""
    body = ("import pytest\n\n@pytest.fixture\ndef db(request):\n    return request.getfixturevalue('pg_url')\n\n"
            "def test_rows(db):\n    pass\n")
    marked_test = body.replace("def test_rows", "@pytest.mark.integration\ndef test_rows")
    marked_param = body.replace("@pytest.fixture\n", "@pytest.fixture(params=[pytest.param('pg', "
                                "marks=pytest.mark.integration)])\n")
    probe = tmp_path / "test_probe.py"
    for text, expected in [(body, ["test_probe.py::test_rows starts PostgreSQL (tests/pg.py)"]),
                           (marked_test, []), (marked_param, [])]:
        probe.write_text(text)
        assert unmarked_uses(probe) == expected, text


def test_make_test_fast_leaves_out_those_markers_and_slow() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\ntest-fast:", 1)[1].split("\n\n", 1)[0]
    assert all(f"not {m}" in recipe for m in sorted(LEFT_OUT | {"slow"})), recipe


def test_every_browser_and_real_sglang_file_runs_in_its_serial_group() -> None:
    """`make test`'s workers run the browser tests and the real-SGLang tier in groups of their
    marker, each group one file at a time (pwtest.test_group): a file carrying either marker outside a
    group of that marker would run beside the others and share the cores they paint or serve on."""
    stray = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        marks = _module_marks(path, tree) | {m for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
                                              and fn.name.startswith("test") for m in _marks(fn)}
        rel = path.relative_to(REPO).as_posix()
        group = test_group(f"{rel}::t")
        for marker in {m for m, _ in SERIAL_GROUPS.values()} & marks:
            if SERIAL_GROUPS.get(group, ("",))[0] != marker:
                stray.append(f"{rel} is marked {marker} but runs in group {group}")
    assert not stray, stray
    assert test_group("tests/storage/test_storage.py::test_x") == "tests/storage/test_storage.py"
    assert test_group("tests/browser/test_image_browser.py::t") == "browser-image"
    assert test_group("tests/real_sglang/test_real_sglang_zz_shutdown.py::t") == "real_sglang-shared"
    assert test_group("tests/real_sglang/test_real_sglang_flags.py::t") == "real_sglang"


def test_the_shared_real_server_modules_run_in_one_group_and_its_shutdown_last() -> None:
    """The modules that read the tier's shared server (they set no REAL_SERVER_FLAGS of their own)
    run in one group, on one worker, and the shutdown test, which stops that server, runs last."""
    from pwtest import run_order

    tier = sorted((TESTS / "real_sglang").glob("test_*.py"))
    import re

    reads = re.compile(r"\b(?:shared_)?real_server\b")  # the fixture, as an argument or by name
    readers = [p for p in tier if reads.search(p.read_text()) and "REAL_SERVER_FLAGS = [" not in p.read_text()]
    groups = {test_group(f"{p.relative_to(REPO).as_posix()}::t") for p in readers}
    assert groups == {"real_sglang-shared"}, groups
    members = [p.name for p in tier if test_group(f"{p.relative_to(REPO).as_posix()}::t") == "real_sglang-shared"]
    assert members[-1] == "test_real_sglang_zz_shutdown.py", members
    assert run_order("tests/browser/test_image_browser.py::t") < run_order("tests/storage/test_storage.py::t")
    assert test_group("tests/export/test_export_browser.py::t") == "browser"
