"""Engine factory, SQLite pragmas and schema creation / versioning.

`make_engine(url)` is the one way to open the database, and the one place that decides whether
opening may create anything. A writer (`pitwall up`, `collect`, the dashboard) opens with
`create=True`: a SQLite file is private, made 0600 before SQLite opens it (so its -wal and -shm
files are 0600 too) in a folder created 0700 (storage/files.py), whatever the URL's query string
(`sqlite:///path/pitwall.db?timeout=30` is the file `path/pitwall.db`). A read-only command
(`pitwall status`, `export`, `gpu-wall`) opens with `create=False`: no folder, file or table is
made, and a database that is not there (a mistyped path or URL) is a SchemaError that says so.
For SQLite it also turns on WAL,
`synchronous=NORMAL` and a `busy_timeout`, so the runner (one writer) and the dashboard (readers)
never block each other for long, and a runner killed mid-write leaves a database that opens with
every committed batch intact. PostgreSQL URLs work too (the SQL in storage/repo/ is portable).

Schema versioning: the `meta` table holds `schema_version`. A new database is stamped with
`SCHEMA_VERSION`; an older one is upgraded by the steps in `_UPGRADES`; a newer one (made by a
later Pitwall) is refused with a `SchemaError` that says what to do.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError
from sqlmodel import SQLModel, create_engine

from storage import models
from storage.errors import SchemaError as SchemaError  # its home; importable from here too
from storage.files import private_sqlite

BUSY_TIMEOUT_MS = 10_000


def sqlite_path(url: str) -> Path | None:
    """The file behind a `sqlite:///...` URL (its query string, `?timeout=30`, is not part of
    the name; a `file:` URI with `uri=true` is read as one), or None for other databases and
    in-memory ones."""
    if not url.startswith("sqlite:"):
        return None
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    path = parsed.database or ""
    if path.startswith("file:"):  # sqlite:///file:path?mode=ro&uri=true
        uri = urlsplit(path)
        if parse_qs(uri.query).get("mode") == ["memory"]:
            return None
        path = unquote(uri.path)
    if not path or path == ":memory:" or parsed.query.get("mode") == "memory":
        return None
    return Path(path)


def _set_sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # Before anything writes the file header: a NEW file gives pages freed by retention back in
    # small steps (`incremental_vacuum`); on an existing file without it this is a no-op (it
    # switches only through a one-off `VACUUM`, see README "Retention").
    cur.execute("PRAGMA auto_vacuum=INCREMENTAL")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys=OFF")
    cur.close()


def make_engine(url: str, *, create: bool = True) -> Engine:
    """Open the database at `url`: with `create` make it (folder, 0600 file, tables) when
    missing and upgrade an older schema; without, open only a Pitwall database that exists
    (an older schema is still upgraded in place) and raise SchemaError, creating nothing, when
    there is none."""
    kwargs: dict = {}
    path = sqlite_path(url)
    if url.startswith("sqlite:"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000}
        if path is not None and not create and not path.is_file():
            raise SchemaError(
                f"There is no Pitwall database at {path}; check PITWALL_DATABASE_URL (or data_dir "
                "in pitwall.toml). `pitwall up` or `pitwall collect` creates it."
            )
        if path is not None and create:
            try:
                private_sqlite(path)
            except OSError:
                pass  # an unwritable folder: SQLite's own error below says it better
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite:"):
        event.listen(engine, "connect", _set_sqlite_pragmas)
    ensure_schema(engine, create=create)
    return engine


def _v1_to_v2(conn: Connection) -> None:
    """v2: Server.retired_at (servers that left the configuration keep their history)."""
    conn.execute(text("ALTER TABLE server ADD COLUMN retired_at FLOAT"))


def _v2_to_v3(conn: Connection) -> None:
    """v3: RollupQuarter (15-minute tier for long chart windows), filled from the Rollup history."""
    from storage import repo  # not at the top: repo is the SQL layer above this module

    models.RollupQuarter.__table__.create(conn, checkfirst=True)  # type: ignore[attr-defined]
    repo.backfill_quarters(conn)


def _v3_to_v4(conn: Connection) -> None:
    """v4: RunnerLease.generation (fencing), Server.stopped_by / stopped_at (an operator's Stop)."""
    if inspect(conn).has_table("runnerlease"):  # gone since v7 (Lease); a v3 file still has it
        _add_column(conn, "runnerlease", "generation", "INTEGER NOT NULL DEFAULT 0")
    _add_column(conn, "server", "stopped_by", "VARCHAR")
    _add_column(conn, "server", "stopped_at", "FLOAT")


def _v4_to_v5(conn: Connection) -> None:
    """v5: ProbeRequest.detail (per-request figures the server reports, and the probe's checks)."""
    _add_column(conn, "proberequest", "detail", "JSON")


def _v5_to_v6(conn: Connection) -> None:
    """v6: AlertState, AlertSilence, AlertOutbox (alerts)."""
    for model in (models.AlertState, models.AlertSilence, models.AlertOutbox):
        model.__table__.create(conn, checkfirst=True)  # type: ignore[union-attr]


def _v6_to_v7(conn: Connection) -> None:
    """v7: a fleet: Server.host / prometheus_url / prometheus_selector, Intent.host;
    Lease (one row per scope) replaces RunnerLease."""
    _add_column(conn, "server", "host", "VARCHAR")
    _add_column(conn, "server", "prometheus_url", "VARCHAR")
    _add_column(conn, "server", "prometheus_selector", "VARCHAR")
    _add_column(conn, "intent", "host", "VARCHAR")
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_server_host ON server (host)"))
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_intent_host ON intent (host)"))
    # fleet runners: the single-row runnerlease becomes Lease (one row per scope, created by
    # create_all after the steps); lease rows are ephemeral, so the old one is dropped
    conn.execute(text("DROP TABLE IF EXISTS runnerlease"))


def _v7_to_v8(conn: Connection) -> None:
    """v8: Launch.engine_version replaces the engine-named version column, copied over."""
    old = "sglang_version"  # the column's name before v8
    _add_column(conn, "launch", "engine_version", "VARCHAR")
    if old in {c["name"] for c in inspect(conn).get_columns("launch")}:
        conn.execute(text(f"UPDATE launch SET engine_version = {old} WHERE engine_version IS NULL"))
        conn.execute(text(f"ALTER TABLE launch DROP COLUMN {old}"))


def _v8_to_v9(conn: Connection) -> None:
    """v9: the trace and tracerequest tables (created by create_all after the steps)."""


def _v9_to_v10(conn: Connection) -> None:
    """v10: Profile.record_requests (a profile's request capture switch)."""
    _add_column(conn, "profile", "record_requests", "BOOLEAN NOT NULL DEFAULT FALSE")


def _v10_to_v11(conn: Connection) -> None:
    """v11: Server.service / role / metrics_url (a disaggregated service's members)."""
    _add_column(conn, "server", "service", "VARCHAR")
    _add_column(conn, "server", "role", "VARCHAR")
    _add_column(conn, "server", "metrics_url", "VARCHAR")
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_server_service ON server (service)"))


def _add_column(conn: Connection, table: str, column: str, ddl: str) -> None:
    """ALTER TABLE ... ADD COLUMN unless it is there (a file whose version was lowered by hand,
    or an upgrade step that another process already ran)."""
    if column not in {c["name"] for c in inspect(conn).get_columns(table)}:
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}"))


