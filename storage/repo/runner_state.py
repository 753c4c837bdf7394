"""What the runner keeps between polls and restarts: collector state (saved in the same transaction as the rows it describes) and the single-instance lease."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from storage.models import (
    RunnerLease,
)
from storage.repo._common import (
    COLLECTOR_STATE,
    LEASE,
)

# ---------------------------------------------------------------------------------------------
# collector state (offsets, last counter values); saved in the same transaction as the rows


def load_state(engine: Engine, *, key: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(COLLECTOR_STATE.c.value).where(COLLECTOR_STATE.c.key == key)
        ).first()
    return row[0] if row else None


def save_state(conn: Connection, *, key: str, value: dict[str, Any]) -> None:
    now = time.time()
    res = conn.execute(
        update(COLLECTOR_STATE)
        .where(COLLECTOR_STATE.c.key == key)
        .values(value=value, updated_at=now)
    )
    if res.rowcount == 0:
        conn.execute(insert(COLLECTOR_STATE).values(key=key, value=value, updated_at=now))


# ---------------------------------------------------------------------------------------------
# runner lease (single instance per database)


def acquire_lease(
    engine: Engine, *, holder: str, pid: int, host: str, ttl_s: float, now: float | None = None
) -> tuple[bool, RunnerLease | None]:
    """Take the runner lease if free or stale (no heartbeat for ttl_s); return (ok, current)."""
    now = time.time() if now is None else now
    with engine.begin() as conn:
        row = conn.execute(select(LEASE).where(LEASE.c.id == 1)).mappings().first()
        if row is not None and row["holder"] != holder and now - row["heartbeat_at"] < ttl_s:
            return False, RunnerLease.model_validate(dict(row))
        values = dict(holder=holder, pid=pid, host=host, started_at=now, heartbeat_at=now)
        if row is None:
            conn.execute(insert(LEASE).values(id=1, **values))
        else:
            # guarded by the heartbeat we read: of two runners taking over a stale lease at
            # once (PostgreSQL reads do not block), only one updates the row
            res = conn.execute(
                update(LEASE)
                .where(and_(LEASE.c.id == 1, LEASE.c.heartbeat_at == row["heartbeat_at"]))
                .values(**values)
            )
            if res.rowcount != 1:
                return False, RunnerLease.model_validate(
                    dict(conn.execute(select(LEASE).where(LEASE.c.id == 1)).mappings().one())
                )
    return True, RunnerLease.model_validate({"id": 1, **values})


def renew_lease(engine: Engine, *, holder: str, now: float | None = None) -> bool:
    """Refresh the heartbeat; False when another runner took the lease over."""
    now = time.time() if now is None else now
    with engine.begin() as conn:
        res = conn.execute(
            update(LEASE)
            .where(and_(LEASE.c.id == 1, LEASE.c.holder == holder))
            .values(heartbeat_at=now)
        )
    return res.rowcount == 1


def release_lease(engine: Engine, *, holder: str) -> None:
    with engine.begin() as conn:
        conn.execute(delete(LEASE).where(and_(LEASE.c.id == 1, LEASE.c.holder == holder)))


def get_lease(engine: Engine) -> RunnerLease | None:
    with Session(engine) as s:
        return s.get(RunnerLease, 1)


