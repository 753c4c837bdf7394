"""SGLang's launch command and startup log, as data: the argv of a profile, the config file that
carries its secrets, the ready line and the startup milestones a progress bar is drawn from.

Secrets stay out of `ps`: the flags in SECRET_FLAGS (`api-key`, `admin-api-key`,
`ssl-keyfile-password`) never go into argv; the launcher writes them into a 0600 YAML file
(`config_text`) and argv ends with `--config <path>` as two tokens, Pitwall's own and last.
SGLang 0.5.23 (`prepare_server_args`, sglang/srt/utils/server_args_config_parser.py
`ConfigArgumentMerger`) merges a config only when `--config` is a token of its own (it looks
for the exact string; `--config=path` parses but is silently ignored), reads it with
`yaml.safe_load`, refuses a suffix other than .yaml/.yml, and puts the file's `--key value`
pairs BEFORE the command line, so a flag on the command line wins (argparse keeps the last).

Pure and Streamlit-free. launching/launcher.py builds the argv of a LaunchPlan with
`build_argv`; the supervisor watches a starting server's log for `READY_LINE` and reports
`startup_progress` (MILESTONES lists the lines). Cross-check:
`grep -n "fired up and ready to roll" <server log>`.
"""

from __future__ import annotations

import json
from typing import Any

READY_LINE = "The server is fired up and ready to roll!"

# Log milestones of SGLang startup, in order, with the fraction of the
# startup they roughly mark; only used to draw a progress bar.
MILESTONES: tuple[tuple[str, float, str], ...] = (
    ("Load weight begin", 0.3, "loading weights"),
    ("Load weight end", 0.5, "weights loaded"),
    ("Memory pool end", 0.6, "KV cache allocated"),
    ("CUDA graph begin", 0.7, "capturing CUDA graphs"),
    ("cuda graph begin", 0.7, "capturing CUDA graphs"),
    ("max_total_num_tokens=", 0.8, "scheduler ready"),
    ("Uvicorn running on", 0.9, "HTTP up, warming up"),
    (READY_LINE, 1.0, "ready"),
)


#: Entrypoints a profile may name for this engine (more only when a setting names them).
ENTRYPOINTS: tuple[str, ...] = ("sglang.launch_server", "sglang serve", "sglang_router.launch_router")
#: the router's (a disaggregated service's front, or a regular fleet's); bundled: its look-alike
ROUTER_ENTRYPOINTS: tuple[str, ...] = ("sglang_router.launch_router", "simulator.launch_router")


#: Flags whose value is a secret: written into the config file, never into argv.
SECRET_FLAGS: tuple[str, ...] = ("api-key", "admin-api-key", "ssl-keyfile-password")


def split_secrets(flags: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(flags for argv, secret flags for the config file)."""
    public = {k: v for k, v in flags.items() if k not in SECRET_FLAGS}
    secrets = {k: str(v) for k, v in flags.items() if k in SECRET_FLAGS and v not in (None, False)}
    return public, secrets


def config_text(secrets: dict[str, str]) -> str:
    """The config file's text: a JSON object, which is also YAML (a flow mapping of double-quoted
    strings, read by SGLang's yaml.safe_load as {flag: value}); one line, ASCII only."""
    return json.dumps(secrets, ensure_ascii=True) + "\n"


def flag_args(flags: dict[str, Any]) -> list[str]:
    """A profile's [flags] -> argv items, one `--flag=value` token per flag: `true` is a bare
    switch, `false` leaves it out, a table becomes `--flag=<JSON>`. A list (nargs flags such as
    --lora-paths) is `--flag` followed by its items; validation refuses items that start with
    '-', so no item can become an option of its own."""
    out: list[str] = []
    for name, value in flags.items():
        opt = f"--{name}"
        if value is True:
            out.append(opt)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            out.append(opt)
            out.extend(_fmt(v) for v in value)
        elif isinstance(value, dict):
            out.append(f"{opt}={json.dumps(value, separators=(',', ':'))}")
        else:
            out.append(f"{opt}={_fmt(value)}")
    return out


#: the router's worker flags, repeated once a worker (argparse `append`): `--prefill URL [PORT]`
ROUTER_WORKER_FLAGS = ("prefill", "decode")


def router_flag_args(flags: dict[str, Any]) -> list[str]:
    """The router's [flags] -> argv: as flag_args, but each prefill or decode worker is its own
    `--prefill=URL` (`--prefill URL PORT` for "URL PORT", a prefill worker's bootstrap port), a
    list naming several. launch_checks.py checks each entry is an http(s) URL (and a port)."""
    out = flag_args({k: v for k, v in flags.items() if k not in ROUTER_WORKER_FLAGS})
    for name in ROUTER_WORKER_FLAGS:
        value = flags.get(name)
        for entry in value if isinstance(value, list) else [] if value in (None, False) else [value]:
            url, _, port = str(entry).strip().partition(" ")
            out += [f"--{name}", url, port.strip()] if port.strip() else [f"--{name}={url}"]
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def build_argv(
    python: str, entrypoint: str, model_path: str, host: str, port: int, flags: dict[str, Any],
    config_path: str | None = None,
) -> list[str]:
    """`python -m <entrypoint> <flags> --model-path M --host=H --port=P [--config PATH]`.

    Pitwall's own flags come last, so nothing in a profile can override them (argparse keeps
    the last value). `--model-path M` stays two tokens: `sglang serve` before 0.5.9 finds the
    model by the exact token "--model-path" to tell an LLM from a diffusion model; the value
    is validated not to start with '-'.

    "sglang serve" is SGLang's console script (`sglang.cli.main:main`, 0.5.5+); it is started as
    `python -m sglang.cli.main serve` so the server's own interpreter runs it.
    `config_path` (the secrets file, see the module docstring) is two tokens, last.
    """
    head = [python, "-m", "sglang.cli.main", "serve"] if entrypoint == "sglang serve" else [python, "-m", entrypoint]
    tail = ["--config", config_path] if config_path else []
    if entrypoint in ROUTER_ENTRYPOINTS:  # the router loads no model (model_path names what it serves)
        return [*head, *router_flag_args(flags), f"--host={host}", f"--port={port}"]
    return [*head, *flag_args(flags), "--model-path", model_path, f"--host={host}", f"--port={port}", *tail]


def startup_progress(text: str) -> tuple[float, str]:
    """(fraction 0-1, what it is doing) from the log text a launch wrote so far."""
    best, detail = 0.2, "process started"
    for needle, frac, what in MILESTONES:
        if needle in text and frac >= best:
            best, detail = frac, what
    return best, detail
