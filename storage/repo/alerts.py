"""Alerts: episodes (AlertState), silences, the notification outbox, and the few reads rule
evaluation needs beyond samples and events (probe requests per server, a server's newest sample).

The outbox is bounded: `enqueue_notifications` drops the OLDEST queued rows of a receiver past
`max_rows` and returns how many it dropped, so a long receiver outage keeps the newest alerts
and the caller can say what was lost. Payloads pass through storage/redact.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from storage.kinds import OPEN_ALERT_STATES
from storage.models import AlertOutbox, AlertSilence, AlertState, ProbeRequest, ProbeRun, Sample
from storage.redact import redact_obj

__all__ = ["open_alerts", "save_alert", "delete_alert", "list_alerts", "add_silence",
           "expire_silence", "list_silences", "enqueue_notifications", "due_notifications",
           "delete_notifications", "defer_notifications", "outbox_summary", "probe_outcomes",
           "newest_sample_ts"]

OUTBOX = AlertOutbox.__table__  # type: ignore[attr-defined]
ALERT = AlertState.__table__  # type: ignore[attr-defined]
SILENCE = AlertSilence.__table__  # type: ignore[attr-defined]
_PR = ProbeRequest.__table__  # type: ignore[attr-defined]
_RUN = ProbeRun.__table__  # type: ignore[attr-defined]
_SAMPLE = Sample.__table__  # type: ignore[attr-defined]


# -- episodes ---------------------------------------------------------------------------------
def open_alerts(engine: Engine) -> dict[str, AlertState]:
    """{fingerprint: the open (pending or firing) episode}."""
    with Session(engine, expire_on_commit=False) as s:
        rows = s.execute(select(AlertState).where(col(AlertState.state).in_(OPEN_ALERT_STATES))).scalars()
        return {r.fingerprint: r for r in rows}


def save_alert(engine: Engine, *, alert: AlertState) -> AlertState:
    """Insert or update one episode; returns it with its id."""
    with Session(engine, expire_on_commit=False) as s:
        merged = s.merge(alert)
        s.commit()
        s.refresh(merged)
        return merged


def delete_alert(engine: Engine, *, alert_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(delete(ALERT).where(ALERT.c.id == alert_id))


def list_alerts(
    engine: Engine, *, states: Iterable[str] | None = None, since: float | None = None, limit: int = 200
) -> list[AlertState]:
    """Episodes, newest first; `since` keeps those still open or resolved after it."""
    q = select(AlertState).order_by(col(AlertState.active_since).desc()).limit(limit)
    if states is not None:
        q = q.where(col(AlertState.state).in_(list(states)))
    if since is not None:
        q = q.where(or_(col(AlertState.resolved_at).is_(None), col(AlertState.resolved_at) >= since))
    with Session(engine, expire_on_commit=False) as s:
        return list(s.execute(q).scalars())


# -- silences ---------------------------------------------------------------------------------
def add_silence(
    engine: Engine, *, rule: str | None, server: str | None, ends_at: float, reason: str, created_by: str,
    starts_at: float | None = None,
) -> AlertSilence:
    row = AlertSilence(rule=rule or None, server=server or None, starts_at=starts_at or time.time(),
                       ends_at=ends_at, reason=reason, created_by=created_by)
    with Session(engine, expire_on_commit=False) as s:
        s.add(row)
        s.commit()
        s.refresh(row)
        return row


def expire_silence(engine: Engine, *, silence_id: int, actor: str, now: float | None = None) -> bool:
    """End a silence now; False when it does not exist or already ended."""
    now = now or time.time()
    with engine.begin() as conn:
        res = conn.execute(
            update(SILENCE)
            .where(and_(SILENCE.c.id == silence_id, SILENCE.c.expired_at.is_(None), SILENCE.c.ends_at > now))
            .values(expired_at=now, expired_by=actor)
        )
    return bool(res.rowcount)


def list_silences(engine: Engine, *, active_at: float | None = None, limit: int = 200) -> list[AlertSilence]:
    """Silences newest first; with `active_at`, only those in force then."""
    q = select(AlertSilence).order_by(col(AlertSilence.id).desc()).limit(limit)
    if active_at is not None:
        q = q.where(and_(col(AlertSilence.starts_at) <= active_at, col(AlertSilence.ends_at) > active_at,
                         col(AlertSilence.expired_at).is_(None)))
    with Session(engine, expire_on_commit=False) as s:
        return list(s.execute(q).scalars())


# -- outbox -----------------------------------------------------------------------------------
def enqueue_notifications(engine: Engine, *, rows: Sequence[dict[str, Any]], max_rows: int,
                          now: float | None = None) -> dict[str, int]:
    """Queue notifications ({receiver, fingerprint, status, payload}), due at `now`; returns
    {receiver: rows dropped} where the receiver's queue passed `max_rows` (oldest dropped first)."""
    now = time.time() if now is None else now
    dropped: dict[str, int] = {}
    with engine.begin() as conn:
        if rows:
            conn.execute(insert(OUTBOX), [
                {"created_at": now, "next_at": now, "attempts": 0, **r, "payload": redact_obj(r["payload"])}
                for r in rows
            ])
        for receiver in {r["receiver"] for r in rows}:
            n = conn.execute(select(func.count()).where(OUTBOX.c.receiver == receiver)).scalar_one()
            if n > max_rows:
                old = conn.execute(select(OUTBOX.c.id).where(OUTBOX.c.receiver == receiver)
                                   .order_by(OUTBOX.c.id).limit(n - max_rows)).scalars().all()
                conn.execute(delete(OUTBOX).where(OUTBOX.c.id.in_(old)))
                dropped[receiver] = len(old)
    return dropped


