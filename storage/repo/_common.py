"""Tables and helpers every part of the SQL layer shares (storage/repo/*)."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from storage.models import (
    CollectorState,
    Event,
    Intent,
    Lease,
    ProbeRequest,
    Rollup,
    RollupQuarter,
    Sample,
)

# Callers outside storage/repo may use QUARTER_S; the table handles are the families' own.
__all__ = ["QUARTER_S"]

SAMPLE = Sample.__table__  # type: ignore[attr-defined]
EVENT = Event.__table__  # type: ignore[attr-defined]
ROLLUP = Rollup.__table__  # type: ignore[attr-defined]
QUARTER = RollupQuarter.__table__  # type: ignore[attr-defined]
QUARTER_S = 900  # seconds a RollupQuarter row covers
PROBE_REQUEST = ProbeRequest.__table__  # type: ignore[attr-defined]
COLLECTOR_STATE = CollectorState.__table__  # type: ignore[attr-defined]
INTENT = Intent.__table__  # type: ignore[attr-defined]
LEASE = Lease.__table__  # type: ignore[attr-defined]


def _placeholders(conn: Connection, n: int) -> str:
    style = conn.dialect.paramstyle
    if style == "qmark":
        return ", ".join("?" * n)
    if style == "numeric":
        return ", ".join(f":{i + 1}" for i in range(n))
    return ", ".join(["%s"] * n)  # format / pyformat (psycopg)
