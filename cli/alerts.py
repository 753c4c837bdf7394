"""`pitwall alerts`: what fires, silences, and a test notification to every receiver.

    pitwall alerts list [--history] [--json]
    pitwall alerts silence (--rule NAME | --server NAME) --for 2h --reason TEXT
    pitwall alerts silence --expire ID
    pitwall alerts test

Exit codes: 0 done, 1 `list`: alerts are firing / `test`: a receiver did not take it / nothing
configured, 2 usage or a refused request.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time

from cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError, open_db, parse_duration


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pitwall alerts", description="alerts: list, silence, test")
    sub = ap.add_subparsers(dest="action", required=True)
    ls = sub.add_parser("list", help="firing and pending alerts (or --history)")
    ls.add_argument("--history", action="store_true", help="every alert of the last 7 days, with durations")
    ls.add_argument("--json", action="store_true")
    si = sub.add_parser("silence", help="silence a rule and/or a server for a while, or --expire one")
    si.add_argument("--rule")
    si.add_argument("--server")
    si.add_argument("--for", dest="duration", default="2h", help="e.g. 30m, 2h, 1d (default 2h)")
    si.add_argument("--reason", default="")
    si.add_argument("--expire", type=int, help="end silence ID now")
    sub.add_parser("test", help="send a test alert to every configured receiver")
    return ap


def alerts_cli(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    from config.settings import load_settings
    from dashboard.services.alerts import views
    from runner.alerts.deliver import receivers, send_test

    settings = load_settings()
    if args.action == "test":
        targets = receivers(settings.alerting)
        if not targets:
            print("pitwall alerts: no receiver configured; set alerting.alertmanager_url or alerting.webhook_url.",
                  file=sys.stderr)
            return EXIT_FAIL
        failed = 0
        for r in targets:
            error = send_test(r, deadline_s=float(settings.alerting.get("send_deadline_s", 10.0)))
            print(f"{r.name}: {'sent' if error is None else 'FAILED: ' + error}")
            failed += error is not None
        return EXIT_FAIL if failed else EXIT_OK
    try:
        engine = open_db(settings)
    except CliError as exc:
        print(f"pitwall alerts: {exc}", file=sys.stderr)
        return exc.code
    if args.action == "list":
        rows = views.alerts(engine, open_only=not args.history)
        if args.json:
            print(json.dumps(rows, indent=1, default=str))
        for row in [] if args.json else rows:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["since"]))
            quiet = " (silenced)" if row["silenced"] else ""
            print(f"{row['state']:<8} {row['severity']:<8} {row['rule']} on {row['server']} since {when} "
                  f"({row['duration_s'] / 60:.0f} min){quiet}: {row['summary']}")
        if not rows and not args.json:
            print("no alerts" if args.history else "nothing firing or pending")
        return EXIT_FAIL if any(r["state"] == "firing" for r in rows) and not args.history else EXIT_OK
    actor = f"cli:{getpass.getuser()}"
    if settings.read_only:
        print("pitwall alerts: Pitwall is read-only (read_only); unset it to change silences.", file=sys.stderr)
        return EXIT_USAGE
    if args.expire is not None:
        if views.expire_silence(engine, silence_id=args.expire, actor=actor):
            print(f"silence {args.expire} expired")
            return EXIT_OK
        print(f"pitwall alerts: no active silence {args.expire}; `pitwall alerts list` shows them.", file=sys.stderr)
        return EXIT_USAGE
    try:
        sid = views.create_silence(engine, rule=args.rule, server=args.server,
                                   duration_s=parse_duration(args.duration), reason=args.reason, actor=actor)
    except ValueError as exc:
        print(f"pitwall alerts: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"silence {sid} until {time.strftime('%Y-%m-%d %H:%M', time.localtime(time.time() + parse_duration(args.duration)))}")
    return EXIT_OK
