"""`pitwall gpu-wall`: which wall each GPU of a server hit over a window, from the database.

    pitwall gpu-wall [--server NAME] [--since 15m | --from T [--to T]] [--json]

`--from` / `--to` give an exact window (epoch seconds or ISO 8601, UTC unless the time carries an
offset; `--to` defaults to now), e.g. the minutes of one load test; `--since` a window ending now.

Without `--server`, the host's GPUs (samples stored when no server is configured) or, with one
server configured, that server's. Exit codes: 0 verdicts printed, 1 no GPM figures in the window
(the reason is printed), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from cli.common import EXIT_OK, EXIT_USAGE, CliError, open_db, parse_duration, parse_instant
from scorecard.gpu_wall import gpu_walls

EXIT_EMPTY = 1  # no GPU telemetry in the window
HOST_SERVER_ID = 0  # collectors/gpu.py: GPU samples with no server configured


def _line(g: dict) -> str:
    share = g["shares"].get(g["verdict"], 0.0)
    parts = [f"{g.get('label') or 'GPU ' + str(g['index'])} ({g['name'] or 'unknown'}): {g['reason']} ({100 * share:.0f} % of "
             f"{g['samples']} samples)", f"DRAM bandwidth {100 * g['dram_ratio']:.0f} %"]
    if g["tensor_ratio"] is not None:
        parts.append(f"tensor {100 * g['tensor_ratio']:.0f} %")
    if g["sm_ratio"] is not None:
        parts.append(f"SM {100 * g['sm_ratio']:.0f} %")
    if g.get("util_ratio") is not None:
        parts.append(f"busy {100 * g['util_ratio']:.0f} %")
    if g["achieved_bw_bytes_s"] is not None:
        parts.append(f"achieved {g['achieved_bw_bytes_s'] / 1e12:.2f} of {g['peak_bw_bytes_s'] / 1e12:g} TB/s")
    return "; ".join(parts)


def gpu_wall_cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="pitwall gpu-wall", description=__doc__.split("\n")[0])
    ap.add_argument("--server", help="server name (default: the host's GPUs, or the only server)")
    ap.add_argument("--since", default="15m", help="window ending now, e.g. 90s, 15m, 2h (default 15m)")
    ap.add_argument("--from", dest="start", help="window start: epoch seconds or ISO 8601 (UTC unless it has an offset)")
    ap.add_argument("--to", dest="end", help="window end (default: now); needs --from")
    ap.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    try:
        args = ap.parse_args(argv)
        now = time.time()
        until = parse_instant(args.end, flag="--to") if args.end else now
        if args.end and not args.start:
            raise ValueError("--to needs --from (or use --since for a window ending now)")
        since = parse_instant(args.start) if args.start else until - parse_duration(args.since)
        if since >= until:
            raise ValueError(f"the window is empty: --from is not before {'--to' if args.end else 'now'}")
    except SystemExit as exc:
        return int(exc.code or 0)
    except ValueError as exc:
        print(f"pitwall gpu-wall: {exc}.", file=sys.stderr)
        return EXIT_USAGE
    from config.settings import load_settings
    from storage import repo

    try:
        engine = open_db(load_settings(), create=False)  # read-only: creates nothing
    except CliError as exc:
        print(f"pitwall gpu-wall: {exc}", file=sys.stderr)
        return exc.code
    servers = [s for s in repo.list_servers(engine) if s.retired_at is None]
    if args.server:
        match = [s for s in servers if s.name == args.server]
        if not match:
            names = ", ".join(s.name for s in servers) or "none"
            print(f"pitwall gpu-wall: no server {args.server!r} (configured: {names}).", file=sys.stderr)
            return EXIT_USAGE
        server_id = int(match[0].id or 0)
    else:
        server_id = int(servers[0].id or 0) if len(servers) == 1 else HOST_SERVER_ID
    out = gpu_walls(engine, server_id=server_id, since=since, until=until)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for g in out["gpus"]:
            print(_line(g))
        if out["why_not"]:
            print(out["why_not"], file=sys.stderr)
    return EXIT_OK if out["available"] else EXIT_EMPTY
