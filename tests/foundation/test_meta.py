"""Meta-tests that keep the seams honest.

- imports run one way: collectors -> storage; simulator imports nothing of ours;
  nothing imports dashboard except app.py, the CLI (not its runner assembly, cli/wiring.py) and
  dashboard itself; only app.py, pages and components import streamlit; pages do no I/O of
  their own (no httpx, aiohttp, subprocess, pynvml, sqlalchemy, sqlite3); services never import
  components (components may import services); components never import storage (they read and
  write through services).
- every page has an AppTest test; every setting appears in the README; every collector in the
  registry has a test file.
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

import pytest

from config.settings import SETTINGS

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("app.py", "config", "present", "scorecard", "launching", "export", "dashboard", "cli", "collectors", "storage", "simulator", "runner")


def _py_files(root: str) -> list[Path]:
    p = REPO / root
    return [p] if p.is_file() else sorted(p.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            # `from dashboard import components` imports the module dashboard.components
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _top(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


ALL = [f for root in PACKAGES for f in _py_files(root)]
#: the domain packages between the runner and the UI: they import neither dashboard nor cli
DOMAIN = ("config/", "present/", "scorecard/", "launching/", "export/")


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(REPO)))
def test_import_direction(path: Path) -> None:
    rel = path.relative_to(REPO).as_posix()
    mods = _imports(path)
    tops = _top(mods)
    if rel.startswith("simulator/"):
        assert not tops & {"dashboard", "collectors", "storage"}, f"{rel} must import nothing of Pitwall"
    if rel.startswith(("collectors/", "storage/", "runner/")):
        assert "dashboard" not in tops, f"{rel} must not import dashboard"
    if rel.startswith(("collectors/", "storage/")):
        assert "runner" not in tops, f"{rel} must not import the runner package (it imports them)"
    if rel.startswith("config/"):
        assert not tops & {"dashboard", "collectors"}, f"{rel} must not import {tops & {'dashboard', 'collectors'}}"
    if rel.startswith(DOMAIN):
        assert not tops & {"dashboard", "cli"}, f"{rel} must not import {tops & {'dashboard', 'cli'}} (they import it)"
    if "dashboard" in tops:
        assert rel == "app.py" or rel.startswith(("dashboard/", "cli/")), (
            f"{rel} imports dashboard; only app.py and the CLI may")
    if rel == "cli/wiring.py":  # the runner's assembly: domain packages and the runner, never the UI
        assert "dashboard" not in tops, f"{rel} imports dashboard; the runner's parts come from the domain packages"
    if rel.startswith("dashboard/"):
        assert "cli" not in tops, f"{rel} imports the CLI package; the CLI starts the dashboard, not the other way"
    if rel.startswith("storage/"):
        assert "collectors" not in tops, f"{rel} must not import collectors"
    if "streamlit" in tops:
        assert rel == "app.py" or rel.startswith(("dashboard/pages/", "dashboard/components/")), (
            f"{rel} imports streamlit; only app.py, pages and components may"
        )
    if rel.startswith("dashboard/pages/"):
        banned = {"httpx", "aiohttp", "subprocess", "pynvml", "sqlalchemy", "sqlite3", "sqlmodel", "requests"}
        assert not tops & banned, f"page {rel} does I/O itself ({tops & banned}); use a service"
        assert "storage" not in tops, f"page {rel} reads storage directly; use a service"
    if rel.startswith("dashboard/components/"):
        assert not tops & {"httpx", "aiohttp", "subprocess", "pynvml"}, f"{rel} does I/O"
        assert "storage" not in tops, f"component {rel} imports storage; read and write through a service"
    if rel.startswith("dashboard/services/"):
        ui = sorted(m for m in mods if m == "dashboard.components" or m.startswith("dashboard.components."))
        assert not ui, f"service {rel} imports UI components ({ui}); services may not import components"


def _calls(path: Path) -> set[str]:
    """Dotted names of what a module calls or references: `os.kill`, `subprocess.Popen`, ..."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            out.add(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "subprocess"):
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


PROCESS_CALLS = {"os.kill", "os.killpg", "os.fork", "os.execv", "os.execvp", "os.spawnv", "os.system",
                 "os.popen", "os.posix_spawn", "signal.pthread_kill"}


@pytest.mark.parametrize("path", [p for p in ALL if not p.relative_to(REPO).as_posix().startswith(("runner/", "simulator/"))],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_only_the_runner_package_starts_or_signals_processes(path: Path) -> None:
    """One owner of processes. Outside runner/ (the simulator aside) no module imports
    subprocess or multiprocessing, nor calls os.kill / os.killpg / os.system and friends."""
    rel = path.relative_to(REPO).as_posix()
    tops = _top(_imports(path))
    assert not tops & {"subprocess", "multiprocessing"}, f"{rel} imports {tops & {'subprocess', 'multiprocessing'}}; go through runner/"
    bad = _calls(path) & PROCESS_CALLS
    assert not bad, f"{rel} calls {bad}; only runner/procs.py starts or signals processes"


def test_no_module_over_500_lines() -> None:
    big = [(p.relative_to(REPO).as_posix(), n) for p in ALL
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500]
    assert not big, f"modules over 500 lines (split by responsibility): {big}"


def test_every_page_has_an_apptest() -> None:
    pages = sorted((REPO / "dashboard" / "pages").glob("*.py"))
    pages = [p for p in pages if p.name != "__init__.py"]
    tests = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("test_*.py"))
    missing = [p.name for p in pages if f"dashboard/pages/{p.name}" not in tests]
    assert not missing, f"pages without an AppTest: {missing}"


