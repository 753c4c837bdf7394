"""`pitwall trace`: import request traces, list them, show one, delete one.

    pitwall trace import FILE|FOLDER... [--format auto|NAME] [--name N] [--block-size B]
                         [--time-unit s|ms] [--rate R] [--seed S] [--tz ZONE] [--keep-text]
                         [--max-requests N] [--replace] [--dry-run] [--json]
    pitwall trace list [--json]
    pitwall trace show NAME [--json]
    pitwall trace delete NAME
    pitwall trace import --run RUN_ID [--name N]      (a stored probe run: a sweep replayed as it went)
    pitwall trace cut SERVER [--since 1h] [--name N] [--from auto|log|metrics] [--tz ZONE]

Prompts are never stored unless `--keep-text` asks (a replay builds synthetic text with the same
token counts and prefix sharing). A row that cannot be read is counted and named with its line;
it never stops the import. Exit codes: 0 done, 1 nothing could be imported (the reason is
printed), 2 usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError, Parser, Usage, open_db

PROG = "pitwall trace"


def build_parser() -> Parser:
    p = Parser(prog=PROG, description="Import, list, show and delete request traces.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = sub.add_parser("import", help="read trace files into a stored, normalised trace")
    imp.add_argument("files", nargs="*", type=Path, metavar="FILE", help="trace file(s) or folder(s)")
    imp.add_argument("--run", type=int, metavar="RUN_ID",
                     help="a stored probe run instead of files: the requests it sent, when it sent them")
    imp.add_argument("--format", default="auto", help="the file's format (default: sniffed); `pitwall trace formats` lists them")
    imp.add_argument("--name", help="the trace's name (default: the first file's name without its suffix)")
    imp.add_argument("--block-size", type=int, help="tokens per prefix block of hash_ids (default: the format's)")
    imp.add_argument("--time-unit", choices=("s", "ms"), help="unit of relative timestamps (default: the format's)")
    imp.add_argument("--rate", type=float, help="req/s of Poisson arrivals, for a file without arrival times")
    imp.add_argument("--seed", type=int, default=0, help="seed of those arrivals (default 0)")
    imp.add_argument("--tz", help="time zone of a log's local times (default: this machine's)")
    imp.add_argument("--keep-text", action="store_true", help="keep prompt text where the source has it")
    imp.add_argument("--max-requests", type=int, default=None, help="read at most this many requests")
    imp.add_argument("--replace", action="store_true", help="replace a trace of the same name")
    imp.add_argument("--dry-run", action="store_true", help="print what would be stored; store nothing")
    imp.add_argument("--json", action="store_true", help="print the result as JSON")
    lst = sub.add_parser("list", help="the stored traces")
    lst.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="one trace's summary, notes and bad rows")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    rm = sub.add_parser("delete", help="delete a stored trace and its requests")
    rm.add_argument("name")
    sub.add_parser("formats", help="the formats Pitwall reads")
    cut = sub.add_parser("cut", help="a trace of what a configured server served (its request records)")
    cut.add_argument("server", help="the server's name in pitwall.toml")
    cut.add_argument("--since", default="1h", help="window ending now: 90s, 15m, 1h, 2d (default 1h)")
    cut.add_argument("--name", help="the trace's name (default: SERVER-YYYYmmdd-HHMM)")
    cut.add_argument("--from", dest="source", choices=("auto", "log", "metrics"), default="auto",
                     help="the server's log (--log-requests) or its metrics export (default: the export when it has one)")
    cut.add_argument("--tz", help="time zone of the log's local times (default: this machine's)")
    cut.add_argument("--replace", action="store_true")
    cut.add_argument("--json", action="store_true")
    return p


def _fmt(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def describe(fields: dict[str, Any]) -> list[str]:
    """A trace's summary as the lines `import` and `show` print."""
    s = fields.get("summary") or {}
    ins, outs = s.get("input_tokens") or {}, s.get("output_tokens") or {}
    lines = [
        f"{fields['name']}: {fields['requests']:,} requests over {_fmt(fields['duration_s'], 1)} s "
        f"({fields['format']}, arrivals {'Poisson at --rate' if fields.get('clock') == 'none' else 'from the source'}), "
        f"digest {fields['digest']}",
        f"  rate {_fmt(s.get('rate_rps'), 2)} req/s mean, {_fmt(s.get('peak_rps'), 2)} req/s in the busiest "
        f"{_fmt(s.get('bucket_s'), 0)} s",
        f"  input tokens p50 {_fmt(ins.get('p50'))} p99 {_fmt(ins.get('p99'))} max {_fmt(ins.get('max'))}; "
        f"output tokens p50 {_fmt(outs.get('p50'))} p99 {_fmt(outs.get('p99'))} max {_fmt(outs.get('max'))}",
    ]
    reuse = s.get("prefix_reuse_share")
    cached = s.get("server_cached_share")
    lines.append("  prefix reuse " + ("unknown (no prefix blocks)" if reuse is None else f"{100 * reuse:.1f} % of input tokens")
                 + ("" if cached is None else f"; the server reported {100 * cached:.1f} % cached"))
    if s.get("sessions"):
        lines.append(f"  {s['sessions']:,} sessions, {s['turns_mean']:.1f} turns on average (max {s['turns_max']})")
    statuses = s.get("statuses") or {}
    if set(statuses) - {"ok"}:
        lines.append("  statuses " + ", ".join(f"{k} {v:,}" for k, v in sorted(statuses.items())))
    for note in fields.get("notes") or []:
        lines.append(f"  note: {note}")
    bad = fields.get("bad_count") or 0
    if bad:
        lines.append(f"  {bad:,} row(s) could not be read; first ones:")
        for b in (fields.get("bad_rows") or [])[:10]:
            lines.append(f"    line {b['line']}: {b['reason']}")
    return lines


