"""vLLM's launch command and startup log, as data: the argv of a profile, the config file that
carries its secrets, the ready line and the startup milestones a progress bar is drawn from.

The server is `python -m vllm.entrypoints.openai.api_server` (the server's own interpreter; 0.32
calls the module deprecated in favour of `vllm serve` but runs the same `main()`, parser and
server). Its parser is vllm/utils/argparse_utils.py FlexibleArgumentParser, which reads a YAML
config only when `--config` is a token of its own (`"--config" in args`): `--config=PATH` parses
but is silently ignored. The file is read with `yaml.safe_load` (suffix .yaml/.yml only), its
`key: value` pairs become `--key value` tokens (a list: `--key a b`) put BEFORE the command line,
so a flag on the command line wins (argparse keeps the last). So build_argv ends with
`--config PATH` as two tokens, Pitwall's own and last.

Secrets stay out of `ps`: `api-key` and any flag named like a token, key, secret or password
(`hf-token`) never go into argv when they carry a value; `config_text` writes them as YAML.

Pure. The supervisor watches a starting server's log for `READY_LINE` (uvicorn's, printed once
the HTTP server accepts connections) and reports `startup_progress`. Cross-check:
`grep -n "Application startup complete" <server log>`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from collectors.base import CollectorError
from collectors.vllm.flags import FlagSpec, spec_of

#: Entrypoints a profile may name for this engine (run as `python -m <entrypoint>`).
ENTRYPOINTS: tuple[str, ...] = ("vllm.entrypoints.openai.api_server",)

#: uvicorn's line once the app is serving; vLLM logs "Starting vLLM server on http://..." (0.32;
#: "Starting vLLM API server 0 on" before) just before uvicorn starts
READY_LINE = "Application startup complete."

#: Log milestones of a vLLM 0.32 (V1 engine) startup, in order, with the fraction of the startup
#: they roughly mark; only used to draw a progress bar. GPU and CPU builds word a few differently.
MILESTONES: tuple[tuple[str, float, str], ...] = (
    ("non-default args:", 0.1, "reading arguments"),
    ("Resolved architecture:", 0.15, "resolving the model"),
    ("Initializing a V1 LLM engine", 0.25, "starting the engine"),
    ("Starting to load model", 0.3, "loading weights"),
    ("Loading weights took", 0.45, "weights loaded"),
    ("Model loading took", 0.5, "weights loaded"),
    ("Warming up model for the compilation", 0.55, "compiling and warming up"),
    ("Dynamo bytecode transform time", 0.55, "compiling (torch.compile)"),
    ("torch.compile took", 0.6, "compiled"),
    ("Memory profiling takes", 0.65, "profiling memory"),
    ("Available KV cache memory", 0.7, "sizing the KV cache"),
    ("KV cache size:", 0.75, "KV cache allocated"),
    ("Capturing CUDA graphs", 0.8, "capturing CUDA graphs"),
    ("Graph capturing finished", 0.85, "CUDA graphs captured"),
    ("init engine (profile, create kv cache, warmup model) took", 0.88, "engine ready"),
    ("Starting vLLM server on", 0.92, "HTTP server starting"),
    ("Starting vLLM API server", 0.92, "HTTP server starting"),
    ("Waiting for application startup.", 0.95, "HTTP server starting"),
    (READY_LINE, 1.0, "ready"),
)

#: Flags whose value is a secret: written into the config file, never into argv.
SECRET_FLAGS: tuple[str, ...] = ("api-key", "hf-token")
_SECRET_WORDS = re.compile(r"(?:^|-)(?:token|key|secret|password|passwd)(?:-|$)")
_KEY = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def is_secret(name: str) -> bool:
    """`api-key`, or a flag whose name has the word token, key, secret or password."""
    return name in SECRET_FLAGS or _SECRET_WORDS.search(name) is not None


def _nested_secret(value: Any) -> bool:
    """A JSON table (or its text) holding a secret-sounding key with text, at any depth
    (`model-loader-extra-config = {s3_secret_access_key = "..."}`, a connector's credentials)."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    if isinstance(value, dict):
        return any((is_secret(str(k).replace("_", "-").lower()) and isinstance(v, str) and v != "")
                   or _nested_secret(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_nested_secret(v) for v in value)
    return False


def _secret_value(name: str, value: Any) -> bool:
    """A value of SECRET_FLAGS other than a switch, the text of a secret-sounding flag, or a JSON
    table with a secret inside (the whole table goes into the config file)."""
    if value is None or isinstance(value, bool):
        return False
    if _nested_secret(value):
        return True
    if name in SECRET_FLAGS:
        return True
    items = value if isinstance(value, list) else [value]
    return is_secret(name) and bool(items) and all(isinstance(v, str) for v in items)


def split_secrets(flags: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(flags for argv, secret flags for the config file). A secret flag's string (or list of
    strings: `api-key = ["k1", "k2"]`) is a secret; `true`/`false` and numbers stay in argv
    (`hf-token = true`: use the token of `hf auth login`; `long-prefill-token-threshold = 2048`)."""
    public: dict[str, Any] = {}
    secrets: dict[str, Any] = {}
    for name, value in flags.items():
        if _secret_value(str(name), value):
            if isinstance(value, dict | list) and _nested_secret(value):
                secrets[str(name)] = json.dumps(value, separators=(",", ":"))  # the flag's JSON text
            else:
                secrets[str(name)] = [str(v) for v in value] if isinstance(value, list) else str(value)
        else:
            public[name] = value
    return public, secrets


def config_text(secrets: dict[str, Any]) -> str:
    """The config file's text: one YAML `key: "value"` line per secret, the value JSON-quoted
    (a JSON string is a YAML double-quoted scalar; a list a YAML flow sequence), ASCII only.
    vLLM turns each line into `--key value` (`--key v1 v2` for a list)."""
    lines: list[str] = []
    for name, value in secrets.items():
        if not _KEY.match(name):
            raise CollectorError(f"Secret flag {name!r} is not a flag name; use lowercase words joined by '-'.")
        items = [str(v) for v in value] if isinstance(value, list) else str(value)
        lines.append(f"{name}: {json.dumps(items, ensure_ascii=True)}")
    return "".join(line + "\n" for line in lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def flag_arg(name: str, value: Any, spec: FlagSpec | None) -> list[str]:
    """One profile flag -> its argv items (see flag_args)."""
    opt = f"--{name}"
    if value is None:
        return []
    if value is True:
        return [opt]
    if value is False:
        return [f"--no-{name}"] if spec is not None and spec.kind == "boolopt" else []
    if isinstance(value, dict) or isinstance(value, list) and spec is not None and spec.type == "json":
        return [f"{opt}={_json(value)}"]
    if isinstance(value, list):
        if spec is not None and spec.type == "int_or_str_list":
            return [f"{opt}={','.join(_fmt(v) for v in value)}"]
        if spec is not None and spec.kind == "append":
            return [f"{opt}={_fmt(v)}" for v in value]
        return [opt, *(_fmt(v) for v in value)]
    return [f"{opt}={_fmt(value)}"]


def flag_args(flags: dict[str, Any]) -> list[str]:
    """A profile's [flags] -> argv items, one `--flag=value` token per flag: `true` is a bare
    switch; `false` is `--no-flag` for a --x/--no-x pair (vLLM's BooleanOptionalAction, whose
    default may be on) and left out for a plain switch; a table (or a list for a JSON-typed
    flag such as allowed-origins) is `--flag=<JSON>`; device-ids' list is `--device-ids=0,1`.
    A list of an nargs flag (served-model-name, api-key) is `--flag` followed by its items;
    validation refuses items that start with '-', so no item can become an option of its own."""
    out: list[str] = []
    for name, value in flags.items():
        out += flag_arg(str(name), value, spec_of(str(name)))
    return out


def build_argv(
    python: str, entrypoint: str, model_path: str, host: str, port: int, flags: dict[str, Any],
    config_path: str | None = None,
) -> list[str]:
    """`python -m <entrypoint> --model=M <flags> --host=H --port=P [--config PATH]`.

    Pitwall's own flags come last, so nothing in a profile can override them (argparse keeps
    the last value; the config file's flags go before the command line). `--model=M` is one
    token (validated not to start with '-'); the api_server takes the model by --model (vllm
    serve's positional model_tag is not used). `config_path` (the secrets file) is `--config
    PATH`, two tokens, as vLLM reads it only that way (module docstring).
    """
    tail = ["--config", config_path] if config_path else []
    return [python, "-m", entrypoint, f"--model={model_path}", *flag_args(flags),
            f"--host={host}", f"--port={port}", *tail]


def startup_progress(text: str) -> tuple[float, str]:
    """(fraction 0-1, what it is doing) from the log text a launch wrote so far."""
    best, detail = 0.05, "process started"
    for needle, frac, what in MILESTONES:
        if needle in text and frac >= best:
            best, detail = frac, what
    return best, detail
