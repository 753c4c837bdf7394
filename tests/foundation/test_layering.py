"""Meta-tests of the layering inside Pitwall's packages (test_meta.py checks the top-level arrows).

- no import cycles among Pitwall's modules (app.py and every package of PACKAGES). An edge is any import of one of our modules: at the top of a module, in a class body,
  and inside a function too. A function-local import is the usual way to hide a cycle from the
  interpreter, not to remove it from the design: the two loops this test was written against
  (export/cli <-> export/fleet_cli, export/formats <-> export/html) were both closed by one. A
  function-local import that closes no loop (a heavy optional dependency, a start-up cost) is
  fine. Imports under `if TYPE_CHECKING:` are left out: they never run and name only types.
  `from pkg import name` is an edge to pkg.name when that is a module, else to pkg (its
  __init__).
- no upward import inside a package: config/ imports nothing of Pitwall but storage and the
  runner's alert-rule check (a bad [[alerts]] table fails at load); dashboard services never
  import components, pages or the CLI; components never import pages or the CLI; storage/repo
  imports only storage.
- no function over 120 lines (a long function is several steps that want names), outside the
  simulator's route table, `simulator/llm_routes.py` `add_routes`: one flat list of handlers
  that close over the server, each short.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("app.py", "config", "present", "scorecard", "launching", "export", "dashboard", "cli", "collectors", "storage", "simulator", "runner")
MAX_FUNCTION_LINES = 120
LONG_FUNCTIONS_ALLOWED = {("simulator/llm_routes.py", "add_routes")}
OURS = {"app", "config", "present", "scorecard", "launching", "export", "dashboard", "cli", "collectors", "storage", "simulator", "runner"}


def _py_files() -> list[Path]:
    out: list[Path] = []
    for root in PACKAGES:
        p = REPO / root
        out.extend([p] if p.is_file() else sorted(p.rglob("*.py")))
    return out


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = _py_files()
MODULES = {_module_name(p): p for p in FILES}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import that can run: module level, class bodies, function bodies; not the body of
    `if TYPE_CHECKING:` (its `else:` runs, so it is kept)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _edges(path: Path) -> dict[str, int]:
    """Our modules that `path` imports -> the line of the first such import."""
    out: dict[str, int] = {}
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                       for a in node.names]
        for t in targets:
            if t in MODULES:
                out.setdefault(t, node.lineno)
    out.pop(_module_name(path), None)
    return out


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycles() -> None:
    graph = {m: _edges(p) for m, p in MODULES.items()}
    cycles = _cycles(graph)
    said = []
    for comp in cycles:
        inside = set(comp)
        arrows = [f"{MODULES[a].relative_to(REPO).as_posix()}:{line} imports {b}"
                  for a in comp for b, line in sorted(graph[a].items()) if b in inside]
        said.append(" <-> ".join(comp) + " (" + "; ".join(arrows) + ")")
    assert not cycles, ("import cycles (move the shared piece into the lower module or a small "
                        "module both import): " + " | ".join(said))


def test_cycle_finder_sees_a_loop_closed_inside_a_function(tmp_path: Path) -> None:
    """The finder itself: a -> b at the top, b -> a inside a function, c alone."""
    assert _cycles({"a": {"b": 1}, "b": {"a": 9}, "c": {"a": 2}}) == [["a", "b"]]
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\n"
                   "def f():\n    import y\nclass C:\n    import z\n", encoding="utf-8")
    names = {a.name for n in _import_nodes(ast.parse(src.read_text())) for a in n.names}
    assert names == {"TYPE_CHECKING", "y", "z"}


def _our_imports(path: Path) -> set[str]:
    """Every dotted name of ours a module imports, anywhere in it (`from a import b` gives a and a.b)."""
    out: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] in OURS}


def _under(mods: set[str], *prefixes: str) -> list[str]:
    return sorted(m for m in mods if any(m == p or m.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("path", [p for p in FILES if p.relative_to(REPO).as_posix().startswith(("config/", "dashboard/", "storage/repo/"))],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_upward_import_inside_a_package(path: Path) -> None:
    rel = path.relative_to(REPO).as_posix()
    mods = _our_imports(path)
    if rel.startswith("config/"):
        bad = sorted(m for m in mods if m.split(".")[0] not in ("config", "storage")
                     and not (m == "runner.alerts.rules" or m.startswith("runner.alerts.rules.")))
        assert not bad, (f"{rel} imports {bad}; configuration imports nothing of Pitwall but storage "
                         "and runner/alerts/rules.py")
    if rel.startswith("dashboard/services/"):
        bad = _under(mods, "dashboard.components", "dashboard.pages", "cli")
        assert not bad, f"service {rel} imports {bad}; services sit below components, pages and the CLI"
    if rel.startswith("dashboard/components/"):
        bad = _under(mods, "dashboard.pages", "cli")
        assert not bad, f"component {rel} imports {bad}; components sit below pages and the CLI"
    if rel.startswith("storage/repo/"):
        bad = sorted(m for m in mods if m.split(".")[0] != "storage")
        assert not bad, f"{rel} imports {bad}; the repo layer imports only storage"


def test_no_function_over_120_lines() -> None:
    long = []
    for path in FILES:
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and (rel, node.name) not in LONG_FUNCTIONS_ALLOWED:
                    long.append(f"{rel} {node.name} ({n} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split into named steps): {long}"


def test_the_allowed_long_functions_still_exist() -> None:
    """An exception that outlived its function is removed from LONG_FUNCTIONS_ALLOWED."""
    for rel, name in LONG_FUNCTIONS_ALLOWED:
        tree = ast.parse((REPO / rel).read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
                   for n in ast.walk(tree)), f"{rel} {name} is gone; drop it from LONG_FUNCTIONS_ALLOWED"
