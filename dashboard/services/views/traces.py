"""What the Traces page reads and does: the stored traces, one trace's preview, an import from an
uploaded file (collectors/trace/importer.py, audited)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from collectors.trace import importer
from collectors.trace.model import ReadOptions
from storage import repo

#: the largest upload the page imports (the CLI reads files of any size)
MAX_UPLOAD_BYTES = 200 * 1024 * 1024


def table(engine: Engine) -> pd.DataFrame:
    rows = []
    for t in repo.list_traces(engine):
        s = t.summary or {}
        rows.append({"name": t.name, "format": t.format, "requests": t.requests, "duration_s": t.duration_s,
                     "rate_rps": s.get("rate_rps"), "peak_rps": s.get("peak_rps"),
                     "prefix_reuse": s.get("prefix_reuse_share"), "sessions": s.get("sessions"),
                     "bad_rows": t.bad_count, "imported_at": t.imported_at, "digest": t.digest})
    return pd.DataFrame(rows, columns=["name", "format", "requests", "duration_s", "rate_rps", "peak_rps",
                                       "prefix_reuse", "sessions", "bad_rows", "imported_at", "digest"])


def detail(engine: Engine, name: str) -> dict[str, Any] | None:
    trace = repo.get_trace(engine, name=name)
    return None if trace is None else trace.model_dump()


def arrivals(fields: dict[str, Any]) -> pd.DataFrame:
    """Requests per second over the trace, per the summary's bucket."""
    s = fields.get("summary") or {}
    bucket = float(s.get("bucket_s") or 1.0)
    rows = [(t, n / bucket) for t, n in s.get("arrivals") or []]
    return pd.DataFrame(rows, columns=["time_s", "requests_per_s"])


def lengths(fields: dict[str, Any]) -> pd.DataFrame:
    """Requests per power-of-two length bucket, input and output side by side."""
    s = fields.get("summary") or {}
    ins, outs = s.get("histogram_input") or {}, s.get("histogram_output") or {}
    keys = sorted({int(k) for k in ins} | {int(k) for k in outs})
    return pd.DataFrame({"tokens from": [str(k) for k in keys], "input": [ins.get(str(k), 0) for k in keys],
                         "output": [outs.get(str(k), 0) for k in keys]})


def import_upload(engine: Engine, *, filename: str, data: bytes, fmt: str, name: str | None, rate: float | None,
                  actor: str, data_dir: Path) -> dict[str, Any]:
    """Store an uploaded trace file (read from a private temporary copy, removed after); the
    import is audited. Raises TraceError (its message says what to change)."""
    from collectors.trace.model import TraceError

    if len(data) > MAX_UPLOAD_BYTES:
        raise TraceError(f"{filename} is {len(data) / 1e6:.0f} MB; the page imports up to "
                         f"{MAX_UPLOAD_BYTES // (1024 * 1024)} MiB: use `pitwall trace import` for larger files.")
    data_dir.mkdir(parents=True, exist_ok=True)
    suffix = "".join(Path(filename).suffixes)[-20:]
    fd, tmp = tempfile.mkstemp(prefix="upload-", suffix=suffix, dir=data_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        built = importer.build([Path(tmp)], name=name or Path(filename).stem.split(".")[0], fmt=fmt,
                               options=ReadOptions(max_requests=importer.DEFAULT_MAX_REQUESTS), rate=rate)
        built.fields["source"] = filename[:500]
        importer.store(engine, built)
    finally:
        Path(tmp).unlink(missing_ok=True)
    repo.add_audit(engine, actor=actor, action="trace_import", target=built.fields["name"],
                   detail={"file": filename, "format": built.fields["format"], "requests": built.fields["requests"],
                           "bad_rows": built.fields["bad_count"], "digest": built.fields["digest"]})
    return built.fields


def format_names() -> list[str]:
    return ["auto", *importer.formats()]
