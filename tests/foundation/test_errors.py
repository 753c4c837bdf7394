"""Meta-tests of Pitwall's one exception root (storage/errors.py).

- every exception class defined in Pitwall's packages (app.py and every package but the
  simulator, which is SGLang's double and imports nothing of Pitwall) derives from PitwallError,
  through one of the families that are its direct subclasses;
- the families are direct subclasses of PitwallError, and each has a documented rule;
- a class that had a builtin base keeps it, so `except ValueError` still catches it.

Exception classes are found by their source (a class whose base is a builtin exception, a name
ending in Error/Exception, or another exception class found so), then checked on the imported class.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
from pathlib import Path

import pytest

from storage import errors
from storage.errors import PitwallError

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("app.py", "config", "present", "scorecard", "launching", "export", "dashboard", "cli",
            "collectors", "storage", "runner")
BUILTIN_EXCEPTIONS = {n for n, v in vars(builtins).items()
                      if isinstance(v, type) and issubclass(v, BaseException)}


def _files() -> list[Path]:
    out: list[Path] = []
    for root in PACKAGES:
        p = REPO / root
        out.extend([p] if p.is_file() else sorted(p.rglob("*.py")))
    return out


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _exception_classes() -> list[tuple[str, str]]:
    """(module, class name) of every class whose source makes it an exception."""
    classes: list[tuple[str, str, list[str]]] = []
    for path in _files():
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b for b in map(_base_name, node.bases) if b]
                classes.append((module, node.name, bases))
    known = set(BUILTIN_EXCEPTIONS)
    while True:  # a class is an exception when one of its bases is
        found = {name for _, name, bases in classes
                 if name not in known and any(b in known or b.endswith(("Error", "Exception"))
                                              for b in bases)}
        if not found:
            break
        known |= found
    return sorted((m, n) for m, n, _ in classes if n in known and n not in BUILTIN_EXCEPTIONS)


EXCEPTIONS = _exception_classes()


def test_the_walk_finds_the_exceptions_it_should() -> None:
    """The source walk sees classes of every shape: a builtin base, a family, a private class."""
    names = {n for _, n in EXCEPTIONS}
    assert {"AlertRuleError", "CliError", "LeaseHeld", "_Interrupted", "TooLarge",
            "LogPathRefused", "SignInExpired", "PitwallError"} <= names


@pytest.mark.parametrize(("module", "name"), EXCEPTIONS, ids=lambda v: v)
def test_every_exception_derives_from_pitwall_error(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, BaseException), f"{module}.{name} is not an exception"
    assert issubclass(cls, PitwallError), (
        f"{module}.{name} does not derive from PitwallError: subclass the family in "
        f"storage/errors.py named by what went wrong (keep any builtin base after it)")


FAMILIES = [v for v in vars(errors).values()
            if inspect.isclass(v) and issubclass(v, PitwallError) and v is not PitwallError]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_families_are_direct_documented_subclasses(family: type[PitwallError]) -> None:
    assert PitwallError in family.__bases__, f"{family.__name__} is not a direct subclass of PitwallError"
    assert family.__doc__ and family.__doc__.strip(), f"{family.__name__} has no docstring"
    assert family.code in (1, 2), f"{family.__name__}.code is not an exit status a command uses"


@pytest.mark.parametrize(("cls", "builtin"), [
    ("config.settings.SettingsError", ValueError), ("launching.profiles.ProfileError", ValueError),
    ("runner.alerts.rules.AlertRuleError", ValueError), ("runner.lease.LeaseHeld", RuntimeError),
    ("storage.db.SchemaError", RuntimeError), ("collectors.probe.sse.InvalidResponse", ValueError),
    ("collectors.http_decode.EncodingError", ValueError),
])
def test_builtin_bases_are_kept(cls: str, builtin: type[Exception]) -> None:
    module, _, name = cls.rpartition(".")
    assert issubclass(getattr(importlib.import_module(module), name), builtin)


def test_the_homes_still_export_the_moved_classes() -> None:
    """CollectorError and SchemaError live in storage/errors.py; callers import them as before."""
    from collectors.base import CollectorError
    from storage.db import SchemaError

    assert CollectorError is errors.CollectorError and SchemaError is errors.SchemaError


def _error(dotted: str, *args: object) -> Exception:
    module, _, name = dotted.rpartition(".")
    cls: type[Exception] = getattr(importlib.import_module(module), name)
    return cls(*args)


@pytest.mark.parametrize(("dotted", "args", "code"), [
    ("config.settings.SettingsError", ("port must be an integer.",), 2),
    ("cli.common.CliError", ("No server named 'a'; see `pitwall status`.",), 1),
    ("cli.common.CliError", ("Not a Pitwall database.", 2), 2),
    ("runner.lease.LeaseHeld", ("Another runner holds host h; stop it first.",), 1),
    ("launching.profiles.ProfileError", ("p.toml: flags must be a table.",), 2),
    ("storage.errors.SchemaError", ("Not a Pitwall database.",), 2),
])
def test_main_prints_any_pitwall_error_as_one_line_with_its_code(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        dotted: str, args: tuple[object, ...], code: int) -> None:
    """`pitwall` catches PitwallError once: one line on stderr, the error's exit status, no
    traceback, whichever family reaches it (here a subcommand that lets one through)."""
    from cli import main as cli_main

    exc = _error(dotted, *args)

    def boom(_argv: list[str]) -> int:
        raise exc

    monkeypatch.setitem(cli_main.DELEGATED, "boom", ("raises", boom))
    assert cli_main.main(["boom"]) == code
    assert capsys.readouterr().err == f"pitwall: {exc}\n"


def test_main_masks_a_secret_in_the_line(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from cli import main as cli_main

    def boom(_argv: list[str]) -> int:
        raise errors.SchemaError("postgresql://pitwall:hunter2@db/pitwall is not a Pitwall database.")

    monkeypatch.setitem(cli_main.DELEGATED, "boom", ("raises", boom))
    assert cli_main.main(["boom"]) == 2
    assert "hunter2" not in capsys.readouterr().err
