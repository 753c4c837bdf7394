"""What the Traces page reads and does: the stored traces, one trace's preview, an import from an
uploaded file (collectors/trace/importer.py, audited), and a replay against a server (a pending
run and a `probe` intent the runner's probe lane carries out, audited)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from collectors.trace import importer
from collectors.trace.model import ReadOptions
from scorecard.metric_specs import ITL_P99_S, TTFT_P99_S
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


#: the fastest replay the page asks for (the CLI's --max-speed default)
MAX_SPEED = 1024.0


def start_replay(engine: Engine, *, server: str, trace: str, speed: float, window: tuple[float | None, float | None],
                 max_requests: int | None, requested_by: str) -> tuple[int, int]:
    """Record a replay of stored `trace` against `server` at `speed` (a pending ProbeRun whose spec
    names the trace and its digest, a `probe` intent, a `replay_start` audit row); returns (run id,
    intent id). Raises TraceError with what to change."""
    from collectors.trace.model import TraceError
    from dashboard.services.views.benchmarks import record_probe

    srv = repo.get_server(engine, name=server)
    if srv is None or srv.id is None:
        raise TraceError(f"Server {server!r} is not configured; pick one from the list.")
    stored = repo.get_trace(engine, name=trace)
    if stored is None:
        raise TraceError(f"No trace named {trace!r}; import it first.")
    if not 0 < speed <= MAX_SPEED:
        raise TraceError(f"Speed {speed:g} is out of range: 0 < speed <= {MAX_SPEED:g} (2 = twice as fast).")
    start, end = window
    if start is not None and end is not None and end <= start:
        raise TraceError(f"The window's end ({end:g} s) must be after its start ({start:g} s).")
    if max_requests is not None and max_requests <= 0:
        raise TraceError("Max requests must be positive (or left empty: every request of the window).")
    launch = repo.latest_launch(engine, server_id=srv.id)
    launch_id = launch.id if launch is not None and launch.ended_at is None else None
    api = "images" if srv.kind == "image" else None  # an LLM trace: each request's own API
    spec: dict[str, Any] = {"trace": stored.name, "digest": stored.digest, "speed": float(speed),
                            "window": [start, end], "max_requests": max_requests, "url": srv.base_url, "api": api,
                            "server_id": srv.id, "launch_id": launch_id, "name": f"trace {stored.name} at {speed:g}x",
                            "mode": "rate", "workload": {"prompt_set": f"trace {stored.name} at {speed:g}x"}}
    return record_probe(engine, srv.id, spec, requested_by=requested_by, target=server, action="replay_start",
                        detail={"trace": stored.name, "digest": stored.digest, "speed": float(speed),
                                "window": [start, end], "max_requests": max_requests})


def replays(engine: Engine, trace: str, limit: int = 200) -> pd.DataFrame:
    """The replays of `trace` among the newest `limit` runs, newest first: what each measured."""
    servers = {srv.id: srv.name for srv in repo.list_servers(engine)}
    rows = []
    for run in repo.list_probe_runs(engine, limit=limit):
        spec = run.spec or {}
        if spec.get("trace") != trace:
            continue
        rep = run.report or {}
        rows.append({"run": run.id, "server": servers.get(run.server_id, "—"), "speed": spec.get("speed"),
                     "status": run.status, "progress": run.progress, "ok": rep.get("ok"),
                     TTFT_P99_S: (rep.get("ttft_s") or {}).get("p99"), ITL_P99_S: (rep.get("itl_s") or {}).get("p99"),
                     "lag_p99_s": (rep.get("schedule_lag_s") or {}).get("p99"),
                     "trusted": None if run.status != "done" else bool(run.trusted),
                     "error": run.error or rep.get("untrusted_reason")})
    return pd.DataFrame(rows, columns=["run", "server", "speed", "status", "progress", "ok", TTFT_P99_S, ITL_P99_S,
                                       "lag_p99_s", "trusted", "error"])


#: the windows the page cuts: label -> seconds ending now
CUT_WINDOWS = {"last 15 minutes": 900.0, "last hour": 3600.0, "last 6 hours": 6 * 3600.0,
               "last 24 hours": 86400.0, "last 7 days": 7 * 86400.0}


def cut_from_server(engine: Engine, *, server: str, since: str, name: str | None, actor: str,
                    requests_dir: Path) -> dict[str, Any]:
    """Store a trace of what `server` served over the window `since` (a CUT_WINDOWS label) from its
    own request records (collectors/trace/cut.py); audited. Raises TraceError with what to change."""
    from collectors.trace.cut import cut
    from collectors.trace.model import TraceError

    if since not in CUT_WINDOWS:
        raise TraceError(f"Window {since!r} is not one of {', '.join(CUT_WINDOWS)}.")
    built = cut(engine, server, since_s=CUT_WINDOWS[since], requests_dir=requests_dir, name=name)
    repo.add_audit(engine, actor=actor, action="trace_cut", target=server,
                   detail={"trace": built.fields["name"], "since": since, "requests": built.fields["requests"],
                           "digest": built.fields["digest"]})
    return built.fields


def format_names() -> list[str]:
    return ["auto", *importer.formats()]
