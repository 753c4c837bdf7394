"""SGLang launch flags: the bundled 0.5.23 table and the pure checks run on a profile's [flags].

The table is SGLang 0.5.23's own `sglang serve --help` output (sglang-0.5.23-help.txt next to this
module, captured from the real server by scripts/sglang_cpu/capture_fixtures.py) parsed by
`parse_help_text()`: every flag name and alias, whether it is a bare switch, a `--x/--no-x` pair,
takes one value, an optional value or a list, and its choices. `--help` does not print types, so
the numeric types and ranges of the flags operators tune are declared in NUMERIC below
(from `ServerArgs`'s field types), and the removals, deprecations and misconceptions that need a better
message than argparse's in NOTES. Everything else is accepted as a string.

`check_flags(flags)` returns Issues (severity, flag, message); an "error" blocks a launch, a
"warning" does not. When SGLang itself can be imported in the server's Python, launcher.py asks
its real parser first and keeps only the checks argparse cannot do (ranges, hints). What a flag
may point at (code, remote services, paths, ports), and a profile's [env], is the sandbox's call:
sandbox.py (`check_env`, `check_profile`).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from collectors import flagtable
from collectors.base import Issue
from collectors.flagtable import FlagSpec, Numeric

# the finding type lives in collectors/base.py, FlagSpec in collectors/flagtable.py; importable from here too
__all__ = ["FlagSpec", "Issue"]

SGLANG_VERSION = "0.5.23"
HELP_FILE = Path(__file__).with_name(f"sglang-{SGLANG_VERSION}-help.txt")
#: The diffusion server's flags (``sglang serve --model-type diffusion``), read from the 0.5.23
#: wheel by scripts/sglang_diffusion/extract_flags.py: [{"names", "kind", "type", "choices"}].
DIFFUSION_FILE = Path(__file__).with_name(f"sglang-diffusion-{SGLANG_VERSION}-flags.json")
#: A profile is a diffusion server when its [flags] say so the way SGLang's own `sglang serve`
#: does: `model-type = "diffusion"` (sglang/cli/serve.py removes it before either parser runs).
MODEL_TYPES = ("auto", "llm", "diffusion")

#: Flags a profile may not set: they come from the profile's model_path and the server's base_url.
RESERVED = {
    "model-path": "set model_path at the top of the profile, not in [flags]",
    "model": "set model_path at the top of the profile, not in [flags]",
    "host": "the host comes from the server's base_url in pitwall.toml",
    "port": "the port comes from the server's base_url in pitwall.toml",
}

#: name -> (type, low, high, low_inclusive, high_inclusive); None bounds are open-ended.
NUMERIC: dict[str, Numeric] = {
    "mem-fraction-static": (float, 0.0, 1.0, False, False),
    "tp-size": (int, 1, None, True, True),
    "dp-size": (int, 1, None, True, True),
    "pp-size": (int, 1, None, True, True),
    "ep-size": (int, 1, None, True, True),
    "attn-dp-size": (int, 1, None, True, True),
    "max-running-requests": (int, 1, None, True, True),
    "max-queued-requests": (int, 1, None, True, True),
    "max-total-tokens": (int, 1, None, True, True),
    "chunked-prefill-size": (int, -1, None, True, True),  # -1 disables chunked prefill
    "max-prefill-tokens": (int, 1, None, True, True),
    "schedule-conservativeness": (float, 0.0, None, False, True),
    "cuda-graph-max-bs-decode": (int, 1, None, True, True),
    "cuda-graph-max-bs-prefill": (int, 1, None, True, True),
    "torch-compile-max-bs": (int, 1, None, True, True),
    "decode-log-interval": (int, 1, None, True, True),
    "stream-interval": (int, 1, None, True, True),
    "page-size": (int, 1, None, True, True),
    "context-length": (int, 1, None, True, True),
    "random-seed": (int, 0, None, True, True),
    "watchdog-timeout": (float, 0.0, None, False, True),
    "dist-timeout": (int, 1, None, True, True),
    # diffusion server (sglang serve --model-type diffusion)
    "num-gpus": (int, 1, None, True, True),
    "sp-degree": (int, 1, None, True, True),
    "ulysses-degree": (int, 1, None, True, True),
    "ring-degree": (int, 1, None, True, True),
    "batching-max-size": (int, 1, None, True, True),
    "batching-delay-ms": (float, 0.0, None, True, True),
    "nnodes": (int, 1, None, True, True),
    "node-rank": (int, 0, None, True, True),
    "base-gpu-id": (int, 0, None, True, True),
}

#: Flags whose message must say more than "unknown": (severity, message).
NOTES: dict[str, tuple[str, str]] = {
    "enable-radix-cache": (
        "error",
        "--enable-radix-cache does not exist in any SGLang release: the radix cache is on by "
        "default; `disable-radix-cache = true` turns it off.",
    ),
    "cuda-graph-max-bs": (
        "error",
        "--cuda-graph-max-bs was removed in SGLang 0.5.20 (a deprecated alias since 0.5.14); use "
        "cuda-graph-max-bs-decode and/or cuda-graph-max-bs-prefill.",
    ),
    "cuda-graph-bs": (
        "error",
        "--cuda-graph-bs was split in SGLang 0.5.20; use cuda-graph-bs-decode and/or "
        "cuda-graph-bs-prefill.",
    ),
    "disable-cuda-graph": (
        "warning",
        "--disable-cuda-graph is deprecated since SGLang 0.5.14 (still accepted); use "
        'cuda-graph-backend-decode = "disabled" and cuda-graph-backend-prefill = "disabled".',
    ),
    "enable-dp-attention": (
        "warning",
        "--enable-dp-attention is deprecated since SGLang 0.5.22; use attn-dp-size = <dp size> "
        "instead of dp-size with enable-dp-attention.",
    ),
    "stream-output": (
        "error",
        "--stream-output was renamed in SGLang 0.5.12; use incremental-streaming-output = true.",
    ),
}

def parse_help_text(text: str) -> dict[str, FlagSpec]:
    """`sglang serve --help` output -> {name or alias: FlagSpec} (pure; any SGLang version)."""
    lines = text.splitlines()
    try:
        start = lines.index("options:") + 1
    except ValueError:
        return {}
    entries: list[list[str]] = []
    for line in lines[start:]:
        if line.startswith("  -") and not line.startswith("   "):
            m = re.match(r"(\S.*?)(?:\s{2,}(.*))?$", line[2:])
            assert m is not None
            entries.append([m.group(1), m.group(2) or ""])
        elif entries and line.startswith("    "):
            entries[-1][1] += " " + line.strip()
    out: dict[str, FlagSpec] = {}
    for header, desc in entries:
        if header.startswith("-h"):
            continue
        names: list[str] = []
        kind: str | None = None
        choices: tuple[str, ...] | None = None
        for alt in re.split(r", (?=--)", header):
            flag, _, meta = alt.strip().partition(" ")
            names.append(flag.lstrip("-"))
            k, ch = _meta_kind(meta)
            kind = kind or k
            choices = choices or ch
        if len(names) == 2 and names[1] == "no-" + names[0]:
            kind, names = "boolopt", names[:1]
        desc = re.sub(r"\s+", " ", desc).strip()
        deprecated = desc if desc.startswith(("Deprecated", "(Deprecated")) else None
        spec = FlagSpec(names[0], tuple(names[1:]), kind or "switch", choices, deprecated)
        for name in names:
            out[name] = spec
    return out


def _meta_kind(meta: str) -> tuple[str, tuple[str, ...] | None]:
    if not meta:
        return "switch", None
    m = re.search(r"\{([^}]*)\}", meta)
    choices = tuple(m.group(1).split(",")) if m else None
    if meta.endswith("...]"):
        return "list", choices
    if meta.startswith("[") and meta.endswith("]"):
        return "optional", choices
    return "value", choices


#: The router's flags (``python -m sglang_router.launch_router``, sglang-router 0.3.2, the release
#: SGLang 0.5.23's PD tests start), read from the wheel by scripts/sglang_router/extract_flags.py.
ROUTER_VERSION = "0.3.2"
ROUTER_FILE = Path(__file__).with_name(f"sglang-router-{ROUTER_VERSION}-flags.json")
#: a profile is the router's when its [flags] name its workers the router's way
ROUTER_MARKS = ("pd-disaggregation", "worker-urls", "prefill", "decode")


@lru_cache(maxsize=1)
def router_table() -> dict[str, FlagSpec]:
    """{name: FlagSpec} of the router's flags (ROUTER_FILE)."""
    table: dict[str, FlagSpec] = {}
    for f in json.loads(ROUTER_FILE.read_text())["flags"]:
        names = [n.removeprefix("--") for n in f["names"]]
        spec = FlagSpec(names[0], tuple(names[1:]), f["kind"], tuple(f["choices"]) if f["choices"] else None)
        for n in names:
            table.setdefault(n, spec)
    return table


