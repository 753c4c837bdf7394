"""Servers, profiles and launches: what Pitwall watches, what it can start, and every start.

A Launch's `server_args` (what /server_info said) and `end_reason` pass through
storage/redact.py on every write; its `argv` and `env` are stored exactly (a rollback starts
them again) and are redacted where they are shown or exported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from storage.models import (
    Intent,
    Launch,
    Profile,
    Server,
)
from storage.redact import redact_fields
from storage.repo.intents import IN_FLIGHT_LAUNCH

__all__ = ["upsert_server", "list_servers", "retire_servers_except", "set_server_stopped",
           "get_server", "upsert_profile", "list_profiles", "get_profile", "delete_profile",
           "create_launch", "relocate_launch_log", "live_log_paths", "update_launch", "get_launch",
           "latest_launch", "launch_numbers", "list_launches"]

_LAUNCH_TEXT = ("end_reason",)
_LAUNCH_OBJ = ("server_args",)

# ---------------------------------------------------------------------------------------------
# servers and profiles


def _upsert_by_name(engine: Engine, model: type[Any], name: str, fields: dict[str, Any],
                    check: Callable[[Any], None] | None = None) -> Any:
    """Insert or update the row of `model` named `name`. Two runners of a fleet sync the same
    profiles (and may sync one server) at once: the one whose INSERT loses the race on the unique
    name reads the winner's row and updates it instead. `check(row)` sees every existing row
    before it is updated (that retry included) and raises to refuse the update."""
    for attempt in (1, 2):
        with Session(engine, expire_on_commit=False) as s:
            row = s.execute(select(model).where(col(model.name) == name)).scalars().first()
            if row is None:
                row = model(name=name, **fields)
            else:
                if check is not None:
                    check(row)
                for k, v in fields.items():
                    setattr(row, k, v)
            row.updated_at = time.time()
            s.add(row)
            try:
                s.commit()
            except IntegrityError:
                if attempt == 2:
                    raise
                continue
            s.refresh(row)
            return row
    raise AssertionError("unreachable")


def upsert_server(engine: Engine, /, *, name: str, check: Callable[[Server], None] | None = None,
                  **fields: Any) -> Server:
    """Insert or update a server; `check` may refuse to update an existing row (a fleet runner
    checks it does not take another live host's server, even one inserted a moment ago).
    `engine` is positional only, so `engine=` among the fields is the server's (Server.engine)."""
    # configured again: active (retired_at None unless the caller retires it)
    return _upsert_by_name(engine, Server, name, {**fields, "retired_at": fields.get("retired_at")}, check)


def list_servers(engine: Engine, *, include_retired: bool = False, host: str | None = None) -> list[Server]:
    """Configured servers (and, with include_retired, those that left the configuration).

    With `host`, only the servers that runner host owns: Server.host == host, or no host at all
    (a row written before schema v7 or by hand; `pitwall collect` fills every configured one).
    """
    with Session(engine, expire_on_commit=False) as s:
        q = select(Server).order_by(Server.name)
        if not include_retired:
            q = q.where(col(Server.retired_at).is_(None))
        if host is not None:
            q = q.where(or_(col(Server.host) == host, col(Server.host).is_(None)))
        return list(s.execute(q).scalars())


def retire_servers_except(engine: Engine, *, names: Iterable[str], host: str | None = None) -> list[str]:
    """Mark every active server not in `names` as retired (with `host`: only that host's, see
    list_servers, never another runner's); returns the names retired."""
    keep = set(names)
    retired = [s.name for s in list_servers(engine, host=host) if s.name not in keep]
    if retired:
        with engine.begin() as conn:
            conn.execute(
                update(Server.__table__)  # type: ignore[attr-defined]
                .where(Server.__table__.c.name.in_(retired))  # type: ignore[attr-defined]
                .values(retired_at=time.time())
            )
    return retired


def set_server_stopped(engine: Engine, *, server_id: int, stopped_by: str | None) -> None:
    """Remember an operator's Stop (who, when), or forget it (None: the server may run again)."""
    with engine.begin() as conn:
        conn.execute(
            update(Server.__table__)  # type: ignore[attr-defined]
            .where(Server.__table__.c.id == server_id)  # type: ignore[attr-defined]
            .values(stopped_by=stopped_by, stopped_at=time.time() if stopped_by else None)
        )


def get_server(engine: Engine, *, name: str | None = None, id: int | None = None) -> Server | None:
    with Session(engine, expire_on_commit=False) as s:
        if id is not None:
            return s.get(Server, id)
        return s.execute(select(Server).where(col(Server.name) == name)).scalars().first()


def upsert_profile(engine: Engine, *, name: str, **fields: Any) -> Profile:
    return _upsert_by_name(engine, Profile, name, fields)


def list_profiles(engine: Engine) -> list[Profile]:
    with Session(engine, expire_on_commit=False) as s:
        return list(s.execute(select(Profile).order_by(Profile.name)).scalars())


def get_profile(engine: Engine, *, name: str | None = None, id: int | None = None) -> Profile | None:
    with Session(engine, expire_on_commit=False) as s:
        if id is not None:
            return s.get(Profile, id)
        return s.execute(select(Profile).where(col(Profile.name) == name)).scalars().first()


def delete_profile(engine: Engine, *, name: str) -> None:
    with engine.begin() as conn:
        conn.execute(delete(Profile.__table__).where(Profile.__table__.c.name == name))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# launches


def create_launch(engine: Engine, *, for_intent: int | None = None, note: dict[str, Any] | None = None,
                  **fields: Any) -> Launch:
    """A Launch row. With `for_intent`, the same transaction records it in that intent's result
    (IN_FLIGHT_LAUNCH, plus `note`): a runner killed at any moment leaves either no launch or
    one its intent names, never a starting server the next runner cannot tie to its request."""
    fields.setdefault("started_at", time.time())
    fields = redact_fields(fields, text=_LAUNCH_TEXT, obj=_LAUNCH_OBJ)
    with Session(engine, expire_on_commit=False) as s:
        launch = Launch(**fields)
        s.add(launch)
        if for_intent is not None:
            s.flush()
            intent = s.get(Intent, for_intent)
            if intent is not None:
                result = {**(intent.result or {}), **(note or {}), IN_FLIGHT_LAUNCH: launch.id}
                intent.result = redact_fields({"result": result}, obj=("result",))["result"]
                s.add(intent)
        s.commit()
        s.refresh(launch)
        return launch


def relocate_launch_log(engine: Engine, *, old: str, new: str) -> int:
    """Ended launches whose log was `old` now name `new` (the file was rotated aside before the
    next launch reused the path). Returns the launches updated."""
    t = Launch.__table__  # type: ignore[attr-defined]
    with engine.begin() as conn:
        return int(conn.execute(update(t).where(t.c.log_path == old, t.c.ended_at.is_not(None))
                                .values(log_path=new)).rowcount or 0)


def live_log_paths(engine: Engine) -> set[str]:
    """Log paths a tailer may be reading: every server's, and every unfinished launch's."""
    srv, la = Server.__table__, Launch.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        paths = set(conn.execute(select(srv.c.log_path).where(srv.c.log_path.is_not(None))).scalars())
        paths |= set(conn.execute(select(la.c.log_path).where(la.c.log_path.is_not(None),
                                                               la.c.ended_at.is_(None))).scalars())
    return {str(p) for p in paths}


def update_launch(engine: Engine, *, launch_id: int, **fields: Any) -> None:
    fields = redact_fields(fields, text=_LAUNCH_TEXT, obj=_LAUNCH_OBJ)
    with engine.begin() as conn:
        conn.execute(
            update(Launch.__table__).where(Launch.__table__.c.id == launch_id).values(**fields)  # type: ignore[attr-defined]
        )


def get_launch(engine: Engine, *, launch_id: int) -> Launch | None:
    with Session(engine, expire_on_commit=False) as s:
        return s.get(Launch, launch_id)


def latest_launch(engine: Engine, *, server_id: int) -> Launch | None:
    with Session(engine, expire_on_commit=False) as s:
        q = select(Launch).where(col(Launch.server_id) == server_id).order_by(col(Launch.id).desc())
        return s.execute(q).scalars().first()


def launch_numbers(engine: Engine, launch_ids: Iterable[int]) -> dict[int, int]:
    """{launch id: its number among its server's launches} (1 = the server's first launch):
    derived, not stored, so it needs no schema step and cannot drift. One query."""
    ids = sorted({int(i) for i in launch_ids if i is not None})
    if not ids:
        return {}
    other = Launch.__table__.alias("other")  # type: ignore[attr-defined]
    number = (select(func.count()).select_from(other)
              .where(other.c.server_id == col(Launch.server_id), other.c.id <= col(Launch.id))
              .scalar_subquery())
    with engine.connect() as conn:
        rows = conn.execute(select(col(Launch.id), number).where(col(Launch.id).in_(ids))).all()
    return {int(r[0]): int(r[1]) for r in rows}


def list_launches(engine: Engine, *, server_id: int | None = None, limit: int = 100) -> list[Launch]:
    with Session(engine, expire_on_commit=False) as s:
        q = select(Launch).order_by(col(Launch.id).desc()).limit(limit)
        if server_id is not None:
            q = q.where(col(Launch.server_id) == server_id)
        return list(s.execute(q).scalars())