def test_every_setting_is_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = [s.key for s in SETTINGS if f"`{s.key}`" not in readme]
    missing += [s.env for s in SETTINGS if s.env and f"`{s.env}`" not in readme]
    assert not missing, f"settings missing from README.md: {missing}"


def test_every_collector_has_a_test() -> None:
    from collectors.registry import collector_names

    tests = {p.name for p in (REPO / "tests").rglob("test_*.py")}
    missing = [name for name in collector_names() if not any(name in t for t in tests)]
    assert not missing, f"collectors without a test file named after them: {missing}"


def test_no_absolute_paths_of_this_machine() -> None:
    # the checkout's folder and the folder it sits in, unless that is a shared system folder (a
    # clone in /tmp: "/tmp/" is a legitimate path in a test's data), and the home folder
    shared = {"/", "/tmp", "/var/tmp", tempfile.gettempdir()}
    needles = [str(REPO), str(Path.home()) + "/"]
    if str(REPO.parent) not in shared:
        needles.append(str(REPO.parent) + "/")
    offenders = []
    for path in (REPO).rglob("*"):
        if not path.is_file() or any(part in (".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis") for part in path.parts):
            continue
        if path.suffix in (".png", ".db", ".whl", ".gz", ".pyc"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if any(n in text for n in needles if n not in ("/", "//")):
            offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"absolute local paths in: {offenders}"


def test_readme_metric_table_matches_metric_specs() -> None:
    from scorecard.metric_specs import metric_table_markdown

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start, end = "<!-- metric-table:start -->\n", "\n<!-- metric-table:end -->"
    assert start in readme and end in readme
    table = readme.split(start, 1)[1].split(end, 1)[0]
    assert table.strip() == metric_table_markdown().strip(), (
        "README metric table is stale: paste the output of metric_table_markdown()"
    )


def test_every_event_kind_named_in_code_is_in_the_one_table() -> None:
    """storage/kinds.py is the one table of event kinds: the log parser's kinds, the chart's
    marked kinds and the Events page's filter all come from it or are a subset of it."""
    from collectors.sglang.log_parse import EVENT_KINDS as parser_kinds
    from dashboard.components.timeseries_charts import EVENT_KINDS_MARKED
    from dashboard.services.views.timeseries import EVENT_KINDS as page_kinds
    from storage.kinds import EVENT_KINDS

    assert set(parser_kinds) <= set(EVENT_KINDS)
    assert set(EVENT_KINDS_MARKED) <= set(EVENT_KINDS)
    assert list(page_kinds) == list(EVENT_KINDS)


def test_storage_repo_exports_an_explicit_list() -> None:
    """`repo.x` leads to one module: each storage/repo family lists what it offers in `__all__`
    (names it defines itself), storage/repo/__init__.py imports those names one by one (no star
    import) and exports exactly their union, so no `select`, `pd` or `Session` rides along."""
    import importlib
    import types

    from storage import repo

    root = REPO / "storage" / "repo"
    init = ast.parse((root / "__init__.py").read_text(encoding="utf-8"))
    stars = [n.module for n in ast.walk(init)
             if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)]
    assert not stars, f"storage/repo/__init__.py star-imports {stars}: import each name by name"

    union: list[str] = []
    for path in sorted(p for p in root.glob("*.py") if p.stem != "__init__"):
        mod = importlib.import_module(f"storage.repo.{path.stem}")
        declared = getattr(mod, "__all__", None)
        assert declared is not None, f"storage/repo/{path.name} has no __all__: list what it offers"
        defined: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined.add(node.target.id)
        foreign = [n for n in declared if n not in defined]
        assert not foreign, f"storage/repo/{path.name}: __all__ lists {foreign}, defined elsewhere"
        union += declared

    assert len(repo.__all__) == len(set(repo.__all__)), "storage.repo.__all__ lists a name twice"
    assert set(repo.__all__) == set(union), (
        f"storage.repo.__all__ differs from the families' __all__: missing "
        f"{sorted(set(union) - set(repo.__all__))}, extra {sorted(set(repo.__all__) - set(union))}")
    strays = [n for n in repo.__all__
              if isinstance(v := getattr(repo, n), types.FunctionType | type)
              and not v.__module__.startswith("storage.repo.")]
    assert not strays, f"storage.repo exports {strays}, defined outside storage/repo"

    def family(v: object) -> bool:
        return isinstance(v, types.ModuleType) and v.__name__.startswith("storage.repo.")

    leaked = sorted(n for n, v in vars(repo).items()
                    if not n.startswith("__") and n not in repo.__all__ and not family(v)
                    and getattr(v, "__module__", None) != "__future__")  # `annotations`
    assert not leaked, f"storage.repo exposes {leaked} outside __all__; import them from their home"
