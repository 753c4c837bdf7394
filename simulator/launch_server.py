"""Entry point: ``python -m simulator.launch_server [SGLang 0.5.23 flags] [--sim-* knobs]``.

Parses flags exactly as SGLang's parser would (bad flags: usage + error, exit 2), then runs the
LLM server (default) or, with ``--model-type diffusion`` (SGLang's own ``sglang serve``
selector) or ``--sim-kind image``, the diffusion server with the diffusion flags
(simulator/diffusion_args.py; an unknown flag there exits 1 as in SGLang).
``--config PATH`` is merged as SGLang 0.5.23's ``prepare_server_args`` does
(sglang/srt/utils/server_args_config_parser.py): only when ``--config`` is a token of its own
(``--config=PATH`` parses and is ignored); one only; the file must end in .yaml/.yml and exist;
its top level is a mapping whose ``key: value`` pairs become ``--key value`` (true: a bare
switch for a store_true flag, false: nothing; a list: ``--key a b``) placed BEFORE the command
line, so a command-line flag wins. A bad config raises ValueError (traceback, exit 1), as in
SGLang. The simulator has no YAML library: it reads a JSON object (Pitwall writes that) and
block mappings of plain or quoted scalars and ``- item`` lists.
Exit status: 0 after SIGTERM/SIGINT, 1 on a bind failure, 2 on a bad flag or ``--sim-fault``,
killed by SIGKILL (-9) after a scheduler crash (injected fault, weights that do not fit).

Time: the server runs a *model clock*; ``--sim-speed S`` makes S model seconds pass per wall
second. Every duration it reports (meta_info ``e2e_latency``, log throughputs, /metrics
histograms, image ``inference_time_s``) is in model seconds, so at S=1 they equal wall seconds
and at S=10 a client sees ten times shorter wall latencies than the server reports.
The scheduler's own lag behind that clock (CPU starvation) is reported per DP rank in
``/server_info`` ``internal_states[i].sim_scheduling_lag_ratio`` (and ``sim_max_scheduling_lag_s``,
``sim_model_time_s``); bench/sim_scheduling_lag.py measures it under 256 streams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from simulator import logfmt
from simulator.args import build_parser, parse_args
from simulator.diffusion_args import (
    build_diffusion_parser,
    is_diffusion_launch,
    parse_diffusion_args,
    split_model_type,
)
from simulator.faults import parse_faults

__all__ = ["build_parser", "main"]


def merge_config(argv: list[str]) -> list[str]:
    """argv with the `--config PATH` file's flags first (SGLang 0.5.23's ConfigArgumentMerger)."""
    at = [i for i, a in enumerate(argv) if a == "--config"]
    if not at:
        return argv
    if len(at) > 1:
        raise ValueError("Multiple config files specified! Only one allowed.")
    if at[0] == len(argv) - 1:
        raise ValueError("No config file specified after --config flag!")
    path = Path(argv[at[0] + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(f"Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise ValueError(f"Config file not found: {path}")
    data = _read_config(path.read_text())
    switches = {a.dest for a in build_parser()._actions if isinstance(a, argparse._StoreTrueAction)}
    head: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool):
            if key.replace("-", "_") in switches:
                head += [f"--{key}"] if value else []
            else:
                head += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            head += ([f"--{key}", *(str(v) for v in value)] if value else [])
        elif isinstance(value, dict):
            head += [f"--{key}", json.dumps(value)]
        else:
            head += [f"--{key}", str(value)]
    return head + argv[:at[0]] + argv[at[0] + 2:]


def _read_config(text: str) -> dict[str, Any]:
    if text.lstrip().startswith("{"):
        data = json.loads(text)
    else:
        data, key = {}, None
        for raw in text.splitlines():
            line = raw.split(" #", 1)[0].rstrip()
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line.lstrip().startswith("- ") and key is not None:
                data.setdefault(key, [])
                data[key].append(_scalar(line.lstrip()[2:]))
                continue
            key, _, rest = line.partition(":")
            key = key.strip()
            data[key] = _scalar(rest) if rest.strip() else []
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")
    return {str(k): (None if v == [] else v) for k, v in data.items()}


def _scalar(text: str) -> Any:
    text = text.strip()
    if text[:1] in "\"'" and text[-1:] == text[:1] and len(text) > 1:
        return json.loads(text) if text[0] == '"' else text[1:-1]
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~", ""):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if is_diffusion_launch(args):
        return _run_image(parse_diffusion_args(split_model_type(args)[1]))
    if "--config" in args:
        args = merge_config(args)
    ns = parse_args(args)
    try:
        parse_faults(ns.sim_fault)
    except ValueError as exc:
        build_parser().error(str(exc))
    if ns.random_seed is not None and ns.sim_seed == 0:
        ns.sim_seed = ns.random_seed
    from simulator.llm_server import LlmServer

    log = logfmt.LogWriter(level=ns.log_level, http_level=ns.log_level_http)
    return asyncio.run(LlmServer(ns, log).startup())


def _run_image(ns: argparse.Namespace) -> int:
    try:
        parse_faults(ns.sim_fault)
    except ValueError as exc:
        build_diffusion_parser().error(str(exc))
    from simulator.image_server import ImageServer

    log = logfmt.LogWriter(level=ns.log_level, diffusion=True, stream=sys.stdout)
    return asyncio.run(ImageServer(ns, log).startup())


if __name__ == "__main__":
    sys.exit(main())
