"""Intents: desired state written by the UI/CLI, claimed and carried out by the runner.

`update_intent` passes `message`, `result` and `progress` through storage/redact.py: a failed
launch's message and log excerpt keep no secret in the database.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from storage.kinds import FINAL_INTENT_STATES, RESUMABLE_INTENT_KINDS, check_intent_kind
from storage.models import (
    Intent,
    Launch,
    Server,
)
from storage.redact import redact_fields
from storage.repo._common import (
    INTENT,
)
from storage.repo.runner_state import DB_SCOPE, HOST_SCOPE_PREFIX, host_scope, lease_fence

__all__ = ["create_intent", "claim_next_intent", "pending_intent_kinds", "update_intent", "get_intent", "list_intents",
           "IN_FLIGHT_LAUNCH", "in_flight_launch", "fail_stale_intents", "expire_pending_intents"]

_LAUNCH = Launch.__table__  # type: ignore[attr-defined]

# ---------------------------------------------------------------------------------------------
# intents (desired state written by UI/CLI, carried out by the runner)


def create_intent(
    engine: Engine,
    *,
    kind: str,
    server_id: int | None,
    payload: dict[str, Any] | None = None,
    requested_by: str = "cli",
) -> Intent:
    """A pending intent; `host` is its server's host (the only runner that may carry it out),
    None for one that names no server (or a server without a host), which the `db` runner claims."""
    check_intent_kind(kind)
    with Session(engine, expire_on_commit=False) as s:
        server = s.get(Server, server_id) if server_id is not None else None
        intent = Intent(
            kind=kind,
            server_id=server_id,
            host=server.host if server is not None else None,
            payload=payload or {},
            requested_by=requested_by,
            created_at=time.time(),
        )
        s.add(intent)
        s.commit()
        s.refresh(intent)
        return intent


def _visible(q: Any, host: str | None, db_generation: int | None) -> Any:
    """`q` narrowed to the intents a runner of `host` may claim (see claim_next_intent)."""
    if host is None:
        return q
    mine = INTENT.c.host == host
    return q.where(or_(mine, INTENT.c.host.is_(None)) if db_generation is not None else mine)


def pending_intent_kinds(engine: Engine, *, host: str | None = None,
                         db_generation: int | None = None) -> set[str]:
    """The kinds of the pending intents a runner of `host` may claim: one read, so a runner's
    tick claims (a write transaction each) only in the lanes that have work."""
    q = _visible(select(INTENT.c.kind).where(INTENT.c.state == "pending").distinct(), host, db_generation)
    with engine.connect() as conn:
        return {str(k) for (k,) in conn.execute(q)}


def claim_next_intent(
    engine: Engine,
    *,
    kinds: Iterable[str] | None = None,
    generation: int | None = None,
    host: str | None = None,
    db_generation: int | None = None,
) -> Intent | None:
    """Move the oldest pending intent to running and return it (None when there is none).

    The UPDATE is guarded by `state = 'pending'`, so two runners (or a stale one) can never
    claim the same intent. With `host` (a fleet runner) only intents of that host are claimed,
    fenced by its host lease when `generation` is given, so a runner that lost its lease while
    stalled claims nothing; host-less intents (no server, or a server without a host) only with
    `db_generation`, fenced by the `db` lease: the housekeeping runner carries them out. Without
    `host` (a single process: tests, tools) any pending intent is claimed.
    """
    with engine.begin() as conn:
        q = _visible(select(INTENT.c.id).where(INTENT.c.state == "pending"), host, db_generation)
        q = q.order_by(INTENT.c.id).limit(1)
        if kinds is not None:
            q = q.where(INTENT.c.kind.in_(list(kinds)))
        row = conn.execute(q).first()
        if row is None:
            return None
        cond = and_(INTENT.c.id == row[0], INTENT.c.state == "pending")
        if host is not None and generation is not None:
            cond = and_(cond, lease_fence(host_scope(host), generation))
        if host is not None and db_generation is not None:
            cond = and_(cond, or_(INTENT.c.host == host, lease_fence(DB_SCOPE, db_generation)))
        res = conn.execute(update(INTENT).where(cond).values(state="running", started_at=time.time()))
        if res.rowcount != 1:
            return None
    return get_intent(engine, intent_id=row[0])


def update_intent(engine: Engine, *, intent_id: int, **fields: Any) -> None:
    if fields.get("state") in FINAL_INTENT_STATES and "finished_at" not in fields:
        fields["finished_at"] = time.time()
    fields = redact_fields(fields, text=("message",), obj=("result", "progress"))
    with engine.begin() as conn:
        conn.execute(update(INTENT).where(INTENT.c.id == intent_id).values(**fields))


def get_intent(engine: Engine, *, intent_id: int) -> Intent | None:
    with Session(engine, expire_on_commit=False) as s:
        return s.get(Intent, intent_id)


def list_intents(
    engine: Engine,
    *,
    server_id: int | None = None,
    states: Iterable[str] | None = None,
    kinds: Iterable[str] | None = None,
    limit: int = 50,
) -> list[Intent]:
    with Session(engine, expire_on_commit=False) as s:
        q = select(Intent).order_by(col(Intent.id).desc()).limit(limit)
        if server_id is not None:
            q = q.where(col(Intent.server_id) == server_id)
        if states is not None:
            q = q.where(col(Intent.state).in_(list(states)))
        if kinds is not None:
            q = q.where(col(Intent.kind).in_(list(kinds)))
        return list(s.execute(q).scalars())


#: Intent.result key a launch / relaunch writes as soon as it has spawned a server: the launch
#: it is waiting on (runner/lifecycle.py), so a runner killed meanwhile leaves it findable
IN_FLIGHT_LAUNCH = "launch_id"


def in_flight_launch(intent: Intent) -> int | None:
    """The launch a running launch / relaunch intent spawned and was waiting on, if any."""
    lid = (intent.result or {}).get(IN_FLIGHT_LAUNCH) if isinstance(intent.result, dict) else None
    return lid if isinstance(lid, int) and intent.kind in ("launch", "relaunch") else None


def fail_stale_intents(engine: Engine, *, reason: str, scope: str | None = None,
                       keep_in_flight: bool = False) -> int:
    """Intents left `running` by a runner that died are failed with `reason` (runner start).

    With `keep_in_flight` (a runner with a supervisor), a launch / relaunch whose spawned launch
    has not ended stays `running`: the supervisor adopts that server and records what really
    happened (ready, or not) instead of a failure nobody saw (runner/supervisor.py).

    `scope` is the lease just taken: `host:<h>` fails only host h's intents (another host's
    running intents belong to its runner), `db` only the host-less ones (the `db` runner claims
    those); None fails every running intent (a single runner).

    Resumable kinds (storage/kinds.py RESUMABLE_INTENT_KINDS: a tune keeps its progress in
    Intent.result) go back to `pending` instead, with `created_at` set to now so the expiry does
    not drop them at once; the handler carries on from what the result records. Returns how
    many were failed.
    """
    now = time.time()
    running = INTENT.c.state == "running"
    if scope == DB_SCOPE:
        running = and_(running, INTENT.c.host.is_(None))
    elif scope is not None:
        running = and_(running, INTENT.c.host == scope.removeprefix(HOST_SCOPE_PREFIX))
    with engine.begin() as conn:
        conn.execute(
            update(INTENT)
            .where(and_(running, INTENT.c.kind.in_(list(RESUMABLE_INTENT_KINDS))))
            .values(state="pending", created_at=now,
                    message="Resumed: the runner that was carrying this out stopped; it carries on where it was.")
        )
        if keep_in_flight:
            keep = []
            for row in conn.execute(select(INTENT).where(and_(running, INTENT.c.kind.in_(["launch", "relaunch"]))
                                                         )).mappings():
                lid = in_flight_launch(Intent.model_validate(dict(row)))
                if lid is not None and conn.execute(
                        select(_LAUNCH.c.id).where(and_(_LAUNCH.c.id == lid, _LAUNCH.c.ended_at.is_(None)))).first():
                    keep.append(row["id"])
            if keep:
                running = and_(running, INTENT.c.id.not_in(keep))
        res = conn.execute(
            update(INTENT)
            .where(running)
            .values(state="failed", message=reason, finished_at=now)
        )
    return res.rowcount




def expire_pending_intents(engine: Engine, *, older_than: float, now: float | None = None) -> list[Intent]:
    """Pending intents created before `older_than` become `expired`; returns them.

    A request nobody started in time (no runner was alive, or its lane was busy that long) is
    dropped rather than carried out long after the operator stopped waiting for it.
    """
    now = time.time() if now is None else now
    stale = [i for i in list_intents(engine, states=("pending",), limit=500) if i.created_at < older_than]
    out = []
    for intent in stale:
        waited = now - intent.created_at
        msg = (f"Expired: not started within {waited / 60:.0f} min of the request (no runner was "
               "carrying out requests, or its lane was busy); request it again if still wanted.")
        with engine.begin() as conn:
            res = conn.execute(
                update(INTENT).where(and_(INTENT.c.id == intent.id, INTENT.c.state == "pending"))
                .values(state="expired", message=msg, finished_at=now,
                        progress={"stage": "expired", "fraction": 1.0, "detail": msg})
            )
        if res.rowcount == 1:
            intent.state, intent.message = "expired", msg
            out.append(intent)
    return out
