"""Entry point: ``python -m simulator.launch_router [sglang_router.launch_router flags]``, the
router look-alike of simulator/router.py. Exit status: 0 after SIGTERM/SIGINT, 1 when a port
cannot be bound, 2 on a bad flag."""

from __future__ import annotations

import asyncio
import sys

from simulator import logfmt
from simulator.router import build_parser, serve


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if ns.pd_disaggregation and not (ns.prefill and ns.decode):
        build_parser().error("--pd-disaggregation needs at least one --prefill and one --decode worker")
    if not ns.pd_disaggregation and not ns.worker_urls:
        build_parser().error("give --worker-urls, or --pd-disaggregation with --prefill and --decode")
    return asyncio.run(serve(ns, logfmt.LogWriter(level=ns.log_level)))


if __name__ == "__main__":
    sys.exit(main())