def is_router(flags: dict[str, Any]) -> bool:
    """The profile launches the router (its [flags] name workers: worker-urls, or PD's prefill/decode)."""
    return any(flags.get(k) not in (None, False) for k in ROUTER_MARKS)


@lru_cache(maxsize=1)
def bundled_table() -> dict[str, FlagSpec]:
    """The 0.5.23 table (parsed once per process)."""
    return parse_help_text(HELP_FILE.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def diffusion_table() -> dict[str, FlagSpec]:
    """{name or alias: FlagSpec} of the diffusion server's 0.5.23 flags (DIFFUSION_FILE)."""
    kinds = {"switch": "switch", "optional": "optional", "list": "list", "value": "value"}
    table: dict[str, FlagSpec] = {}
    for f in json.loads(DIFFUSION_FILE.read_text())["flags"]:
        names = [n.removeprefix("--") for n in f["names"]]
        spec = FlagSpec(names[0], tuple(names[1:]), kinds[f["kind"]],
                        tuple(f["choices"]) if f["choices"] else None)
        for n in names:
            table.setdefault(n, spec)
    return table


def is_diffusion(flags: dict[str, Any]) -> bool:
    """The profile launches SGLang's diffusion server (`model-type = "diffusion"`)."""
    return str(flags.get("model-type", "")).lower() == "diffusion"


def table_for(flags: dict[str, Any]) -> dict[str, FlagSpec]:
    return router_table() if is_router(flags) else diffusion_table() if is_diffusion(flags) else bundled_table()


def flag_names(table: dict[str, FlagSpec] | None = None) -> list[str]:
    return sorted((table or bundled_table()).keys())


def suggest(name: str, table: dict[str, FlagSpec] | None = None) -> str:
    """' Did you mean --x?' for a close match, else ''."""
    return flagtable.suggest(name, flag_names(table))


def _type_issue(name: str, value: Any) -> Issue | None:
    spec = NUMERIC.get(name)
    if spec is None:
        return None
    want = spec[0]
    if isinstance(value, bool) or not isinstance(value, int | float):
        form = "a whole number" if want is int else "a number"
        return Issue("error", name, f"--{name} is {value!r}; expected {form}, e.g. {name} = {_example(name)}.")
    if want is int and isinstance(value, float) and not value.is_integer():
        return Issue("error", name, f"--{name} is {value!r}; expected a whole number, e.g. {name} = {_example(name)}.")
    return flagtable.range_issue(name, value, spec)


def _example(name: str) -> str:
    return {"mem-fraction-static": "0.85"}.get(name, "8" if NUMERIC[name][0] is int else "1.0")


def check_value(name: str, spec: FlagSpec, value: Any) -> list[Issue]:
    """Shape, choices, type and range of one known flag's TOML value."""
    shown = f"--{name}"
    if spec.kind == "switch":
        if not isinstance(value, bool):
            return [Issue("error", name, f"{shown} is a switch and takes no value; write `{name} = true` (or leave it out).")]
        return []
    if spec.kind == "boolopt":
        if not isinstance(value, bool):
            return [Issue("error", name, f"{shown} is a switch; write `{name} = true` or `{name} = false`.")]
        return []
    if isinstance(value, bool):
        if spec.kind == "optional" and value is True:
            return []
        return [Issue("error", name, f"{shown} needs a value, not {str(value).lower()}; e.g. {name} = {_value_example(name, spec)}.")]
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and spec.kind != "list":
        return [Issue("error", name, f"{shown} takes one value, not a list.")]
    if isinstance(value, dict):
        return []  # JSON-valued flags (e.g. json-model-override-args) are passed as JSON text
    issues: list[Issue] = []
    for v in values:
        if isinstance(v, dict | list):
            issues.append(flagtable.nested_issue(name, v))
            continue
        not_a_choice = flagtable.choice_issue(name, v, spec.choices) if spec.choices is not None else None
        if not_a_choice is not None:
            issues.append(not_a_choice)
            continue
        type_issue = _type_issue(spec.name, v)
        if type_issue is not None:
            issues.append(type_issue)
        if isinstance(v, str) and "\x00" in v:
            issues.append(flagtable.nul_issue(name))
    return issues


def _value_example(name: str, spec: FlagSpec) -> str:
    if spec.choices:
        return repr(spec.choices[0]).replace("'", '"')
    if spec.name in NUMERIC:
        return _example(spec.name)
    return '"..."'


def check_flags(
    flags: dict[str, Any], table: dict[str, FlagSpec] | None = None, *, known_by_parser: bool = False
) -> list[Issue]:
    """Issues of a profile's [flags] table against the bundled 0.5.23 table.

    known_by_parser: SGLang's real parser already accepted names, shapes and choices; only run
    the checks it cannot do (ranges, deprecation hints, reserved flags).
    """
    table = table or table_for(flags)
    server = "diffusion server " if table is diffusion_table() else ""
    product = f"sglang-router {ROUTER_VERSION}" if table is router_table() else f"SGLang {SGLANG_VERSION} {server}"
    issues: list[Issue] = []
    for raw_name, value in flags.items():
        name = str(raw_name)
        if name == "model-type":
            if str(value).lower() not in MODEL_TYPES:
                issues.append(Issue("error", name, f"--model-type is {value!r}; expected one of {', '.join(MODEL_TYPES)} (diffusion for an image/video server)."))
            continue
        bad_name = flagtable.name_issue(name, RESERVED, "mem-fraction-static")
        if bad_name is not None:
            issues.append(bad_name)
            continue
        note = NOTES.get(name)
        spec = table.get(name)
        if note is not None and (spec is None or note[0] == "warning"):
            # With the real parser, it decides what exists; its message gets this hint appended.
            if not (known_by_parser and note[0] == "error"):
                issues.append(Issue(note[0], name, note[1]))
            if spec is None:
                continue
        if spec is None:
            if not known_by_parser:
                issues.append(Issue("error", name, f"--{name} is not an {product.rstrip()} flag.{suggest(name, table)}"))
            continue
        if spec.deprecated and note is None:
            issues.append(Issue("warning", name, f"--{name} is deprecated in SGLang {SGLANG_VERSION}: {spec.deprecated}"))
        if known_by_parser:
            ti = _type_issue(spec.name, value) if not isinstance(value, list | bool) else None
            if ti is not None:
                issues.append(ti)
            continue
        issues.extend(check_value(name, spec, value))
        if name in spec.aliases:
            issues.append(Issue("note", name, f"--{name} is an alias of --{spec.name}."))
    return issues


def check_option_values(flags: dict[str, Any]) -> list[Issue]:
    """No value may start with '-' (`lora-paths = ["a", "--host", "0.0.0.0"]`): SGLang would read
    it as an option of its own (flagtable.check_option_values)."""
    return flagtable.check_option_values(flags, "SGLang")
