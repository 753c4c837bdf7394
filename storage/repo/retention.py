"""Retention: how old rows leave the database (settings `retention.*_days`, days; 0 = forever).

Tables and their clocks: `sample`, `rollup`, `rollup_quarter` and `event` by `ts`; `proberun` by
`created_at`, with its `proberequest` rows going first. Tiers are never left with a hole:

- a raw sample is deleted only when its minute is rolled up: per series, samples older than
  min(now - samples_days, newest Rollup minute of that series + 60 s);
- a minute rollup is deleted only when its quarter is written: per series, rollups older than
  min(now - rollups_days, newest RollupQuarter of that series + 900 s);
- both cutoffs are rounded down to the tier above's grain (a whole minute of samples, a whole
  quarter of minutes leaves at once), so what is left of a series starts on a grain and a reader
  of an old window (storage/repo/windows.py) switches tiers there without a partial bucket.

Deletes run in batches of at most `batch_rows` rows, each its own short transaction
(`DELETE ... WHERE id IN (SELECT id ... LIMIT n)`, portable SQLite / PostgreSQL), so the runner's
writer waits at most one batch. Series tables are walked per (server_id, metric) along their
(server_id, metric, ts) index, never by a scan of `ts` (there is no index on it). Cross-check a
plan by hand: `SELECT count(*) FROM sample WHERE ts < <cutoff>` (slow: a full scan).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from storage.repo._common import QUARTER_S

__all__ = ["RETENTION_TABLES", "apply_retention", "retention_plan", "table_sizes"]

DAY_S = 86_400.0
#: (table, policy key, time column, index-walked series?) in the order a pass deletes them
RETENTION_TABLES: tuple[tuple[str, str, str, bool], ...] = (
    ("sample", "samples_days", "ts", True),
    ("rollup", "rollups_days", "ts", True),
    ("rollup_quarter", "quarters_days", "ts", True),
    ("event", "events_days", "ts", False),
    ("proberequest", "probes_days", "created_at", False),
    ("proberun", "probes_days", "created_at", False),
)
#: the tier whose newest row bounds a series table's deletes, and the seconds that row covers
_GUARD = {"sample": ("rollup", 60.0), "rollup": ("rollup_quarter", float(QUARTER_S))}


def _age_cutoff(policy: dict[str, Any], key: str, now: float) -> float | None:
    days = float(policy.get(key) or 0.0)
    return None if days <= 0 else now - days * DAY_S


def _series(conn: Connection, table: str) -> Iterator[tuple[int, str]]:
    """Every (server_id, metric) of a series table by index seeks (a loose index scan): one
    `min()` per server and per metric, instead of a DISTINCT over millions of rows."""
    sid = conn.execute(text(f"SELECT min(server_id) FROM {table}")).scalar()
    while sid is not None:
        metric = conn.execute(text(f"SELECT min(metric) FROM {table} WHERE server_id = :s"), {"s": sid}).scalar()
        while metric is not None:
            yield int(sid), str(metric)
            metric = conn.execute(
                text(f"SELECT min(metric) FROM {table} WHERE server_id = :s AND metric > :m"), {"s": sid, "m": metric}
            ).scalar()
        sid = conn.execute(text(f"SELECT min(server_id) FROM {table} WHERE server_id > :s"), {"s": sid}).scalar()


def _series_cutoffs(conn: Connection, table: str, cutoff: float) -> list[tuple[int, str, float]]:
    """(server_id, metric, cutoff) per series, the age cutoff lowered to what the next tier holds."""
    out = []
    guard = _GUARD.get(table)
    for sid, metric in list(_series(conn, table)):
        c = cutoff
        if guard is not None:
            newest = conn.execute(
                text(f"SELECT max(ts) FROM {guard[0]} WHERE server_id = :s AND metric = :m"), {"s": sid, "m": metric}
            ).scalar()
            c = min(c, float(newest) + guard[1]) if newest is not None else float("-inf")
            # whole grains only (a minute of samples, a quarter of minutes): readers of an old
            # window (storage/repo/windows.py) take the tier below from where this one begins
            if c != float("-inf"):
                c = c // guard[1] * guard[1]
        if c != float("-inf"):
            out.append((sid, metric, c))
    return out


def _old_runs(conn: Connection, cutoff: float) -> list[int]:
    return [int(r[0]) for r in conn.execute(
        text("SELECT id FROM proberun WHERE created_at < :c ORDER BY id"), {"c": cutoff})]


def _targets(conn: Connection, table: str, cutoff: float) -> list[tuple[str, dict[str, Any]]]:
    """(WHERE clause, params) pieces whose rows the policy removes, each served by an index."""
    if table in _GUARD or table == "rollup_quarter":
        return [("server_id = :s AND metric = :m AND ts < :c", {"s": s, "m": m, "c": c})
                for s, m, c in _series_cutoffs(conn, table, cutoff)]
    if table == "event":
        return [("ts < :c", {"c": cutoff})]
    if table == "proberequest":
        return [("run_id = :r", {"r": r}) for r in _old_runs(conn, cutoff)]
    return [("created_at < :c", {"c": cutoff})]  # proberun, after its requests


def retention_plan(engine: Engine, *, policy: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """Per table: rows, oldest (epoch s, by its clock column), cutoff (epoch s; None = kept
    forever) and to_remove (rows the policy removes on its next passes, tiers' guards included)."""
    out = []
    with engine.connect() as conn:
        for table, key, col, _ in RETENTION_TABLES:
            rows = int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)
            if table == "proberequest":
                oldest = conn.execute(text(
                    "SELECT min(r.created_at) FROM proberun r WHERE EXISTS "
                    "(SELECT 1 FROM proberequest q WHERE q.run_id = r.id)")).scalar()
            else:
                oldest = conn.execute(text(f"SELECT min({col}) FROM {table}")).scalar()
            cutoff = _age_cutoff(policy, key, now)
            remove = 0
            if cutoff is not None and rows:
                for where, params in _targets(conn, table, cutoff):
                    remove += int(conn.execute(text(f"SELECT count(*) FROM {table} WHERE {where}"), params).scalar() or 0)
            out.append({"table": table, "rows": rows, "oldest": None if oldest is None else float(oldest),
                        "cutoff": cutoff, "to_remove": remove})
    return out


