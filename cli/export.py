"""`pitwall export`: write a scorecard (or a comparison) as md, html, csv, json or png.

    pitwall export --server NAME [--launch ID | --run ID | --since 1h] --format md --output PATH
    pitwall export --server a --run 12 --vs-run 14 --format html --output review.html
    pitwall export --fleet table|scorecards --format csv|json|md   (fleet_cli.py)

Without --output the file goes to <data_dir>/exports/; `--output -` writes text formats to
stdout. Every export is recorded in the Audit table. Errors are one line; exit status 0 ok,
1 failure (unknown server/run, unwritable path), 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Parser,
    open_db,
    parse_args,
    parse_duration,
)
from export.formats import (
    FORMATS,
    ExportError,
    default_filename,
    render,
    write_export,
)
from scorecard.build import ScorecardError, build_scorecard
from scorecard.model import Scorecard
from scorecard.slo import SloError
from storage.files import private_dir
from storage.redact import redact_text


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="pitwall export", description="Export a scorecard for a review.")
    p.add_argument("--server", required=True, help="server name (as in pitwall.toml)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--launch", type=int, metavar="ID", help="score one launch")
    which.add_argument("--run", type=int, metavar="ID", help="score one probe run")
    which.add_argument("--since", metavar="DURATION", help="score the last 15m / 1h / 2d (default 1h)")
    p.add_argument("--level", type=float, help="headline load level of the probe run "
                   "(default: the level with the highest requests/s)")
    p.add_argument("--vs-run", type=int, action="append", default=[], metavar="ID",
                   help="also score this probe run and compare (repeatable)")
    p.add_argument("--vs-launch", type=int, action="append", default=[], metavar="ID",
                   help="also score this launch and compare (repeatable)")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--output", metavar="PATH",
                   help="file to write (default <data_dir>/exports/...; - for stdout)")
    return p


def export_cli(argv: list[str]) -> int:
    from config.settings import SettingsError, load_settings

    if any(a == "--fleet" or a.startswith("--fleet=") for a in argv):  # the Overview's fleet views
        # lazy: only --fleet needs the Overview's views (alerts and gpu-wall import this module)
        from cli.export_fleet import fleet_cli

        return fleet_cli(argv)

    args = parse_args(build_parser(), argv, "pitwall export --help")
    if isinstance(args, int):
        return args
    try:
        since_s = parse_duration(args.since) if args.since else None
    except ValueError as exc:
        print(f"pitwall export: {exc}.", file=sys.stderr)
        return EXIT_USAGE
    if args.output == "-" and args.format == "png":
        print("pitwall export: png cannot go to stdout; give --output FILE.png.", file=sys.stderr)
        return EXIT_USAGE
    try:
        settings = load_settings()
        engine = open_db(settings, create=False)  # read-only: creates nothing
        common: dict[str, Any] = {"settings_slo": settings.slo,
                  "electricity_usd_per_kwh": settings.electricity_usd_per_kwh,
                  "retention": dict(settings.retention)}
        cards: list[Scorecard] = [build_scorecard(
            engine, server=args.server, run_id=args.run, launch_id=args.launch,
            since_s=since_s if since_s is not None else (
                None if args.run or args.launch else 3600.0),
            level=args.level, **common)]
        for rid in args.vs_run:
            cards.append(build_scorecard(engine, run_id=rid, **common))
        for lid in args.vs_launch:
            cards.append(build_scorecard(engine, launch_id=lid, **common))
        if args.output == "-":
            sys.stdout.write(render(args.format, cards).decode())
            from export.formats import record_export

            record_export(engine, fmt=args.format, cards=cards, target="stdout", actor="cli")
            return EXIT_OK
        if not args.output:
            private_dir(settings.exports_dir, own=True)  # Pitwall's own folder: 0700
        path = Path(args.output) if args.output else (
            settings.exports_dir / default_filename(args.format, cards))
        write_export(engine, fmt=args.format, cards=cards, path=path, actor="cli")
    except CliError as exc:  # the database: locked, missing, unreadable or too new
        print(f"pitwall export: {exc}", file=sys.stderr)
        return exc.code
    except SettingsError as exc:
        print(f"pitwall export: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except (ScorecardError, ExportError, SloError) as exc:
        print(f"pitwall export: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_FAIL
    except Exception as exc:  # the database or vl-convert failing: one line, never a traceback
        # a database error can quote its URL: redacted like every line Pitwall prints
        print(f"pitwall export: export failed: {type(exc).__name__}: {redact_text(str(exc))}",
              file=sys.stderr)
        return EXIT_FAIL
    print(f"wrote {path}")
    return EXIT_OK
