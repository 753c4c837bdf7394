"""What the runner keeps between polls and restarts: collector state (saved in the same transaction
as the rows it describes) and the runner leases (one row per scope: `host:<runner.host>`, `db`)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import and_, delete, exists, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from storage.models import (
    Lease,
)
from storage.repo._common import (
    COLLECTOR_STATE,
    LEASE,
)

__all__ = ["load_state", "save_state", "DB_SCOPE", "HOST_SCOPE_PREFIX", "host_scope",
           "acquire_lease", "lease_is", "lease_fence", "renew_lease", "release_lease", "get_lease",
           "list_leases"]

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
# runner leases: one per scope. `host:<runner.host>` is the runner of that host (one per host);
# `db` is the runner that keeps house for the whole database (one per database)

DB_SCOPE = "db"
HOST_SCOPE_PREFIX = "host:"


def host_scope(host: str) -> str:
    """The lease scope of the runner of `host` (its runner.host)."""
    return f"{HOST_SCOPE_PREFIX}{host}"


def acquire_lease(
    engine: Engine, *, scope: str, holder: str, pid: int, host: str, ttl_s: float, now: float | None = None
) -> tuple[bool, Lease | None]:
    """Take the lease of `scope` if free or stale (no heartbeat for ttl_s); return (ok, current).

    Every acquire bumps `generation`: the new holder fences its intent claims and process
    actions with it (`lease_is`), so a runner that stalled past ttl_s (SIGSTOP, a frozen VM)
    finds on waking that it is no longer the holder before it touches a server.
    """
    now = time.time() if now is None else now
    key = LEASE.c.scope == scope
    try:
        with engine.begin() as conn:
            row = conn.execute(select(LEASE).where(key)).mappings().first()
            if row is not None and row["holder"] != holder and now - row["heartbeat_at"] < ttl_s:
                return False, Lease.model_validate(dict(row))
            generation = (int(row["generation"] or 0) if row is not None else 0) + 1
            values = dict(holder=holder, pid=pid, host=host, started_at=now, heartbeat_at=now,
                          generation=generation)
            if row is None:
                conn.execute(insert(LEASE).values(scope=scope, **values))
                return True, Lease.model_validate({"scope": scope, **values})
            return _take_over(conn, key, row, values)
    except IntegrityError:  # another runner inserted the first row of this scope at the same time
        return False, get_lease(engine, scope=scope)


def _take_over(conn: Connection, key: Any, row: Any, values: dict[str, Any]) -> tuple[bool, Lease | None]:
    """Update a stale (or our own) lease row to `values`, unless another runner did first."""
    # guarded by the heartbeat we read: of two runners taking over a stale lease at once
    # (PostgreSQL reads do not block), only one updates the row
    res = conn.execute(
        update(LEASE)
        .where(and_(key, LEASE.c.heartbeat_at == row["heartbeat_at"], LEASE.c.generation == row["generation"]))
        .values(**values)
    )
    current = conn.execute(select(LEASE).where(key)).mappings().one()
    return res.rowcount == 1, Lease.model_validate(dict(current))


def lease_is(engine: Engine, *, scope: str, generation: int) -> bool:
    """True while the lease of `scope` still carries `generation` (nobody took it over since)."""
    with engine.connect() as conn:
        row = conn.execute(select(LEASE.c.generation).where(LEASE.c.scope == scope)).first()
    return row is not None and int(row[0]) == generation


def lease_fence(scope: str, generation: int) -> Any:
    """SQL condition: the lease of `scope` still carries `generation` (a WHERE clause for fenced writes)."""
    return exists().where(and_(LEASE.c.scope == scope, LEASE.c.generation == generation))


def renew_lease(engine: Engine, *, scope: str, holder: str, generation: int | None = None,
                now: float | None = None) -> bool:
    """Refresh the heartbeat; False when another runner took the lease over (fenced by
    `generation` when given: the same holder name after a takeover does not count)."""
    now = time.time() if now is None else now
    cond = and_(LEASE.c.scope == scope, LEASE.c.holder == holder)
    if generation is not None:
        cond = and_(cond, LEASE.c.generation == generation)
    with engine.begin() as conn:
        res = conn.execute(update(LEASE).where(cond).values(heartbeat_at=now))
    return res.rowcount == 1


def release_lease(engine: Engine, *, scope: str, holder: str) -> None:
    with engine.begin() as conn:
        conn.execute(delete(LEASE).where(and_(LEASE.c.scope == scope, LEASE.c.holder == holder)))


def get_lease(engine: Engine, *, scope: str) -> Lease | None:
    with Session(engine, expire_on_commit=False) as s:
        return s.get(Lease, scope)


def list_leases(engine: Engine) -> list[Lease]:
    """Every lease row: `db` first, then the hosts' by name (stale ones included: readers judge
    freshness against the TTL)."""
    with Session(engine, expire_on_commit=False) as s:
        rows = list(s.execute(select(Lease)).scalars())
    return sorted(rows, key=lambda lease: (lease.scope != DB_SCOPE, lease.scope))
