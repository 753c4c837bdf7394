"""`pitwall parse-log FILE [--jsonl]`: the scheduler-log parser as a command.

Contract (other tools depend on it): with ``--jsonl``, one JSON object per recognised record in
file order, ``{"line_no", "kind", "timestamp", "ranks", "fields"}`` plus ``"message"`` for
events (kinds: ``prefill``, ``decode``, ``fsm_cache`` (0.1.x), the diffusion kinds of
log_diffusion.py — ``diffusion_stage`` {stage, seconds}, ``diffusion_step`` {stage, avg_step_s},
``diffusion_request`` {seconds}, ``diffusion_batch`` {outputs, seconds}, ``diffusion_warmed_up``
{seconds}, ``diffusion_memory`` {peak_gb, remaining_gb[, peak_allocated_gb, pool_overhead_gb]}
or {peak_mb}, ``diffusion_batch_memory`` {max_peak_mb, avg_peak_mb} — and the event kinds of
storage/kinds.py). Without ``--jsonl`` a
count per kind is printed. Either way stderr gets a one-line summary with the lines it could
not read (invalid UTF-8 in a line that mattered, a record header with no intact field); they
are never fatal. Exit 0; 2 with one readable line when the file cannot be opened.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from typing import IO

from collectors.sglang.log_parse import LogRecord
from collectors.sglang.log_stream import ParseStats, parse_stream

_dumps = json.JSONEncoder().encode  # ASCII-escaped: safe on any stdout encoding
_BOOL = {True: "true", False: "false"}


def record_json(rec: LogRecord) -> str:
    """The JSON line of one record; equal (as JSON) to json.dumps(rec.to_json_dict()).

    Prefill/decode records are formatted by hand, twice as fast as the json module: their keys
    are slugs ([a-z0-9_]), their timestamp holds only digits and ``-: .,TZ+``, and their values
    are ints, booleans and finite floats (values over 30 characters are refused when parsed).
    Events go through the json module (messages are arbitrary text).
    """
    if rec.message is not None or rec.kind.startswith(("diffusion_", "fsm_")):
        return _dumps(rec.to_json_dict())  # arbitrary text (messages, stage names)
    fs = rec.fields_json
    ts = rec.timestamp
    tsj = "null" if ts is None else '"' + ts + '"'
    rk = ", ".join([f'"{k}": {v}' for k, v in rec.ranks.items()]) if rec.ranks else ""
    if fs is None:
        fs = ", ".join([f'"{k}": {_BOOL[v] if v.__class__ is bool else repr(v)}'
                        for k, v in rec.fields.items()])
    return (f'{{"line_no": {rec.line_no}, "kind": "{rec.kind}", "timestamp": {tsj}, '
            f'"ranks": {{{rk}}}, "fields": {{{fs}}}}}')


def write_jsonl(f: IO[bytes], out: IO[str], stats: ParseStats) -> None:
    """Parse a binary file object and write one JSON line per record to `out`."""
    buf: list[str] = []
    for rec in parse_stream(f, stats):
        buf.append(record_json(rec))
        if len(buf) >= 4096:
            buf.append("")
            out.write("\n".join(buf))
            buf.clear()
    if buf:
        buf.append("")
        out.write("\n".join(buf))


def main_parse_log(path: str, jsonl: bool, out: IO[str] | None = None,
                   err: IO[str] | None = None) -> int:
    """Run `parse-log` on one file; returns the exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    stats = ParseStats()
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; binary keeps non-UTF-8 lines apart
    except OSError as exc:
        err.write(f"parse-log: cannot open {path!r} ({exc.strerror or exc}); "
                  "check the path and that the file is readable.\n")
        return 2
    gc_was_on = gc.isenabled()
    gc.disable()  # the parser makes no reference cycles; collection passes only cost time
    try:
        with f:
            if jsonl:
                write_jsonl(f, out, stats)
            else:
                for _ in parse_stream(f, stats):
                    pass
                for kind, n in sorted(stats.by_kind.items()):
                    out.write(f"{kind:<20} {n}\n")
    finally:
        if gc_was_on:
            gc.enable()
    out.flush()
    err.write(f"parse-log: {stats.records} records from {stats.lines} lines; "
              f"{stats.unreadable} lines could not be read "
              f"({stats.bad_utf8} with invalid UTF-8, read with replacement; "
              f"{stats.unreadable_records} record headers with no intact field)\n")
    return 0


def parse_log_cli(argv: list[str]) -> int:
    """Entry for `pitwall parse-log`; `argv` excludes the subcommand name."""
    ap = argparse.ArgumentParser(prog="pitwall parse-log",
                                 description="Parse an SGLang server log.")
    ap.add_argument("file", help="the log file to read")
    ap.add_argument("--jsonl", action="store_true",
                    help="print one JSON object per recognised record")
    args = ap.parse_args(argv)
    return main_parse_log(args.file, args.jsonl)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(parse_log_cli(sys.argv[1:]))
