"""A stored probe run as a trace source (`pitwall trace import --run N`): so a sweep can be replayed
exactly as it went, open-loop, or against another profile as it was sent to this one.

Each request the run sent (warm-up requests left out, counted in a note) becomes one record: its
arrival the moment it was sent (epoch seconds, rebased by normalise), its input tokens as the
server counted them, its output tokens as it answered them (a failed request is kept as a failed
row, which a replay leaves out and counts), the run's API, its session and turn where the
workload had them (multi-turn runs keep them in each request's detail), and its end-to-end
latency for reference. A request whose server reported no prompt token count cannot be sized:
it is a bad row with that reason. No prompt text is kept: a replay writes synthetic prompts of
the same lengths.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy.engine import Engine

from collectors.trace.model import TRACE_APIS, BadRow, ReadResult, TraceError, TraceRecord
from storage import repo

FORMAT = "pitwall-run"


def _number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def read_run(engine: Engine, run_id: int) -> ReadResult:
    run = repo.get_probe_run(engine, run_id=run_id)
    if run is None:
        raise TraceError(f"No probe run {run_id}; the Benchmarks page lists them with their ids.")
    rows = repo.probe_requests(engine, run_id=run_id)
    if rows.empty:
        raise TraceError(f"Probe run {run_id} stored no requests ({run.status}); nothing to make a trace of.")
    result = ReadResult(format=FORMAT, clock="epoch")
    api = run.api if run.api in TRACE_APIS else None
    warm = 0
    for line, r in enumerate(rows.sort_values("start_ts").to_dict("records"), start=1):
        result.lines_read += 1
        if r.get("warmup"):
            warm += 1
            continue
        sent, tokens_in = _number(r.get("start_ts")), _number(r.get("tokens_in"))
        if sent is None:
            result.bad.append(BadRow(line, "the request has no send time"))
            continue
        if tokens_in is None:
            result.bad.append(BadRow(line, "the server reported no prompt token count for it"))
            continue
        ok = bool(r.get("ok"))
        tokens_out = _number(r.get("tokens_out"))
        detail = r.get("detail") if isinstance(r.get("detail"), dict) else {}
        turn = detail.get("turn")
        result.records.append(TraceRecord(
            line=line, input_tokens=int(tokens_in), output_tokens=int(tokens_out) if ok and tokens_out else None,
            arrival=sent, session=str(detail["session"]) if detail.get("session") is not None else None,
            turn=int(turn) if isinstance(turn, int) else None, api=api, status="ok" if ok else "failed",
            source_latency_s=_number(r.get("e2e_s"))))
    result.notes.append(f"probe run {run_id} ({run.name or run.api}): the {len(result.records)} request(s) it sent, "
                        "at the moments it sent them")
    if warm:
        result.notes.append(f"{warm} warm-up request(s) left out")
    return result
