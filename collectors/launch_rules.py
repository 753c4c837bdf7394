"""The shape of every engine's launch deny table and the judgements that read no engine's names:
a `Rule` (kind, reason), the `Context` a profile is judged against, one flag or variable against
its rule (`check_rule`), and the [env] check (`check_env`) over an engine's `EnvTable`. Each
engine's sandbox.py holds its own tables (which flags and variables, which names a profile may
set, why) and calls these; launch_paths.py judges the paths and ports. Pure.

Rule kinds (an engine uses those it needs):

| kind | what the value may be | lifted by |
|---|---|---|
| code | nothing: it loads Python, a plugin or a library, or lets a client send code | `launch.allow_unsandboxed` naming it |
| remote | nothing: it points the server at a remote service | `launch.allow_unsandboxed` |
| expose | nothing: it lets any client reach something of the host | `launch.allow_unsandboxed` |
| model | a model id `org/name` (no URL) or a local path outside the system folders | `launch.allow_unsandboxed` |
| read | a local path outside the system folders (no URL) | `launch.allow_unsandboxed` |
| write | a path that resolves inside Pitwall's data folder | `launch.allow_unsandboxed` |
| port | a port no other part of Pitwall holds | never |
| never | nothing (Pitwall's own) | never |

[env] names are explicit only (no prefix families); `LD_*`, `DYLD_*`, `PYTHON*`, `PITWALL_*`,
`PATH`, `HOME`, ... are refused whatever a setting says (ENV_NEVER_PREFIXES, ENV_NEVER_NAMES).
Cross-check a refusal with `pitwall profiles validate NAME`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.base import Issue
from collectors.launch_paths import allow_hint, check_items, check_model_ref, values


@dataclass(frozen=True)
class Rule:
    kind: str  # code | remote | expose | model | read | write | port | never
    reason: str


def rules(kind: str, reason: str, *names: str) -> dict[str, Rule]:
    """{name: Rule(kind, reason)} for each name: one row of a deny table."""
    return {n: Rule(kind, reason) for n in names}


@dataclass(frozen=True)
class Context:
    """What the rules are judged against: launch.allow_unsandboxed, the data folder (also the
    server's working folder, so relative paths resolve there), the ports Pitwall holds, and the
    server the profile is for (its name and port), when known."""

    allowed: frozenset[str] = frozenset()
    data_dir: Path | None = None
    reserved_ports: dict[int, tuple[str, str | None]] | None = None
    server: str | None = None
    own_port: int | None = None


def check_rule(key: str, rule: Rule, value: Any, *, allowed: frozenset[str], base: Path | None,
               data_dir: Path | None, model_item: Callable[[str], str] = str, at_file: bool = False,
               passes: Collection[str] = ()) -> list[Issue]:
    """One flag or variable against its rule: never, code, remote and expose rules refuse it; a
    port rule is launch_paths.check_ports's; `allowed` lifts the rest, and a value of false or
    none is nothing to judge. A model, read or write rule judges each item (a table as JSON
    text): `model_item` the path an item names (a LoRA's NAME=PATH), `at_file` whether the
    engine reads `@PATH` as a file, `passes` the values the engine reads as no path at all."""
    if rule.kind == "never":
        return [Issue("error", key, f"{key} cannot be set in a profile: {rule.reason}.")]
    if rule.kind == "port" or key in allowed or value is False or value is None:
        return []
    if rule.kind in ("code", "remote"):
        return [Issue("error", key, f"{key} is refused: {rule.reason}; a profile is data, never code ({allow_hint(key)}).")]
    if rule.kind == "expose":
        return [Issue("error", key, f"{key} is refused: {rule.reason} ({allow_hint(key)}).")]
    items = [item for item in values(json.dumps(value) if isinstance(value, dict) else value) if item not in passes]
    if rule.kind == "model":
        items = [model_item(item) for item in items]
    return check_items(key, rule.kind, items, base=base, data_dir=data_dir, at_file=at_file)


def model_path_issue(model_path: str, allowed: frozenset[str], data_dir: Path | None) -> list[Issue]:
    """The profile's model_path as a model reference, unless launch.allow_unsandboxed names it."""
    if "model_path" in allowed or not model_path:
        return []
    issue = check_model_ref("model_path", model_path, data_dir)
    return [issue] if issue is not None else []


@dataclass(frozen=True)
class EnvTable:
    """An engine's [env] tables: its deny rules, its allow-list, the words its messages use
    (`engine`: "the allow-list of <engine>, CUDA, ... variables"; `example`: a name it tunes)."""

    deny: dict[str, Rule]
    names: frozenset[str]
    engine: str
    example: str


_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
#: Never allowed, whatever a setting says: they change which code runs (loader, interpreter,
#: search path) or are Pitwall's own.
ENV_NEVER_PREFIXES: tuple[str, ...] = ("LD_", "DYLD_", "PYTHON", "PITWALL_")
ENV_NEVER_NAMES: frozenset[str] = frozenset({"PATH", "HOME", "SHELL", "BASH_ENV", "ENV", "IFS"})


def env_forbidden(name: str) -> bool:
    return name in ENV_NEVER_NAMES or name.startswith(ENV_NEVER_PREFIXES)


def check_env(env: dict[str, Any], table: EnvTable, extra_allowed: tuple[str, ...] = (), *,
              allowed: frozenset[str] = frozenset()) -> list[Issue]:
    """[env] names and value types: never a loader/interpreter variable; a deny-table code or
    remote variable only when `allowed` (launch.allow_unsandboxed) names it; otherwise a name of
    the engine's allow-list, of its deny table (its value is judged by the engine's
    check_profile) or of `extra_allowed` (launch.allowed_env). A `PREFIX_*` entry there still
    admits a name, with a warning."""
    issues: list[Issue] = []
    prefixes = tuple(e[:-1] for e in extra_allowed if e.endswith("*"))
    for name, value in env.items():
        if not _ENV_NAME.match(str(name)):
            issues.append(Issue("error", str(name), f"Environment variable name {name!r} is invalid; use capitals, digits and '_' (e.g. {table.example}), not starting with a digit."))
            continue
        rule = table.deny.get(name)
        if env_forbidden(name):
            issues.append(Issue("error", name, f"Environment variable {name} is refused: it changes which code runs (loader, interpreter, search path) or is Pitwall's own; a profile is data, never code."))
            continue
        if rule is not None and rule.kind in ("code", "remote") and name not in allowed:
            issues.append(Issue("error", name, f"Environment variable {name} is refused: {rule.reason}; a profile is data, never code ({allow_hint(name)})."))
            continue
        if rule is None and name not in table.names and name not in extra_allowed:
            if prefixes and name.startswith(prefixes):
                issues.append(Issue("warning", name, f"Environment variable {name} is allowed only by a prefix entry of launch.allowed_env; prefixes are read for now and will be dropped, so list {name} there by name."))
            else:
                issues.append(Issue("error", name, f"Environment variable {name} is not on the allow-list of {table.engine}, CUDA, NCCL, PyTorch and Hugging Face variables; add \"{name}\" to launch.allowed_env in pitwall.toml if the server needs it."))
                continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            issues.append(Issue("error", name, f"Environment variable {name} is {value!r}; expected a string, e.g. {name} = \"1\"."))
            continue
        if "\x00" in str(value):
            issues.append(Issue("error", name, f"Environment variable {name} contains a NUL character; remove it."))
    return issues