# Each step upgrades the schema from version N to N+1 (key N).
_UPGRADES: dict[int, Callable[[Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4,
                                                    4: _v4_to_v5, 5: _v5_to_v6, 6: _v6_to_v7,
                                                    7: _v7_to_v8, 8: _v8_to_v9, 9: _v9_to_v10,
                                                    10: _v10_to_v11}


def ensure_schema(engine: Engine, *, create: bool = True) -> None:
    """Create missing tables, then check / upgrade the schema version; without `create`, only
    check (and upgrade an older Pitwall database): an empty database is refused, untouched."""
    try:
        existing = set(inspect(engine).get_table_names())
    except OperationalError as exc:
        raise SchemaError(f"Cannot open the database ({exc.orig}); check the path and permissions.") from exc
    if not existing and not create:
        raise SchemaError(
            "The database is empty: no Pitwall database is there yet; check PITWALL_DATABASE_URL. "
            "`pitwall up` or `pitwall collect` creates it."
        )
    version = _read_version(engine) if "meta" in existing else None
    if existing and version is None:
        raise SchemaError(
            "This database was not made by Pitwall (no schema_version in table meta); "
            "point PITWALL_DATABASE_URL at a new file."
        )
    if version is not None and version > models.SCHEMA_VERSION:
        raise SchemaError(
            f"The database has schema version {version}, newer than this Pitwall "
            f"({models.SCHEMA_VERSION}); upgrade Pitwall or use another database file."
        )
    if not create and version == models.SCHEMA_VERSION:
        return  # current: a read-only open writes nothing
    attempts = 10  # each waits up to BUSY_TIMEOUT_MS for the lock: a long backfill elsewhere is outwaited
    for attempt in range(attempts):
        try:
            _upgrade(engine, version)
            return
        except (OperationalError, IntegrityError):
            # Two processes opened an old file at once (`pitwall up` starts the runner and the
            # dashboard together): the one that lost the race (locked out, or its rows already
            # written by the other) rolls back, re-reads the version the winner has upgraded by
            # now, and skips the steps it no longer sees.
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)
            version = _read_version(engine)


def _upgrade(engine: Engine, version: int | None) -> None:
    with engine.begin() as conn:
        if version is not None:
            while version < models.SCHEMA_VERSION:
                step = _UPGRADES.get(version)
                if step is None:
                    raise SchemaError(
                        f"No upgrade path from schema version {version}; export what you need "
                        "and start a new database file."
                    )
                step(conn)
                version += 1
        SQLModel.metadata.create_all(conn)
        _write_version(conn, models.SCHEMA_VERSION)


def incremental_vacuum(engine: Engine, *, pages_per_step: int = 1000, max_steps: int = 100) -> int | None:
    """Give free pages of a SQLite file back to the file system, `pages_per_step` pages (4 KiB
    each by default) per short write, at most `max_steps` writes; returns the free pages left,
    or None when the database is not SQLite or not in incremental auto-vacuum mode (PostgreSQL's
    autovacuum reuses the space of deleted rows itself). The file shrinks at the next WAL
    checkpoint; cross-check with `sqlite3 pitwall.db 'PRAGMA freelist_count'`."""
    if engine.dialect.name != "sqlite":
        return None
    with engine.connect() as conn:
        if conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() != 2:
            return None
        free = int(conn.exec_driver_sql("PRAGMA freelist_count").scalar() or 0)
        for _ in range(max_steps):
            if free <= 0:
                break
            # the pragma frees one page per step and sqlite3's execute() steps once: executescript
            # steps it to the end
            conn.connection.driver_connection.executescript(  # type: ignore[union-attr]
                f"PRAGMA incremental_vacuum({int(pages_per_step)});")
            conn.commit()
            free = int(conn.exec_driver_sql("PRAGMA freelist_count").scalar() or 0)
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return free


def _read_version(engine: Engine) -> int | None:
    with engine.connect() as conn:
        row = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).first()
    return int(row[0]) if row else None


def _write_version(conn: Connection, version: int) -> None:
    conn.execute(text("DELETE FROM meta WHERE key = 'schema_version'"))
    conn.execute(
        text("INSERT INTO meta (key, value) VALUES ('schema_version', :v)"), {"v": str(version)}
    )
    if not conn.execute(text("SELECT 1 FROM meta WHERE key = 'created_at'")).first():
        conn.execute(
            text("INSERT INTO meta (key, value) VALUES ('created_at', :v)"), {"v": str(time.time())}
        )


def database_size_bytes(url: str) -> int | None:
    """Size of the SQLite file plus its WAL, or None when not a file database."""
    path = sqlite_path(url)
    if path is None or not path.exists():
        return None
    total = path.stat().st_size
    wal = Path(str(path) + "-wal")
    if wal.exists():
        total += wal.stat().st_size
    return total


def integrity_ok(url: str) -> bool:
    """`PRAGMA integrity_check` on a SQLite file (True for other databases)."""
    path = sqlite_path(url)
    if path is None:
        return True
    import sqlite3

    con = sqlite3.connect(os.fspath(path))
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()
