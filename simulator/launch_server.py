"""Entry point: ``python -m simulator.launch_server [SGLang 0.5.23 flags] [--sim-* knobs]``.

Parses flags exactly as SGLang's parser would (bad flags: usage + error, exit 2), then runs the
LLM server (default) or, with ``--model-type diffusion`` (SGLang's own ``sglang serve``
selector) or ``--sim-kind image``, the diffusion server with the diffusion flags
(simulator/diffusion_args.py; an unknown flag there exits 1 as in SGLang).
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
import sys

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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if is_diffusion_launch(args):
        return _run_image(parse_diffusion_args(split_model_type(args)[1]))
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