def due_notifications(engine: Engine, *, receiver: str, now: float, limit: int = 100) -> list[AlertOutbox]:
    """The oldest queued rows of a receiver, in order, if its head is due (a receiver's queue is
    sent in order: when the head waits for its back-off, so does the rest)."""
    with Session(engine, expire_on_commit=False) as s:
        rows = list(s.execute(select(AlertOutbox).where(col(AlertOutbox.receiver) == receiver)
                              .order_by(col(AlertOutbox.id)).limit(limit)).scalars())
    if not rows or rows[0].next_at > now:
        return []
    return rows


def delete_notifications(engine: Engine, *, ids: Sequence[int]) -> None:
    with engine.begin() as conn:
        conn.execute(delete(OUTBOX).where(OUTBOX.c.id.in_(list(ids))))


def defer_notifications(engine: Engine, *, ids: Sequence[int], next_at: float, error: str) -> None:
    """A failed send: attempts + 1, retried at `next_at`, the error kept for the page."""
    with engine.begin() as conn:
        conn.execute(update(OUTBOX).where(OUTBOX.c.id.in_(list(ids)))
                     .values(attempts=OUTBOX.c.attempts + 1, next_at=next_at, last_error=error[:500]))


def outbox_summary(engine: Engine) -> dict[str, dict[str, Any]]:
    """{receiver: {"queued", "oldest_at", "max_attempts", "last_error"}}."""
    q = select(OUTBOX.c.receiver, func.count(), func.min(OUTBOX.c.created_at), func.max(OUTBOX.c.attempts)) \
        .group_by(OUTBOX.c.receiver)
    out: dict[str, dict[str, Any]] = {}
    with engine.connect() as conn:
        for receiver, n, oldest, attempts in conn.execute(q):
            err = conn.execute(select(OUTBOX.c.last_error).where(and_(OUTBOX.c.receiver == receiver,
                                                                       OUTBOX.c.last_error.is_not(None)))
                               .order_by(OUTBOX.c.id).limit(1)).scalar()
            out[receiver] = {"queued": int(n), "oldest_at": oldest, "max_attempts": attempts, "last_error": err}
    return out


# -- reads for rule evaluation ------------------------------------------------------------------
def probe_outcomes(engine: Engine, *, server_id: int, since: float) -> list[tuple[float, bool, float | None, float | None]]:
    """(start_ts, ok, ttft_s, e2e_s) of every measured (not warm-up) probe request of a server
    since `since`, oldest first."""
    q = (select(_PR.c.start_ts, _PR.c.ok, _PR.c.ttft_s, _PR.c.e2e_s)
         .select_from(_PR.join(_RUN, _RUN.c.id == _PR.c.run_id))
         .where(and_(_RUN.c.server_id == server_id, _PR.c.start_ts >= since, _PR.c.warmup.is_(False)))
         .order_by(_PR.c.start_ts))
    with engine.connect() as conn:
        return [(float(t), bool(ok), ttft, e2e) for t, ok, ttft, e2e in conn.execute(q)]


def newest_sample_ts(engine: Engine, *, server_id: int, since: float) -> float | None:
    """Time of the newest sample of a server since `since` (None: none in the window)."""
    q = select(func.max(_SAMPLE.c.ts)).where(and_(_SAMPLE.c.server_id == server_id, _SAMPLE.c.ts >= since))
    with engine.connect() as conn:
        value = conn.execute(q).scalar()
    return float(value) if value is not None else None
