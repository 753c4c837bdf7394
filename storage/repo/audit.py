"""Audit trail and housekeeping counts. An audit row's `detail` (a profile diff, say) passes
through storage/redact.py: the trail says that an API key changed, never what it is."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from storage.models import (
    Audit,
)
from storage.redact import redact_obj

__all__ = ["add_audit", "list_audit", "table_counts"]

# ---------------------------------------------------------------------------------------------
# audit and housekeeping


def add_audit(
    engine: Engine, *, actor: str, action: str, target: str = "", detail: dict[str, Any] | None = None
) -> None:
    with Session(engine) as s:
        s.add(Audit(ts=time.time(), actor=actor, action=action, target=target,
                    detail=redact_obj(detail) if detail is not None else None))
        s.commit()


def list_audit(engine: Engine, *, limit: int = 200) -> list[Audit]:
    with Session(engine, expire_on_commit=False) as s:
        q = select(Audit).order_by(col(Audit.id).desc()).limit(limit)
        return list(s.execute(q).scalars())


def table_counts(engine: Engine) -> dict[str, int]:
    """Row count of every Pitwall table (About / health page)."""
    from sqlmodel import SQLModel

    out: dict[str, int] = {}
    with engine.connect() as conn:
        for name, table in sorted(SQLModel.metadata.tables.items()):
            out[name] = int(conn.execute(select(func.count()).select_from(table)).scalar() or 0)
    return out


