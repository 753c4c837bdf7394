"""Events: batched and one-off inserts, window reads and counts by kind.

Every insert passes `message` and `raw` through storage/redact.py: a log excerpt that quotes
a server's startup arguments (its API key) or a command line keeps no secret in the database.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Connection, Engine

from storage.kinds import event_severity
from storage.redact import redact_fields
from storage.repo._common import (
    EVENT,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["insert_events", "add_event", "list_events", "count_events"]


def insert_events(conn: Connection, *, rows: Sequence[dict[str, Any]]) -> int:
    """Insert Event rows (dicts with ts, server_id, launch_id, kind, message, raw); every kind
    must be in storage/kinds.py EVENT_KINDS. A row without a severity (or None) gets the table's;
    a row that overrides it says why in `severity_reason`, which is not stored."""
    out = []
    for row in rows:
        fields = {k: v for k, v in row.items() if k != "severity_reason"}
        fields["severity"] = event_severity(row["kind"], row.get("severity"))
        out.append(redact_fields(fields, text=("message", "raw")))
    if out:
        conn.execute(insert(EVENT), out)
    return len(out)


def add_event(
    engine: Engine,
    *,
    kind: str,
    message: str,
    server_id: int | None = None,
    launch_id: int | None = None,
    severity: str | None = None,
    severity_reason: str | None = None,
    raw: str | None = None,
    ts: float | None = None,
) -> None:
    """Write one Event right away (low-rate paths: supervisor, CLI). The severity is EVENT_KINDS's
    for `kind`; pass `severity` only to override it, with `severity_reason` saying why."""
    with engine.begin() as conn:
        insert_events(
            conn,
            rows=[
                {
                    "ts": ts if ts is not None else time.time(),
                    "server_id": server_id,
                    "launch_id": launch_id,
                    "kind": kind,
                    "severity": severity,
                    "severity_reason": severity_reason,
                    "message": message,
                    "raw": raw,
                }
            ],
        )




# ---------------------------------------------------------------------------------------------
# events


def list_events(
    engine: Engine,
    *,
    server_id: int | None = None,
    kinds: Iterable[str] | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 200,
) -> pd.DataFrame:
    import pandas as pd  # here, not at import: a sweep process never needs it
    q = select(EVENT).order_by(EVENT.c.ts.desc(), EVENT.c.id.desc()).limit(limit)
    if server_id is not None:
        q = q.where(EVENT.c.server_id == server_id)
    if kinds is not None:
        q = q.where(EVENT.c.kind.in_(list(kinds)))
    if since is not None:
        q = q.where(EVENT.c.ts >= since)
    if until is not None:
        q = q.where(EVENT.c.ts < until)
    with engine.connect() as conn:
        rows = conn.execute(q).mappings().all()
    cols = ["id", "ts", "server_id", "launch_id", "kind", "severity", "message", "raw"]
    return pd.DataFrame(rows, columns=cols)


def count_events(
    engine: Engine,
    *,
    server_id: int | None,
    since: float,
    until: float | None = None,
    launch_id: int | None = None,
) -> dict[str, int]:
    """{kind: count} over a window."""
    q = select(EVENT.c.kind, func.count()).where(EVENT.c.ts >= since).group_by(EVENT.c.kind)
    if server_id is not None:
        q = q.where(EVENT.c.server_id == server_id)
    if launch_id is not None:
        q = q.where(EVENT.c.launch_id == launch_id)
    if until is not None:
        q = q.where(EVENT.c.ts < until)
    with engine.connect() as conn:
        return {k: int(n) for k, n in conn.execute(q).all()}


