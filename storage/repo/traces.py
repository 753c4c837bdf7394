"""Imported request traces: one Trace row and its TraceRequest rows, written in one transaction
(batches of executemany), read back by name or id, in arrival order, optionally a window."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from storage.models import Trace, TraceRequest

__all__ = ["save_trace", "get_trace", "list_traces", "trace_requests", "delete_trace", "trace_request_count"]

TRACE_REQUEST = TraceRequest.__table__  # type: ignore[attr-defined]
_BATCH = 5000


def save_trace(engine: Engine, *, fields: dict[str, Any], requests: Iterable[dict[str, Any]],
               replace: bool = False) -> int:
    """Store a trace and its requests at once (all or nothing); `replace` drops a trace of the
    same name in the same transaction. Returns the new id."""
    table = Trace.__table__  # type: ignore[attr-defined]
    with engine.begin() as conn:
        if replace:
            old = conn.execute(select(table.c.id).where(table.c.name == fields["name"])).scalar()
            if old is not None:
                conn.execute(delete(TRACE_REQUEST).where(TRACE_REQUEST.c.trace_id == old))
                conn.execute(delete(table).where(table.c.id == old))
        pk = conn.execute(insert(table).values(**fields)).inserted_primary_key
        assert pk is not None
        trace_id = int(pk[0])
        batch: list[dict[str, Any]] = []
        for row in requests:
            batch.append({**row, "trace_id": trace_id})
            if len(batch) >= _BATCH:
                conn.execute(insert(TRACE_REQUEST), batch)
                batch = []
        if batch:
            conn.execute(insert(TRACE_REQUEST), batch)
    return trace_id


def get_trace(engine: Engine, *, name: str | None = None, trace_id: int | None = None) -> Trace | None:
    with Session(engine, expire_on_commit=False) as s:
        if trace_id is not None:
            return s.get(Trace, trace_id)
        return s.execute(select(Trace).where(col(Trace.name) == name)).scalars().first()


def list_traces(engine: Engine, *, limit: int = 200) -> list[Trace]:
    with Session(engine, expire_on_commit=False) as s:
        return list(s.execute(select(Trace).order_by(col(Trace.id).desc()).limit(limit)).scalars())


def trace_request_count(engine: Engine, *, trace_id: int) -> int:
    with engine.connect() as conn:
        q = select(func.count()).select_from(TRACE_REQUEST).where(TRACE_REQUEST.c.trace_id == trace_id)
        return int(conn.execute(q).scalar() or 0)


def trace_requests(engine: Engine, *, trace_id: int, start_s: float | None = None, end_s: float | None = None,
                   limit: int | None = None, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Requests in arrival order, those arriving in [start_s, end_s) when given, at most `limit`."""
    cols = [TRACE_REQUEST.c[c] for c in columns] if columns else [TRACE_REQUEST]
    q = select(*cols).where(TRACE_REQUEST.c.trace_id == trace_id)
    if start_s is not None:
        q = q.where(TRACE_REQUEST.c.arrival_s >= start_s)
    if end_s is not None:
        q = q.where(TRACE_REQUEST.c.arrival_s < end_s)
    q = q.order_by(TRACE_REQUEST.c.seq)
    if limit is not None:
        q = q.limit(limit)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(q).mappings()]


def delete_trace(engine: Engine, *, trace_id: int) -> bool:
    table = Trace.__table__  # type: ignore[attr-defined]
    with engine.begin() as conn:
        conn.execute(delete(TRACE_REQUEST).where(TRACE_REQUEST.c.trace_id == trace_id))
        return bool(conn.execute(delete(table).where(table.c.id == trace_id)).rowcount)