def _import(args: Any) -> int:
    from collectors.trace import importer
    from collectors.trace.model import ReadOptions

    if bool(args.files) == (args.run is not None):
        raise Usage("give trace FILE(s) or --run RUN_ID (a stored probe run), one of them")
    if args.run is not None:
        from config.settings import load_settings

        engine = open_db(load_settings(), create=False)
        built = importer.build_from_run(engine, args.run, name=args.name)
        if not args.dry_run:
            importer.store(engine, built, replace=args.replace)
        return _describe(args, built)
    if args.block_size is not None and args.block_size <= 0:
        raise Usage("--block-size must be a positive number of tokens")
    if args.max_requests is not None and args.max_requests <= 0:
        raise Usage("--max-requests must be positive")
    options = ReadOptions(block_size=args.block_size, time_unit=args.time_unit, keep_text=args.keep_text,
                          max_requests=args.max_requests or importer.DEFAULT_MAX_REQUESTS, tz=args.tz)
    built = importer.build(args.files, name=args.name, fmt=args.format, options=options, rate=args.rate, seed=args.seed)
    if not args.dry_run:
        from config.settings import load_settings

        importer.store(open_db(load_settings()), built, replace=args.replace)
    return _describe(args, built)


def _describe(args: Any, built: Any) -> int:
    fields = {**built.fields, "id": built.trace_id, "stored": not args.dry_run}
    if args.json:
        print(json.dumps(fields, default=str))
    else:
        print(("Would store " if args.dry_run else "Stored ") + "\n".join(describe(fields)))
    return EXIT_OK


def _cut(args: Any) -> int:
    from cli.common import parse_duration
    from collectors.trace.cut import cut
    from config.settings import load_settings

    settings = load_settings()
    built = cut(open_db(settings), args.server, since_s=parse_duration(args.since), requests_dir=settings.requests_dir,
                name=args.name, source=args.source, tz=args.tz, replace=args.replace)
    fields = {**built.fields, "id": built.trace_id, "stored": True}
    print(json.dumps(fields, default=str) if args.json else "Stored " + "\n".join(describe(fields)))
    return EXIT_OK


def _stored(args: Any) -> int:
    from config.settings import load_settings
    from storage import repo

    engine = open_db(load_settings(), create=False)
    if args.action == "list":
        rows = [t.model_dump() for t in repo.list_traces(engine)]
        if args.json:
            print(json.dumps([{k: v for k, v in r.items() if k != "summary"} for r in rows], default=str))
        elif not rows:
            print("No traces yet: `pitwall trace import FILE` stores one.")
        for r in [] if args.json else rows:
            print(f"{r['name']}: {r['requests']:,} requests, {r['duration_s']:,.1f} s, {r['format']}, digest {r['digest']}")
        return EXIT_OK
    trace = repo.get_trace(engine, name=args.name)
    if trace is None:
        names = ", ".join(t.name for t in repo.list_traces(engine)) or "none"
        raise CliError(f"No trace named {args.name!r}; stored: {names}.")
    if args.action == "delete":
        assert trace.id is not None
        repo.delete_trace(engine, trace_id=trace.id)
        print(f"Deleted trace {trace.name} ({trace.requests:,} requests).")
        return EXIT_OK
    fields = trace.model_dump()
    print(json.dumps(fields, default=str) if args.json else "\n".join(describe(fields)))
    return EXIT_OK


def trace_cli(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
    except Usage as exc:
        print(f"{PROG}: {exc} (see {PROG} --help)", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    from storage.errors import PitwallError

    try:
        if args.action == "formats":
            from collectors.trace import importer

            for name, fmt in importer.formats().items():
                print(f"{name}: {fmt.description}")
            return EXIT_OK
        if args.action == "cut":
            return _cut(args)
        return _import(args) if args.action == "import" else _stored(args)
    except Usage as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PitwallError as exc:
        print(f"{PROG} {args.action}: {exc}", file=sys.stderr)
        return exc.code if isinstance(exc, CliError) else EXIT_FAIL
    except ValueError as exc:  # a --since that is not a duration
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
