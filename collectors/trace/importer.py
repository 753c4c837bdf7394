"""`pitwall trace import`: files -> a normalised, stored trace.

The format is sniffed from the first file's first lines (an engine's own request records first,
then the public formats, the more specific first) unless `--format` names it; several files (an
engine's hourly files, a folder of them) are read one after another by the same reader, in name
order for a folder. What the import met is said, never hidden: rows it could not use (line and
reason, the first 200 stored, all counted), quirks (CRLF, unsorted rows, a trace that does not
start at 0), the clock its arrival times came from, and a cap that cut it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from collectors.trace.formats import FORMATS
from collectors.trace.model import (
    BadRow,
    ReadOptions,
    ReadResult,
    Trace,
    TraceError,
    TraceFormat,
    normalise,
)
from collectors.trace.source import Lines, head, read_lines
from collectors.trace.summary import summarise
from storage import repo

#: the import's default cap on requests (`--max-requests` raises or lowers it)
DEFAULT_MAX_REQUESTS = 2_000_000
BAD_ROWS_KEPT = 200


def formats() -> dict[str, TraceFormat]:
    """Every readable format by name: the registered engines' own, then the public ones."""
    from collectors.engines import trace_formats

    return {**trace_formats(), **FORMATS}


def expand(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
            if not files:
                raise TraceError(f"{p} holds no files to import.")
            out.extend(files)
        elif p.is_file():
            out.append(p)
        else:
            raise TraceError(f"{p} is not a file or a folder; check the path.")
    if not out:
        raise TraceError("No file to import: name a trace file or a folder of them.")
    return out


def detect(path: Path) -> TraceFormat:
    lines = head(path, 200)
    if not any(t.strip() for t in lines):
        raise TraceError(f"{path} is empty.")
    for fmt in formats().values():
        if fmt.sniff(lines):
            return fmt
    raise TraceError(f"{path.name}: not a trace format Pitwall knows; name one with --format "
                     f"({', '.join(formats())}).")


def read(paths: Sequence[Path], fmt_name: str = "auto", options: ReadOptions | None = None) -> ReadResult:
    """Read every file with one reader and merge what it made of them."""
    options = options or ReadOptions(max_requests=DEFAULT_MAX_REQUESTS)
    files = expand(paths)
    known = formats()
    if fmt_name == "auto":
        fmt = detect(files[0])
    elif fmt_name in known:
        fmt = known[fmt_name]
    else:
        raise TraceError(f"Unknown trace format {fmt_name!r}; known: auto, {', '.join(known)}.")
    merged: ReadResult | None = None
    for path in files:
        left = None if options.max_requests is None else options.max_requests - (len(merged.records) if merged else 0)
        if left is not None and left <= 0:
            merged.notes.append(f"{path.name} and later files not read: the request cap was reached")  # type: ignore[union-attr]
            break
        state = Lines(path)
        part = fmt.read(read_lines(path, state), _with_cap(options, left))
        where = f"{path.name}: " if len(files) > 1 else ""
        part.bad = [BadRow(b.line, where + b.reason) for b in state.too_long + part.bad]
        part.notes = [where + n for n in state.notes() + part.notes]
        if part.cut_at is not None:
            part.notes.append(f"{where}cut at line {part.cut_at}: the request cap ({options.max_requests}) was reached")
        merged = part if merged is None else _merge(merged, part)
    assert merged is not None
    if not merged.records:
        raise TraceError(f"No request could be read from {', '.join(f.name for f in files)} as {fmt.name}"
                         + (f" ({len(merged.bad)} bad row(s), first: line {merged.bad[0].line}: {merged.bad[0].reason})"
                            if merged.bad else "") + ".")
    return merged


def _with_cap(options: ReadOptions, left: int | None) -> ReadOptions:
    return ReadOptions(block_size=options.block_size, time_unit=options.time_unit, keep_text=options.keep_text,
                       max_requests=left, tz=options.tz)


def _merge(a: ReadResult, b: ReadResult) -> ReadResult:
    if a.clock != b.clock and "none" not in (a.clock, b.clock):
        raise TraceError(f"The files keep time differently ({a.clock} and {b.clock}); import them separately.")
    a.records.extend(b.records)
    a.bad.extend(b.bad)
    a.notes.extend(b.notes)
    a.lines_read += b.lines_read
    return a


@dataclass(slots=True)
class Imported:
    trace: Trace
    summary: dict[str, Any]
    fields: dict[str, Any]
    trace_id: int | None = None


def build(paths: Sequence[Path], *, name: str | None = None, fmt: str = "auto", options: ReadOptions | None = None,
          rate: float | None = None, seed: int = 0, since_ts: float | None = None) -> Imported:
    """Read and normalise; nothing is stored (what `--dry-run` prints). `since_ts` keeps the
    requests that arrived at or after that epoch (a source with absolute times only)."""
    options = options or ReadOptions(max_requests=DEFAULT_MAX_REQUESTS)
    result = read(paths, fmt, options)
    if since_ts is not None:
        if result.clock != "epoch":
            raise TraceError(f"{result.format} keeps relative times: a cut by time needs absolute ones.")
        kept = [r for r in result.records if r.arrival is not None and r.arrival >= since_ts]
        if not kept:
            raise TraceError(f"No request arrived in the window ({len(result.records)} earlier ones read).")
        result.notes.append(f"{len(result.records) - len(kept)} earlier request(s) left out by the window")
        result.records = kept
    files = expand(paths)
    return finish(result, name=name or files[0].stem, source=", ".join(f.name for f in files), options=options,
                  rate=rate, seed=seed)


def finish(result: ReadResult, *, name: str, source: str, options: ReadOptions, rate: float | None = None,
           seed: int = 0) -> Imported:
    """A read result normalised into a trace with its summary and stored fields (nothing stored)."""
    if not result.records:
        raise TraceError(f"No request could be read from {source} ({len(result.bad)} row(s) could not be read).")
    first = min((r.arrival for r in result.records if r.arrival is not None), default=None)
    trace = normalise(result, rate=rate, seed=seed)
    summary = summarise(trace.requests, trace.block_size)
    fields = {
        "name": name, "format": trace.format,
        "source": source[:500], "digest": trace.digest, "imported_at": time.time(),
        "requests": len(trace.requests), "duration_s": trace.duration_s, "block_size": trace.block_size,
        "clock": "none" if trace.synthetic_arrivals else trace.clock,
        "first_arrival_ts": first if trace.clock == "epoch" else None, "keeps_text": options.keep_text,
        "notes": trace.notes, "bad_rows": [{"line": b.line, "reason": b.reason} for b in trace.bad[:BAD_ROWS_KEPT]],
        "bad_count": len(trace.bad), "summary": summary,
    }
    return Imported(trace=trace, summary=summary, fields=fields)


def build_from_run(engine: Engine, run_id: int, *, name: str | None = None) -> Imported:
    """A trace of what a stored probe run sent (collectors/trace/from_run.py): a sweep, replayed
    open-loop at the moments it sent each request, with its requests' own token counts."""
    from collectors.trace.from_run import read_run

    result = read_run(engine, run_id)
    return finish(result, name=name or f"run-{run_id}", source=f"probe run {run_id}",
                  options=ReadOptions(max_requests=DEFAULT_MAX_REQUESTS))


def store(engine: Engine, imported: Imported, *, replace: bool = False) -> int:
    name = imported.fields["name"]
    if not replace and repo.get_trace(engine, name=name) is not None:
        raise TraceError(f"A trace named {name!r} exists; choose another --name or pass --replace.")
    keep = bool(imported.fields["keeps_text"])
    rows = ({k: v for k, v in r.to_dict().items() if keep or k != "text"} for r in imported.trace.requests)
    imported.trace_id = repo.save_trace(engine, fields=imported.fields, requests=rows, replace=replace)
    return imported.trace_id