def apply_retention(
    engine: Engine, *, policy: dict[str, Any], now: float, batch_rows: int = 5000, max_batches: int = 200
) -> dict[str, int]:
    """Delete what `policy` says, in at most `max_batches` transactions of at most `batch_rows`
    rows each. Returns {table: rows deleted}; a pass that ran out of batches leaves the rest for
    the next pass (the plan still counts it)."""
    deleted = {table: 0 for table, *_ in RETENTION_TABLES}
    batches = 0
    for table, key, _col, _ in RETENTION_TABLES:
        cutoff = _age_cutoff(policy, key, now)
        if cutoff is None:
            continue
        with engine.connect() as conn:
            targets = _targets(conn, table, cutoff)
        for where, params in targets:
            while batches < max_batches:
                with engine.begin() as conn:
                    n = conn.execute(text(
                        f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {where} LIMIT :n)"),
                        {**params, "n": batch_rows}).rowcount
                batches += 1
                deleted[table] += max(int(n or 0), 0)
                if (n or 0) < batch_rows:
                    break
            if batches >= max_batches:
                return deleted
    return deleted


def table_sizes(engine: Engine, tables: list[str]) -> dict[str, int | None]:
    """Bytes on disk per table, indexes included: PostgreSQL `pg_total_relation_size`, SQLite the
    `dbstat` virtual table where the build has it; None where neither can say."""
    out: dict[str, int | None] = {t: None for t in tables}
    with engine.connect() as conn:
        dialect = conn.dialect.name
        for t in tables:
            try:
                if dialect == "postgresql":
                    out[t] = int(conn.execute(text("SELECT pg_total_relation_size(:t)"), {"t": t}).scalar() or 0)
                elif dialect == "sqlite":
                    out[t] = int(conn.execute(text(
                        "SELECT sum(pgsize) FROM dbstat WHERE name = :t OR name IN "
                        "(SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t)"),
                        {"t": t}).scalar() or 0)
            except Exception:  # noqa: BLE001 - dbstat is a compile-time option of SQLite
                conn.rollback()
                return {t: None for t in tables}
    return out
