"""Probe runs and their requests. A run's `error` text passes through storage/redact.py; its
`spec` is what a sweep runs (the API key is never in it: SweepSpec.to_dict masks it)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from storage.models import (
    ProbeRun,
)
from storage.redact import redact_fields
from storage.repo._common import (
    PROBE_REQUEST,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["create_probe_run", "update_probe_run", "insert_probe_requests", "insert_probe_run",
           "probe_run_row", "probe_output_rows", "probe_request_count", "get_probe_run",
           "list_probe_runs", "newest_probe_run", "probe_requests"]

# ---------------------------------------------------------------------------------------------
# probe runs


def create_probe_run(engine: Engine, **fields: Any) -> ProbeRun:
    fields.setdefault("created_at", time.time())
    fields = redact_fields(fields, text=("error",))
    with Session(engine, expire_on_commit=False) as s:
        run = ProbeRun(**fields)
        s.add(run)
        s.commit()
        s.refresh(run)
        return run


def update_probe_run(engine: Engine, *, run_id: int, only_if_status: str | None = None,
                     **fields: Any) -> None:
    """Set columns of a ProbeRun; with `only_if_status`, only while the run's status is that one
    (a late progress write never lands on a run that has concluded)."""
    fields = redact_fields(fields, text=("error",))
    table = ProbeRun.__table__  # type: ignore[attr-defined]
    stmt = update(table).where(table.c.id == run_id)
    if only_if_status is not None:
        stmt = stmt.where(table.c.status == only_if_status)
    with engine.begin() as conn:
        conn.execute(stmt.values(**fields))


def insert_probe_requests(conn: Connection, *, rows: Sequence[dict[str, Any]]) -> int:
    if rows:
        conn.execute(insert(PROBE_REQUEST), list(rows))
    return len(rows)


def insert_probe_run(conn: Connection, **fields: Any) -> int:
    """Insert a ProbeRun row (Core) and return its id."""
    fields.setdefault("created_at", time.time())
    res = conn.execute(insert(ProbeRun.__table__).values(**fields))  # type: ignore[attr-defined]
    pk = res.inserted_primary_key
    assert pk is not None
    return int(pk[0])


def probe_run_row(engine: Engine, *, run_id: int) -> dict[str, Any] | None:
    """A ProbeRun as a plain dict (for the sweep subprocess, which avoids ORM sessions)."""
    run = ProbeRun.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        row = conn.execute(select(run).where(run.c.id == run_id)).mappings().first()
    return dict(row) if row else None


def probe_output_rows(engine: Engine, *, run_id: int) -> list[tuple[int, bool, str | None]]:
    """(seq, ok, output_hash) of every request of a run (the output-consistency check)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(PROBE_REQUEST.c.seq, PROBE_REQUEST.c.ok, PROBE_REQUEST.c.output_hash).where(
                PROBE_REQUEST.c.run_id == run_id
            )
        ).all()
    return [(int(s), bool(ok), h) for s, ok, h in rows]


def probe_request_count(engine: Engine, *, run_id: int) -> int:
    with engine.connect() as conn:
        q = select(func.count()).select_from(PROBE_REQUEST).where(PROBE_REQUEST.c.run_id == run_id)
        return int(conn.execute(q).scalar() or 0)


def get_probe_run(engine: Engine, *, run_id: int) -> ProbeRun | None:
    with Session(engine, expire_on_commit=False) as s:
        return s.get(ProbeRun, run_id)


def list_probe_runs(
    engine: Engine, *, server_id: int | None = None, limit: int = 100
) -> list[ProbeRun]:
    with Session(engine, expire_on_commit=False) as s:
        q = select(ProbeRun).order_by(col(ProbeRun.id).desc()).limit(limit)
        if server_id is not None:
            q = q.where(col(ProbeRun.server_id) == server_id)
        return list(s.execute(q).scalars())


def newest_probe_run(
    engine: Engine, *, server_id: int, launch_id: int | None = None, status: str | None = None,
    baseline_run_id: int | None = None, since: float | None = None, before: float | None = None,
) -> ProbeRun | None:
    """The server's newest run matching every filter given (`since`: created at or after,
    `before`: created before, epoch seconds); one query, for panels that redraw every second."""
    q = select(ProbeRun).where(col(ProbeRun.server_id) == server_id)
    if launch_id is not None:
        q = q.where(col(ProbeRun.launch_id) == launch_id)
    if status is not None:
        q = q.where(col(ProbeRun.status) == status)
    if baseline_run_id is not None:
        q = q.where(col(ProbeRun.baseline_run_id) == baseline_run_id)
    if since is not None:
        q = q.where(col(ProbeRun.created_at) >= since)
    if before is not None:
        q = q.where(col(ProbeRun.created_at) < before)
    with Session(engine, expire_on_commit=False) as s:
        return s.execute(q.order_by(col(ProbeRun.id).desc()).limit(1)).scalars().first()


def probe_requests(engine: Engine, *, run_id: int) -> pd.DataFrame:
    import pandas as pd  # here, not at import: a sweep process never needs it
    with engine.connect() as conn:
        rows = conn.execute(
            select(PROBE_REQUEST).where(PROBE_REQUEST.c.run_id == run_id).order_by(
                PROBE_REQUEST.c.id
            )
        ).mappings().all()
    return pd.DataFrame(rows, columns=[c.name for c in PROBE_REQUEST.columns])


