"""Minute and quarter-hour rollups: built incrementally by the runner, backfilled on upgrade."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, func, insert, select
from sqlalchemy.engine import Connection, Engine

from storage.repo._common import (
    QUARTER,
    QUARTER_S,
    ROLLUP,
    SAMPLE,
)
from storage.repo.samples import _bucket

__all__ = ["compute_rollups", "backfill_quarters", "rollup_watermark", "oldest_sample_ts",
           "rollup_series_since", "insert_rollups"]


def compute_rollups(
    engine: Engine, *, until: float, lookback_s: float = 3600, known_series: set[tuple[int, str]] | None = None
) -> int:
    """Write Rollup rows for complete minutes and RollupQuarter rows for complete quarter hours
    in [until - lookback_s, until).

    Idempotent: minutes and quarters already written are skipped. A minute keeps count, avg,
    min and max (its p50/p95/p99 columns stay NULL: nothing reads them, and they were a fifth of
    a minute row's bytes, bench/soak.py); a quarter aggregates its minutes (count-weighted avg,
    min of min, max of max). Returns the number of rows written (both tiers).

    A caller that rolls up a few minutes at a time (the runner) passes `known_series`, a set it
    keeps: the series seen so far are added to it, and quarters are written for all of them, so
    a series that stopped early in a quarter (a server gone down) still gets that quarter.
    """
    import pandas as pd  # here, not at import: a sweep process never needs it
    end = int(until // 60) * 60
    start = end - int(lookback_s)
    with engine.begin() as conn:
        res = conn.execute(
            select(SAMPLE.c.server_id, SAMPLE.c.metric, SAMPLE.c.ts, SAMPLE.c.value).where(
                and_(SAMPLE.c.ts >= start, SAMPLE.c.ts < end)
            )
        ).all()
        df = pd.DataFrame(res, columns=["server_id", "metric", "ts", "value"])
        series = [(int(sid), str(m)) for sid, m in df[["server_id", "metric"]].drop_duplicates().itertuples(index=False)]
        last = _newest(conn, ROLLUP, series)
        df["minute"] = (df["ts"] // 60).astype("int64") * 60
        rows = []  # (no samples in the lookback: no minutes, but quarters of known series may end now)
        for (sid, metric, minute), g in df.groupby(["server_id", "metric", "minute"]):
            if minute <= last.get((sid, metric), -1):
                continue
            v = g["value"].to_numpy(dtype=float)
            rows.append(
                {
                    "ts": float(minute),
                    "server_id": int(sid),
                    "metric": metric,
                    "count": int(v.size),
                    "avg": float(v.mean()),
                    "min": float(v.min()),
                    "max": float(v.max()),
                }
            )
        if rows:
            conn.execute(insert(ROLLUP), rows)
        q_end = end // QUARTER_S * QUARTER_S  # every minute before it is rolled up by now
        q_start = start // QUARTER_S * QUARTER_S
        if known_series is not None:
            known_series.update(series)
        return len(rows) + _write_quarters(conn, since=q_start, until=q_end,
                                           series=sorted(known_series) if known_series is not None else series)


def _newest(conn: Connection, table: Any, series: Iterable[tuple[Any, Any]]) -> dict[tuple[int, str], float]:
    """{(server_id, metric): newest ts in `table`} by one index seek per series (a GROUP BY over
    the table would scan every row of it, millions after a month)."""
    out = {}
    for sid, metric in series:
        ts = conn.execute(
            select(func.max(table.c.ts)).where(and_(table.c.server_id == int(sid), table.c.metric == metric))
        ).scalar()
        if ts is not None:
            out[(int(sid), str(metric))] = float(ts)
    return out


def _write_quarters(
    conn: Connection, *, since: float, until: float, series: Iterable[tuple[int, str]] | None = None
) -> int:
    """RollupQuarter rows from the Rollup minutes of complete quarters in [since, until) that
    are newer than each series' last quarter. With `series`, one index range per series (the
    runner's path: a ts range over every series would scan the whole table, 4 s at 2.7M rows);
    without, one scan of the range (the v3 backfill)."""
    if until <= since:
        return 0
    b = _bucket(ROLLUP.c.ts, QUARTER_S, conn.dialect.name)
    q = (
        select(
            ROLLUP.c.server_id,
            ROLLUP.c.metric,
            (b * QUARTER_S).label("ts"),
            func.sum(ROLLUP.c.count).label("count"),
            (func.sum(ROLLUP.c.avg * ROLLUP.c.count) / func.sum(ROLLUP.c.count)).label("avg"),
            func.min(ROLLUP.c.min).label("min"),
            func.max(ROLLUP.c.max).label("max"),
        )
        .where(and_(ROLLUP.c.ts >= since, ROLLUP.c.ts < until))
        .group_by(ROLLUP.c.server_id, ROLLUP.c.metric, b)
    )
    if series is None:
        got = list(conn.execute(q).mappings())
    else:
        got = [r for sid, metric in series for r in conn.execute(
            q.where(and_(ROLLUP.c.server_id == int(sid), ROLLUP.c.metric == metric))).mappings()]
    if not got:
        return 0
    last = _newest(conn, QUARTER, {(r["server_id"], r["metric"]) for r in got})
    rows = [
        {"ts": float(r["ts"]), "server_id": int(r["server_id"]), "metric": r["metric"], "count": int(r["count"]),
         "avg": float(r["avg"]), "min": float(r["min"]), "max": float(r["max"])}
        for r in got
        if float(r["ts"]) > last.get((int(r["server_id"]), r["metric"]), -1.0)
    ]
    if rows:
        conn.execute(insert(QUARTER), rows)
    return len(rows)


def backfill_quarters(conn: Connection) -> int:
    """RollupQuarter rows for every complete quarter of the Rollup history (schema v2 -> v3)."""
    newest = conn.execute(select(func.max(ROLLUP.c.ts))).scalar()
    oldest = conn.execute(select(func.min(ROLLUP.c.ts))).scalar()
    if newest is None or oldest is None:
        return 0
    until = (int(newest) + 60) // QUARTER_S * QUARTER_S  # quarters whose minutes are all rolled up
    return _write_quarters(conn, since=int(oldest) // QUARTER_S * QUARTER_S, until=until)


def rollup_watermark(engine: Engine) -> float | None:
    """End of the newest rolled-up minute (max Rollup.ts + 60), or None when nothing is rolled
    up yet. One read at runner start (it scans the table: no index leads with ts)."""
    with engine.connect() as conn:
        ts = conn.execute(select(func.max(ROLLUP.c.ts))).scalar()
    return None if ts is None else float(ts) + 60.0


def oldest_sample_ts(engine: Engine) -> float | None:
    """Timestamp of the oldest raw sample, or None (one read at runner start)."""
    with engine.connect() as conn:
        ts = conn.execute(select(func.min(SAMPLE.c.ts))).scalar()
    return None if ts is None else float(ts)


def rollup_series_since(engine: Engine, *, since: float) -> set[tuple[int, str]]:
    """(server_id, metric) of every series with a minute rollup at or after `since`: the series
    whose current quarter the runner must still close, though they may send nothing more."""
    with engine.connect() as conn:
        rows = conn.execute(select(ROLLUP.c.server_id, ROLLUP.c.metric).where(ROLLUP.c.ts >= since).distinct()).all()
    return {(int(sid), str(m)) for sid, m in rows}


def insert_rollups(conn: Connection, *, rows: Sequence[dict[str, Any]]) -> int:
    if rows:
        conn.execute(insert(ROLLUP), list(rows))
    return len(rows)


