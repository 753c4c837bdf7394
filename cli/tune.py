"""`pitwall tune SERVER --profiles A,B | --grid 'flag=v1,v2' [workload options | --trace NAME] [--apply] [--json]`.

Records a `tune` intent for the runner (runner/tunes.py carries it out), then follows it: a
progress bar on stderr (candidate, stage, ETA) and, at the end, the ranking table on stdout, or
with `--json` the contract of runner/tune_rank.py `public_json`. The workload options are those of
`pitwall probe` (--prompt-set, --concurrency or --rate, --requests, --max-new-tokens, --image-size,
...), parsed by the probe's own parser so both commands mean the same thing by them. Without
any workload option the tune runs the server's own last finished sweep's workload (or, with no
sweep yet, shared-prefix prompts for an LLM server: dashboard/services/tune.py default_workload)
and says which on stderr. With `--trace NAME` (and `--window`, `--max-requests`, `--max-speed`) the
workload is a stored trace and each candidate is ranked on its capacity: the highest speed-up of
the trace it serves within the server's SLO, searched as `pitwall probe --speed auto` does, its
repeats the spread a tie is judged by. The ranking is preceded by the verdict sentence: a winner,
or a tie inside the measured spread (no winner, nothing applied).

Exit codes: 0 the tune finished and the server runs the restored profile, 1 it failed or no
runner is alive, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cli.common import EXIT_OK, EXIT_USAGE, CliError
from cli.profiles import (
    _actor,
    _context,
    _run,
)
from present.format import request_label
from storage.redact import redact_text

PLACEHOLDER_URL = "http://127.0.0.1:1"  # the probe parser wants --url; each candidate sets its own


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pitwall tune",
        description="Relaunch a managed server under each candidate profile, run the same probe "
                    "workload, rank the candidates (goodput within the [slo] targets, cost, stability) "
                    "and run the original profile again (or the winner with --apply).",
        epilog="Workload options are those of `pitwall probe` (see `pitwall probe --help`): "
               "--prompt-set, --concurrency or --rate, --requests, --warmup, --max-new-tokens, "
               "--input-tokens, --image-size, --image-steps, --api, ...; without any, the server's "
               "last sweep's workload. Candidates must be of the server's kind (LLM or image).")
    p.add_argument("server", metavar="SERVER")
    p.add_argument("--profiles", default="", help="candidate profiles, comma-separated")
    p.add_argument("--grid", default=None,
                   help="derive candidates from the server's profile: 'flag=v1,v2;flag2=v3,v4'")
    p.add_argument("--trace", default=None, metavar="NAME",
                   help="rank on a stored trace: each candidate's highest speed-up of it within the SLO")
    p.add_argument("--window", default=None, metavar="A..B", help="with --trace: seconds of the trace to replay")
    p.add_argument("--max-requests", type=int, default=None, help="with --trace: replay at most this many requests")
    p.add_argument("--max-speed", type=float, default=1024.0, help="with --trace: the fastest speed tried (default 1024)")
    p.add_argument("--apply", action="store_true", help="leave the server on the winner, not its original profile")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--timeout", type=float, default=6 * 3600.0, help="seconds to follow the tune (default 6 h)")
    p.add_argument("--no-wait", action="store_true", help="record the request and return")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def sweep_from_options(rest: list[str]) -> dict[str, Any]:
    """The probe workload options -> a SweepSpec dict (validated by the probe's own checks)."""
    from collectors.probe.cli import build_parser as probe_parser
    from collectors.probe.cli import spec_from_args

    for bad in ("--url", "--api-key", "--api-key-file", "--db", "--no-store", "--baseline"):
        if bad in rest or any(a.startswith(bad + "=") for a in rest):
            raise CliError(f"{bad} is not a tune option: the tune uses the server's own URL, key and database.",
                        EXIT_USAGE)
    try:
        args = probe_parser().parse_args([*rest, "--url", PLACEHOLDER_URL])
        spec = spec_from_args(args)
        spec.validate()
    except SystemExit:
        raise CliError("A workload option is wrong (see above); `pitwall probe --help` lists them.", EXIT_USAGE) from None
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    return spec.to_dict(redact=True)


def trace_workload(engine: Any, settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The tune's workload for --trace (dashboard/services/tune.py `trace_workload`)."""
    from collectors.trace.replay_run import parse_window
    from dashboard.services import tune

    try:
        window = parse_window(args.window)
        return tune.trace_workload(engine, settings.slo, server=args.server, trace=args.trace, window=window,
                                   max_requests=args.max_requests, max_speed=args.max_speed)
    except (ValueError, tune.TuneRequestError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def tune_cli(argv: list[str]) -> int:
    args, rest = build_parser().parse_known_args(argv)
    return _run(lambda: _do_tune(args, rest))


def _do_tune(args: argparse.Namespace, rest: list[str]) -> int:
    from dashboard.services import tune
    from dashboard.services.views import health
    from launching import launcher
    from present import tune_result
    from storage import repo

    settings, engine = _context()
    if settings.read_only:
        raise CliError("Pitwall is read-only (read_only / PITWALL_READ_ONLY), so `pitwall tune` is refused.", EXIT_USAGE)
    if args.trace:
        if rest:
            raise CliError(f"--trace replays the trace's own traffic; leave out {' '.join(rest)}.", EXIT_USAGE)
        sweep = trace_workload(engine, settings, args)
    elif rest:
        sweep = sweep_from_options(rest)
    else:
        default = tune.default_workload(engine, args.server)
        sweep = default.sweep
        print(default.text, file=sys.stderr, flush=True)
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    try:
        if args.grid:
            srv = repo.get_server(engine, name=args.server)
            base = (srv.profile if srv is not None else None) or ""
            if not base:
                raise CliError(f"Server {args.server!r} has no profile to derive a grid from; use --profiles.")
            profiles += tune.write_grid_profiles(engine, settings.profiles_dir, base, tune.parse_grid(args.grid))
        tune.check_candidates(engine, server=args.server, profiles=profiles)
        if not health.runner_alive(engine):
            raise CliError("No runner is alive to carry this out; start the runner with `pitwall up`.")
        intent = tune.start_tune(engine, server=args.server, profiles=profiles, sweep=sweep, apply=args.apply,
                                 requested_by=_actor())
    except tune.TuneRequestError as exc:
        raise CliError(str(exc)) from None
    assert intent.id is not None
    print(f"tune of {args.server} requested ({request_label(intent.id, 'tune')}): {', '.join(profiles)}", file=sys.stderr, flush=True)
    if args.no_wait:
        return EXIT_OK
    bar = _Bar(enabled=not args.no_progress)
    final = launcher.follow(engine, intent.id, timeout_s=args.timeout, on_progress=bar, poll_s=0.5)
    if final is None or final.state not in launcher.FINAL_STATES:
        raise CliError(f"{request_label(intent.id, 'tune', start=True)} is still {final.state if final else 'missing'} after {args.timeout:.0f} s; "
                    "follow it on the Benchmarks page.")
    if args.json:
        print(json.dumps(tune.tune_json(final), indent=2))
    else:
        print(tune.format_table(final.result or {}))
        elapsed = tune_result.elapsed_s(final)
        if elapsed is not None:
            print(f"took {elapsed:.0f} s")
    if final.state == "done":
        return EXIT_OK
    raise CliError(final.message or f"tune {final.state}")


class _Bar:
    """One progress line per change on stderr: [#####-----] 45 % candidate 2/4 demo: workload."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, intent: Any) -> None:
        if not self.enabled:
            return
        from dashboard.services.tune import eta_text

        prog = intent.progress or {}
        frac = float(prog.get("fraction") or 0.0)
        bar = "#" * int(frac * 30)
        eta = eta_text(prog)
        line = f"[{bar:<30}] {frac * 100:5.1f} %  {redact_text(str(prog.get('detail') or intent.state))}"
        print(line + (f"  ({eta})" if eta else ""), file=sys.stderr, flush=True)
