"""ProbeRun / ProbeRequest writes and the few reads a sweep needs (SQLAlchemy Core, one Engine).

Temporary home: the lead moves these into storage/repo.py (the only SQL in the project).
ProbeRequest rows go in with one Core `insert()` executemany per batch (per-row ORM adds are
12x slower: perf-baselines.md §5). Progress (`ProbeRun.progress`, 0..1) and `status`
(pending -> running -> done | failed | aborted) are updated while a sweep runs, so the dashboard
can show live progress by reading the row.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine

from collectors.probe.client import RequestRecord
from storage.models import ProbeRequest, ProbeRun

RUN = ProbeRun.__table__  # type: ignore[attr-defined]
REQ = ProbeRequest.__table__  # type: ignore[attr-defined]
BATCH_ROWS = 1000


def create_run(
    engine: Engine,
    *,
    url: str,
    api: str,
    spec: dict[str, Any],
    fingerprint: str,
    fingerprint_detail: dict[str, Any],
    server_id: int | None = None,
    launch_id: int | None = None,
    name: str | None = None,
    baseline_run_id: int | None = None,
) -> int:
    """Insert a `pending` ProbeRun and return its id."""
    with engine.begin() as conn:
        res = conn.execute(insert(RUN).values(
            url=url, api=api, spec=spec, fingerprint=fingerprint,
            fingerprint_detail=fingerprint_detail, server_id=server_id, launch_id=launch_id,
            name=name, baseline_run_id=baseline_run_id, status="pending", progress=0.0,
            created_at=time.time(),
        ))
        pk = res.inserted_primary_key
        assert pk is not None
        return int(pk[0])


def update_run(engine: Engine, *, run_id: int, **fields: Any) -> None:
    """Set columns of a ProbeRun (status, progress, started_at, report, trusted, error, ...)."""
    with engine.begin() as conn:
        conn.execute(update(RUN).where(RUN.c.id == run_id).values(**fields))


def insert_requests(engine: Engine, *, run_id: int, records: Sequence[RequestRecord]) -> int:
    """Write ProbeRequest rows in executemany batches; returns the number written."""
    rows = [r.row(run_id) for r in records]
    with engine.begin() as conn:
        for i in range(0, len(rows), BATCH_ROWS):
            conn.execute(insert(REQ), rows[i:i + BATCH_ROWS])
    return len(rows)


def get_run(engine: Engine, *, run_id: int) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(RUN).where(RUN.c.id == run_id)).mappings().first()
    return dict(row) if row else None


def output_rows(engine: Engine, *, run_id: int) -> list[tuple[int, bool, str | None]]:
    """(seq, ok, output_hash) of every request of a run (consistency check input)."""
    with engine.connect() as conn:
        rows: Iterable[Any] = conn.execute(
            select(REQ.c.seq, REQ.c.ok, REQ.c.output_hash).where(REQ.c.run_id == run_id)
        ).all()
        return [(int(s), bool(ok), h) for s, ok, h in rows]


def request_count(engine: Engine, *, run_id: int) -> int:
    with engine.connect() as conn:
        return len(conn.execute(select(REQ.c.id).where(REQ.c.run_id == run_id)).all())