# -- docs that stay true: no issue numbers, no documents outside the repository, one Security model --

_DOC_SKIP_PARTS = (".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                   ".hypothesis", "pitwall-data", ".whl", ".gl", "results", "node_modules")
_DOC_SUFFIXES = (".py", ".md", ".toml", ".sh", ".txt", ".prom", ".yml", ".yaml", ".cfg", ".ini")


def _doc_files() -> list[Path]:
    """Every text file of the checkout that can carry a comment or a docstring."""
    out = []
    for path in sorted(REPO.rglob("*")):
        rel = path.relative_to(REPO)
        if any(part in _DOC_SKIP_PARTS for part in rel.parts) or not path.is_file():
            continue
        if path.suffix in _DOC_SUFFIXES or path.name == "Makefile":
            out.append(path)
    return out


def test_no_issue_numbers_in_code_or_docs() -> None:
    """History lives in git: a comment or docstring says the current rule, not the number of the
    issue that brought it. Another project's issue threads (dcgm-exporter's, where a payload form
    was posted) are evidence of a form and may be cited."""
    import re

    pattern = re.compile(r"\b[Ii]ssue\s+#?\d+")
    hits = []
    for path in _doc_files():
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:90]}")
    assert not hits, "issue numbers in code or docs (say the rule, not its history):\n" + "\n".join(hits)


def test_no_references_to_documents_outside_the_repository() -> None:
    """A pointer a reader of this repository cannot follow is not documentation: no path into a
    sibling checkout, no reference note, design note or style note unless that Markdown file is
    in the repository. Write the fact itself, or point at a file that is here."""
    import re

    here = {p.relative_to(REPO).as_posix() for p in REPO.rglob("*.md")
            if not any(part in _DOC_SKIP_PARTS for part in p.relative_to(REPO).parts)}
    names = {Path(p).name for p in here}
    pattern = re.compile(r"\.\./shared|(?:\.\./)+[\w/.-]+\.md\b|(?<![\w/.-])(?:reference/[\w.-]+\.md"
                         r"|[A-Z][A-Z_]*\.md|[a-z0-9]+(?:-[a-z0-9]+)+\.md)\b|\u00a7\s?\d")  # a section sign: a note's section
    hits = []
    for path in _doc_files():
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in pattern.finditer(line):
                ref = m.group(0)
                if ref in here or (not ref.startswith(("../", "reference/")) and ref in names):
                    continue
                hits.append(f"{path.relative_to(REPO)}:{n}: {ref}")
    assert not hits, "references to documents not in this repository:\n" + "\n".join(hits)


def test_readme_has_one_security_model_section() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    headings = [line for line in readme.splitlines() if line.startswith("#") and "Security model" in line]
    assert len(headings) == 1, f"README.md needs exactly one 'Security model' heading, has {headings}"


def test_readme_states_the_intent_lanes_the_runner_has() -> None:
    """"Intents run in N lanes (...)": N is storage/kinds.py's LANES, and each lane is named."""
    import re

    from storage.kinds import LANES

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"Intents run in (\w+)\s+lanes \(([^)]*)\)", readme)
    assert m, "README.md should say how many lanes intents run in: 'Intents run in N lanes (...)'"
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    assert m.group(1) == words[len(LANES)], f"README.md says {m.group(1)} lanes; the runner has {len(LANES)}: {LANES}"
    unnamed = [lane for lane in LANES if f"{lane}:" not in m.group(2)]
    assert not unnamed, f"README.md's lane list does not name {unnamed}"


def test_readme_tree_names_what_is_built() -> None:
    """README's "The tree" names every top-level entry of the repository and every module and
    package one level under dashboard/, collectors/, runner/ and storage/."""
    import subprocess

    try:
        tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True,
                                 check=True, timeout=60).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("git ls-files is not available here")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tree = readme.split("### The tree", 1)[1].split("\n### ", 1)[0]
    missing = []
    for entry in sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in tracked} - {"README.md", ".gitignore"}):
        if f"`{entry}`" not in tree:
            missing.append(entry)
    for pkg in ("dashboard", "collectors", "runner", "storage"):
        names = {p.split("/")[1] for p in tracked if p.startswith(pkg + "/") and p.count("/") >= 1}
        for name in sorted(names - {"__init__.py", "__main__.py"}):
            stem = name[:-3] if name.endswith(".py") else name
            is_pkg = any(p.startswith(f"{pkg}/{name}/") for p in tracked)
            token = f"`{stem}/`" if is_pkg else f"`{stem}`"
            if token not in tree and f"`{pkg}/{name}`" not in tree:
                missing.append(f"{pkg}/{name}")
    assert not missing, f"README.md's tree does not name: {missing}"
