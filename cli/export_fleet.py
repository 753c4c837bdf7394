"""`pitwall export --fleet`: the Overview's fleet table or fleet scorecards as csv, json or md.

    pitwall export --fleet table --format csv [--host h1 --model M --profile P --status up --search NAME]
    pitwall export --fleet scorecards --group-by profile --format json --output fleet.json

The same rows and filters as the Overview (dashboard/services/views/fleet.py, last 15 min).
Without --output the file goes to <data_dir>/exports/; `--output -` writes to stdout. Every export
is recorded in the Audit table. Errors are one line; exit 0 ok, 1 failure, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError, Parser, open_db, parse_args
from export.fleet import (
    FLEET_FORMATS,
    FLEET_KINDS,
    fleet_filename,
    fleet_meta,
    record_fleet_export,
    render_fleet,
)
from export.formats import ExportError, write_file
from storage.files import private_dir
from storage.redact import redact_text


def build_parser() -> argparse.ArgumentParser:
    from dashboard.services.views.fleet_scorecards import GROUP_BYS

    p = Parser(prog="pitwall export --fleet", description="Export the fleet table or fleet scorecards.")
    p.add_argument("--fleet", required=True, choices=FLEET_KINDS)
    p.add_argument("--format", required=True, choices=FLEET_FORMATS)
    p.add_argument("--group-by", default="model", choices=GROUP_BYS, help="scorecards: per model or per profile")
    for name in ("host", "model", "profile", "status"):
        p.add_argument(f"--{name}", action="append", default=[], help=f"keep only this {name} (repeatable)")
    p.add_argument("--search", default="", help="keep servers whose name contains this")
    p.add_argument("--output", metavar="PATH", help="file to write (default <data_dir>/exports/...; - for stdout)")
    return p


def fleet_cli(argv: list[str]) -> int:
    from config.settings import SettingsError, load_settings

    args = parse_args(build_parser(), argv, "pitwall export --fleet table --help")
    if isinstance(args, int):
        return args
    try:
        settings = load_settings()
        from dashboard.services.views.fleet import (
            FLEET_WINDOW_S,
            FleetFilter,
            filter_rows,
            fleet_rows,
        )
        from dashboard.services.views.fleet_scorecards import fleet_scorecards
        engine = open_db(settings, create=False)  # read-only: creates nothing
        now = time.time()
        flt = FleetFilter(hosts=args.host, models=args.model, profiles=args.profile,
                          statuses=args.status, search=args.search)
        rows = filter_rows(fleet_rows(engine, now=now, settings=settings), flt)
        records = ([r.as_dict() for r in rows] if args.fleet == "table"
                   else fleet_scorecards(rows, by=args.group_by))
        filters = {"host": args.host, "model": args.model, "profile": args.profile,
                   "status": args.status, "search": args.search}
        if args.fleet == "scorecards":
            filters["group_by"] = args.group_by
        data = render_fleet(args.format, args.fleet, records,
                            fleet_meta(window_s=FLEET_WINDOW_S, until=now, filters=filters))
        if args.output == "-":
            sys.stdout.write(data.decode())
            record_fleet_export(engine, fmt=args.format, what=args.fleet, rows=len(records),
                                target="stdout", actor="cli")
            return EXIT_OK
        path = Path(args.output) if args.output else settings.exports_dir / fleet_filename(args.format, args.fleet)
        if not args.output:
            private_dir(path.parent, own=True)  # Pitwall's own folder: 0700
        write_file(path, data)  # never through a symlink (formats.write_file)
        record_fleet_export(engine, fmt=args.format, what=args.fleet, rows=len(records),
                            target=str(path), actor="cli")
    except CliError as exc:  # the database: locked, missing, unreadable or too new
        print(f"pitwall export: {exc}", file=sys.stderr)
        return exc.code
    except SettingsError as exc:
        print(f"pitwall export: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except ExportError as exc:
        print(f"pitwall export: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_FAIL
    except Exception as exc:  # the database failing: one line, never a traceback
        print(f"pitwall export: export failed: {type(exc).__name__}: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_FAIL
    print(f"wrote {path}")
    return EXIT_OK
