"""The parts of a launch-flag check that read no engine's table: a flag's `FlagSpec`, how a
profile's key must be written (`name_issue`), numeric ranges (`range_issue`), choices with a
near-miss hint (`choice_issue`), "did you mean" (`suggest`), and values that would be read as
options (`check_option_values`, `model_path_option_issue`). Each engine's flags.py holds its own table
(names, kinds, types, NUMERIC ranges, NOTES) and calls these. Pure.

A finding is an Issue (collectors/base.py): "error" blocks a launch, "warning" and "note" do not.
Flag names are written without their dashes (`max-running-requests`); messages show them with
(`--max-running-requests`).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from collectors.base import Issue

#: how a profile writes a flag: lowercase words joined by '-' (or '_', which each engine judges)
FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")

#: name -> (type, low, high, low_inclusive, high_inclusive); None bounds are open-ended.
Numeric = tuple[type, float | None, float | None, bool, bool]


@dataclass(frozen=True)
class FlagSpec:
    """One flag of an engine's table (an engine may add fields of its own)."""

    name: str  # no dashes
    aliases: tuple[str, ...]
    kind: str  # switch | boolopt (--x / --no-x) | value | optional | list | append
    choices: tuple[str, ...] | None
    deprecated: str | None = None  # the engine's own "Deprecated ..." help text


def name_issue(name: str, reserved: dict[str, str], example: str) -> Issue | None:
    """A key with its leading dashes, one that is no flag name (`example`: a flag of the engine's
    to show), or a flag Pitwall sets itself (`reserved`: name -> where it comes from)."""
    if name.startswith("-"):
        return Issue("error", name, f"Flag {name!r}: write flags without their leading dashes, e.g. `{name.lstrip('-')} = ...`.")
    if not FLAG_NAME.match(name):
        return Issue("error", name, f"Flag {name!r} is not a flag name; use lowercase words joined by '-', e.g. {example}.")
    if name in reserved:
        return Issue("error", name, f"--{name} cannot be set in [flags]: {reserved[name]}.")
    return None


def suggest(name: str, names: Iterable[str]) -> str:
    """' Did you mean --x?' for a close match among `names`, else ''."""
    close = difflib.get_close_matches(name, sorted(names), n=2, cutoff=0.75)
    if not close:
        return ""
    return " Did you mean " + " or ".join(f"--{c}" for c in close) + "?"


def range_text(low: float | None, high: float | None, low_inc: bool, high_inc: bool) -> str:
    """'a value in (0, 1)', 'a value >= 1', 'a value <= 9'."""
    if low is not None and high is not None:
        lb, rb = ("[" if low_inc else "("), ("]" if high_inc else ")")
        return f"a value in {lb}{low:g}, {high:g}{rb}"
    if low is not None:
        return f"a value {'>=' if low_inc else '>'} {low:g}"
    assert high is not None
    return f"a value {'<=' if high_inc else '<'} {high:g}"


def range_issue(name: str, value: int | float, numeric: Numeric) -> Issue | None:
    """A number that is not finite or lies outside the flag's range (its type is judged first)."""
    _, low, high, low_inc, high_inc = numeric
    v = float(value)
    if math.isnan(v) or math.isinf(v):
        return Issue("error", name, f"--{name} is {value!r}; expected a finite number.")
    too_low = low is not None and (v < low or (v == low and not low_inc))
    too_high = high is not None and (v > high or (v == high and not high_inc))
    if too_low or too_high:
        return Issue("error", name, f"--{name} is {value!r}; expected {range_text(low, high, low_inc, high_inc)}.")
    return None


def nested_issue(name: str, item: Any) -> Issue:
    """An item of a flag's value that is itself a table or a list."""
    return Issue("error", name, f"--{name} has a nested value {item!r}; expected plain values.")


def nul_issue(name: str) -> Issue:
    return Issue("error", name, f"--{name} contains a NUL character; remove it.")


def choice_issue(name: str, item: Any, choices: tuple[str, ...]) -> Issue | None:
    """An item that is not one of the flag's choices, with the nearest one as a hint."""
    if str(item) in choices:
        return None
    close = difflib.get_close_matches(str(item), list(choices), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return Issue("error", name, f"--{name} is {item!r}; expected one of {', '.join(choices)}.{hint}")


def check_option_values(flags: dict[str, Any], engine: str) -> list[Issue]:
    """No value may start with '-' (a list item or a string value would be read as an option of
    its own: `served-model-name = ["a", "--host", "0.0.0.0"]`). Numbers are exempt (`-1` is a
    value). `engine`: the engine's name, as the message says it."""
    issues: list[Issue] = []
    for name, value in flags.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item.lstrip().startswith("-"):
                issues.append(Issue("error", str(name), f"Flag {name}: the value {item!r} starts with '-', which {engine} would read as another option; a profile is data, not code."))
                break
            if isinstance(item, str) and "\x00" in item:
                issues.append(Issue("error", str(name), f"Flag {name} contains a NUL character; remove it."))
                break
    return issues


def model_path_option_issue(model_path: str, engine: str) -> list[Issue]:
    """A model_path the engine's command line would read as an option."""
    if model_path.lstrip().startswith("-"):
        return [Issue("error", "model_path", f"model_path {model_path!r} starts with '-', which {engine} would read as an option; use a model id or a folder.")]
    return []
