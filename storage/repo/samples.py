"""Samples: the batched hot-path insert and every read of the raw series (windows, latest values, SQL-bucketed chart series, step-function points)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Integer, and_, cast, func, insert, select
from sqlalchemy.engine import Connection, Engine

from storage.repo._common import (
    QUARTER,
    QUARTER_S,
    ROLLUP,
    SAMPLE,
    _placeholders,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SAMPLE_COLUMNS", "insert_samples", "insert_sample_tuples", "sample_values",
           "sample_sum", "latest_samples", "metric_names", "bucketed_series", "sample_points"]

SAMPLE_COLUMNS = ("ts", "server_id", "launch_id", "source", "metric", "value")



def insert_samples(conn: Connection, *, rows: Sequence[dict[str, Any]]) -> int:
    """Insert Sample rows (dicts with ts, server_id, launch_id, source, metric, value)."""
    if rows:
        conn.execute(insert(SAMPLE), list(rows))
    return len(rows)


def insert_sample_tuples(conn: Connection, *, rows: Sequence[tuple[Any, ...]]) -> int:
    """The hot path: Sample rows as tuples in SAMPLE_COLUMNS order, one DBAPI executemany.

    Same statement as insert_samples, without SQLAlchemy's per-row parameter processing
    (bench/storage.py measures the difference); the placeholders follow the driver's paramstyle,
    so it stays portable.
    """
    if rows:
        sql = (
            f"INSERT INTO {SAMPLE.name} ({', '.join(SAMPLE_COLUMNS)}) "
            f"VALUES ({_placeholders(conn, len(SAMPLE_COLUMNS))})"
        )
        conn.exec_driver_sql(sql, list(rows))
    return len(rows)



# ---------------------------------------------------------------------------------------------
# samples: reads


def sample_values(
    engine: Engine, *, server_id: int, metric: str, since: float, until: float | None = None
) -> np.ndarray:
    """The values of one metric in [since, until) as a float array (for exact percentiles)."""
    q = select(SAMPLE.c.value).where(
        and_(SAMPLE.c.server_id == server_id, SAMPLE.c.metric == metric, SAMPLE.c.ts >= since)
    )
    if until is not None:
        q = q.where(SAMPLE.c.ts < until)
    with engine.connect() as conn:
        vals = conn.execute(q).scalars().all()
    return np.asarray(vals, dtype=float)


def sample_sum(
    engine: Engine, *, server_id: int, metric: str, since: float, until: float | None = None
) -> tuple[float, int]:
    """(sum, count) of one metric over a window."""
    q = select(func.coalesce(func.sum(SAMPLE.c.value), 0.0), func.count()).where(
        and_(SAMPLE.c.server_id == server_id, SAMPLE.c.metric == metric, SAMPLE.c.ts >= since)
    )
    if until is not None:
        q = q.where(SAMPLE.c.ts < until)
    with engine.connect() as conn:
        total, count = conn.execute(q).one()
    return float(total), int(count)


def latest_samples(
    engine: Engine, *, server_id: int, metrics: Iterable[str], max_age_s: float | None = None,
    source: str | None = None,
) -> dict[str, tuple[float, float]]:
    """{metric: (ts, value)} of the newest sample of each metric (one indexed lookup each);
    with `source`, only samples of that source (a fleet runner's own: `self:<runner.host>`)."""
    out: dict[str, tuple[float, float]] = {}
    now = time.time()
    with engine.connect() as conn:
        for metric in metrics:
            q = (
                select(SAMPLE.c.ts, SAMPLE.c.value)
                .where(and_(SAMPLE.c.server_id == server_id, SAMPLE.c.metric == metric))
                .order_by(SAMPLE.c.ts.desc())
                .limit(1)
            )
            if max_age_s is not None:
                q = q.where(SAMPLE.c.ts >= now - max_age_s)
            if source is not None:
                q = q.where(SAMPLE.c.source == source)
            row = conn.execute(q).first()
            if row is not None:
                out[metric] = (float(row[0]), float(row[1]))
    return out


def metric_names(engine: Engine, *, server_id: int, prefix: str = "") -> list[str]:
    """Distinct metric keys stored for a server (optionally with a prefix)."""
    q = select(SAMPLE.c.metric).where(SAMPLE.c.server_id == server_id).distinct()
    if prefix:
        q = q.where(SAMPLE.c.metric.like(prefix + "%"))
    with engine.connect() as conn:
        return sorted(conn.execute(q).scalars().all())


def _bucket(col: Any, bucket: int, dialect: str) -> Any:
    """floor(col / bucket) as an integer: SQLite's CAST truncates (epoch seconds are positive),
    PostgreSQL's CAST rounds, so it gets FLOOR."""
    if dialect == "sqlite":
        return cast(col / bucket, Integer)
    return cast(func.floor(col / bucket), Integer)


_BUCKET_COLUMNS = ["metric", "ts", "n", "total", "min", "max"]


def _widen_past_retention(engine: Engine, server_id: int, metrics: list[str], since: float, bucket: int) -> int:
    """`bucket`, or a minute / a quarter hour when the window holds rollups older than where a
    series' raw samples / minute rollups begin (retention removed those; storage/repo/windows.py).
    A series that is merely young has no rollup before its first sample, so it keeps its bucket."""
    from storage.repo.windows import older_rollups

    if bucket >= 600:
        return bucket
    with engine.connect() as conn:
        old = [older_rollups(conn, server_id, m, since) for m in metrics]
    if any(quarters for _, quarters in old):
        return QUARTER_S
    if bucket < 60 and any(minutes for minutes, _ in old):
        return 60
    return bucket


def bucketed_series(
    engine: Engine,
    *,
    server_id: int,
    metrics: Sequence[str],
    since: float,
    until: float,
    max_points: int = 1500,
) -> pd.DataFrame:
    """Time-bucketed avg/min/max per metric over [since, until), <= max_points per series.

    Each bucket reads the coarsest tier that divides it: RollupQuarter for buckets of 15 minutes
    or more, Rollup for a minute or more, Sample below that. A bucket of 10 minutes or more is
    widened to the next multiple of 15 minutes, and one of 30 s or more to the next whole minute
    (fewer points than asked, never more: scanning raw seconds for a 6-hour chart reads 20x the
    rows of its minutes). A tier is read up to the newest row it holds; the
    minutes and seconds after that (not rolled up yet) come from the next finer tier, so the
    newest bucket is complete, and partial aggregates of one bucket from two tiers are merged
    count-weighted. A window that starts before what retention kept of a finer tier (raw samples,
    minute rollups) gets the next tier's bucket (a minute, a quarter hour), so an old window
    is drawn from its rollups rather than left blank. Columns: metric, ts (bucket start, epoch s),
    avg, min, max.
    """
    import pandas as pd  # here, not at import: a sweep process never needs it
    span = max(until - since, 1.0)
    bucket = max(1, int(np.ceil(span / max_points)))
    bucket = _widen_past_retention(engine, server_id, list(metrics), since, bucket)
    if bucket >= 600:
        bucket = int(np.ceil(bucket / QUARTER_S) * QUARTER_S)
        tiers = [(QUARTER, QUARTER_S), (ROLLUP, 60)]
    elif bucket >= 30:
        bucket = int(np.ceil(bucket / 60) * 60)
        tiers = [(ROLLUP, 60)]
    else:
        tiers = []
    metrics = list(metrics)
    dialect = engine.dialect.name
    frames = []

    def read(table: Any, *, n: Any, total: Any, low: Any, high: Any, a: float, z: float) -> None:
        b = _bucket(table.c.ts, bucket, dialect)
        q = (
            select(table.c.metric, (b * bucket).label("ts"), n, total, low, high)
            .where(and_(table.c.server_id == server_id, table.c.metric.in_(metrics),
                        table.c.ts >= a, table.c.ts < z))
            .group_by(table.c.metric, b)
        )
        # plain tuples: pandas probes SQLAlchemy Rows with hasattr, one exception per cell
        frames.append(pd.DataFrame([tuple(r) for r in conn.execute(q)], columns=_BUCKET_COLUMNS))

    with engine.connect() as conn:
        todo = [(since, until)]  # what is left to read, for the next finer tier
        for table, row_s in tiers:
            # the newest row of this tier over the requested metrics: one index seek per metric
            # (a plain max over the server scans every row of it)
            newest = [
                conn.execute(
                    select(func.max(table.c.ts)).where(and_(table.c.server_id == server_id, table.c.metric == m))
                ).scalar()
                for m in metrics
            ]
            rolled = [float(t) for t in newest if t is not None]
            if not rolled:
                continue
            left = []
            for a, z in todo:
                lo = float(np.ceil(a / row_s) * row_s)  # rows that start inside the range
                hi = min(z, max(rolled) + row_s)
                if lo >= hi:
                    left.append((a, z))
                    continue
                read(table, n=func.sum(table.c.count), total=func.sum(table.c.avg * table.c.count),
                     low=func.min(table.c.min), high=func.max(table.c.max), a=lo, z=hi)
                # for the finer tier: the head before the first whole row, the tail after the newest
                left += [(a, lo)] if a < lo else []
                left += [(hi, z)] if hi < z else []
            todo = left
        for a, z in todo:
            v = SAMPLE.c.value
            read(SAMPLE, n=func.count(v), total=func.sum(v), low=func.min(v), high=func.max(v), a=a, z=z)
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=["metric", "ts", "avg", "min", "max"])
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    df["ts"] = df["ts"].astype(float)
    df[["n", "total", "min", "max"]] = df[["n", "total", "min", "max"]].astype(float)
    if len(frames) > 1:  # a bucket split between two tiers: merge its partial aggregates
        df = df.groupby(["metric", "ts"], as_index=False).agg(
            n=("n", "sum"), total=("total", "sum"), min=("min", "min"), max=("max", "max"))
    df["avg"] = df["total"] / df["n"]
    return df[["metric", "ts", "avg", "min", "max"]].sort_values(["metric", "ts"]).reset_index(drop=True)




def sample_points(
    engine: Engine, *, server_id: int, metric: str, since: float, until: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(ts, value) arrays of one metric in [since, until), ordered by ts (step-function reads:
    time above a threshold, 1 -> 0 transitions, counter deltas). Uses the (server, metric, ts)
    index; callers keep windows short or read Rollup for long ones."""
    q = select(SAMPLE.c.ts, SAMPLE.c.value).where(
        and_(SAMPLE.c.server_id == server_id, SAMPLE.c.metric == metric, SAMPLE.c.ts >= since)
    )
    if until is not None:
        q = q.where(SAMPLE.c.ts < until)
    with engine.connect() as conn:
        rows = conn.execute(q.order_by(SAMPLE.c.ts)).all()
    if not rows:
        return np.empty(0, dtype=float), np.empty(0, dtype=float)
    # Flatten through plain iteration: np.asarray over Row objects probes each Row for the array
    # protocol by attribute, a failed key lookup each (0.29 s against 2 ms for a 21,600-row
    # series, 6 h of 1-s samples, in bench/dashboard_paint.py's fixture).
    flat = np.fromiter((v for row in rows for v in row), dtype=float, count=2 * len(rows))
    return flat[0::2].copy(), flat[1::2].copy()
