"""Keyword-only read/write functions: the only SQL in Pitwall.

Rules (reference/perf-baselines.md): time-series rows are written with SQLAlchemy Core
`insert()` executemany in batches, never per-row ORM adds (12x slower); percentile reads select the
value column over an indexed window and compute with numpy, never ORDER BY/OFFSET; charts read
SQL-bucketed series (`CAST(ts / bucket AS INTEGER)`), long windows read Rollup and RollupQuarter. Everything here is
portable SQL (SQLite and PostgreSQL).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Integer, and_, cast, delete, func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from storage.models import (
    Audit,
    CollectorState,
    Event,
    Intent,
    Launch,
    ProbeRequest,
    ProbeRun,
    Profile,
    Rollup,
    RollupQuarter,
    RunnerLease,
    Sample,
    Server,
)

SAMPLE = Sample.__table__  # type: ignore[attr-defined]
EVENT = Event.__table__  # type: ignore[attr-defined]
ROLLUP = Rollup.__table__  # type: ignore[attr-defined]
QUARTER = RollupQuarter.__table__  # type: ignore[attr-defined]
QUARTER_S = 900  # seconds a RollupQuarter row covers
PROBE_REQUEST = ProbeRequest.__table__  # type: ignore[attr-defined]
COLLECTOR_STATE = CollectorState.__table__  # type: ignore[attr-defined]
INTENT = Intent.__table__  # type: ignore[attr-defined]
LEASE = RunnerLease.__table__  # type: ignore[attr-defined]

# ---------------------------------------------------------------------------------------------
# batched writes (the hot path)


SAMPLE_COLUMNS = ("ts", "server_id", "launch_id", "source", "metric", "value")


def _placeholders(conn: Connection, n: int) -> str:
    style = conn.dialect.paramstyle
    if style == "qmark":
        return ", ".join("?" * n)
    if style == "numeric":
        return ", ".join(f":{i + 1}" for i in range(n))
    return ", ".join(["%s"] * n)  # format / pyformat (psycopg)


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


def insert_events(conn: Connection, *, rows: Sequence[dict[str, Any]]) -> int:
    """Insert Event rows (dicts with ts, server_id, launch_id, kind, severity, message, raw)."""
    if rows:
        conn.execute(insert(EVENT), list(rows))
    return len(rows)


def add_event(
    engine: Engine,
    *,
    kind: str,
    message: str,
    server_id: int | None = None,
    launch_id: int | None = None,
    severity: str = "info",
    raw: str | None = None,
    ts: float | None = None,
) -> None:
    """Write one Event right away (low-rate paths: supervisor, CLI)."""
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
                    "message": message,
                    "raw": raw,
                }
            ],
        )


# ---------------------------------------------------------------------------------------------
# collector state (offsets, last counter values); saved in the same transaction as the rows


def load_state(engine: Engine, *, key: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(COLLECTOR_STATE.c.value).where(COLLECTOR_STATE.c.key == key)
        ).first()
    return row[0] if row else None


def save_state(conn: Connection, *, key: str, value: dict[str, Any]) -> None:
    now = time.time()
    res = conn.execute(
        update(COLLECTOR_STATE)
        .where(COLLECTOR_STATE.c.key == key)
        .values(value=value, updated_at=now)
    )
    if res.rowcount == 0:
        conn.execute(insert(COLLECTOR_STATE).values(key=key, value=value, updated_at=now))


# ---------------------------------------------------------------------------------------------
# runner lease (single instance per database)


def acquire_lease(
    engine: Engine, *, holder: str, pid: int, host: str, ttl_s: float, now: float | None = None
) -> tuple[bool, RunnerLease | None]:
    """Take the runner lease if free or stale (no heartbeat for ttl_s); return (ok, current)."""
    now = time.time() if now is None else now
    with engine.begin() as conn:
        row = conn.execute(select(LEASE).where(LEASE.c.id == 1)).mappings().first()
        if row is not None and row["holder"] != holder and now - row["heartbeat_at"] < ttl_s:
            return False, RunnerLease.model_validate(dict(row))
        values = dict(holder=holder, pid=pid, host=host, started_at=now, heartbeat_at=now)
        if row is None:
            conn.execute(insert(LEASE).values(id=1, **values))
        else:
            # guarded by the heartbeat we read: of two runners taking over a stale lease at
            # once (PostgreSQL reads do not block), only one updates the row
            res = conn.execute(
                update(LEASE)
                .where(and_(LEASE.c.id == 1, LEASE.c.heartbeat_at == row["heartbeat_at"]))
                .values(**values)
            )
            if res.rowcount != 1:
                return False, RunnerLease.model_validate(
                    dict(conn.execute(select(LEASE).where(LEASE.c.id == 1)).mappings().one())
                )
    return True, RunnerLease.model_validate({"id": 1, **values})


def renew_lease(engine: Engine, *, holder: str, now: float | None = None) -> bool:
    """Refresh the heartbeat; False when another runner took the lease over."""
    now = time.time() if now is None else now
    with engine.begin() as conn:
        res = conn.execute(
            update(LEASE)
            .where(and_(LEASE.c.id == 1, LEASE.c.holder == holder))
            .values(heartbeat_at=now)
        )
    return res.rowcount == 1


def release_lease(engine: Engine, *, holder: str) -> None:
    with engine.begin() as conn:
        conn.execute(delete(LEASE).where(and_(LEASE.c.id == 1, LEASE.c.holder == holder)))


def get_lease(engine: Engine) -> RunnerLease | None:
    with Session(engine) as s:
        return s.get(RunnerLease, 1)


# ---------------------------------------------------------------------------------------------
# servers and profiles


def upsert_server(engine: Engine, *, name: str, **fields: Any) -> Server:
    with Session(engine, expire_on_commit=False) as s:
        srv = s.execute(select(Server).where(col(Server.name) == name)).scalars().first()
        if srv is None:
            srv = Server(name=name, **fields)
        else:
            for k, v in fields.items():
                setattr(srv, k, v)
        srv.updated_at = time.time()
        srv.retired_at = fields.get("retired_at")  # configured again: active
        s.add(srv)
        s.commit()
        s.refresh(srv)
        return srv


def list_servers(engine: Engine, *, include_retired: bool = False) -> list[Server]:
    """Configured servers (and, with include_retired, those that left the configuration)."""
    with Session(engine, expire_on_commit=False) as s:
        q = select(Server).order_by(Server.name)
        if not include_retired:
            q = q.where(col(Server.retired_at).is_(None))
        return list(s.execute(q).scalars())


def retire_servers_except(engine: Engine, *, names: Iterable[str]) -> list[str]:
    """Mark every active server not in `names` as retired; returns the names retired."""
    keep = set(names)
    retired = [s.name for s in list_servers(engine) if s.name not in keep]
    if retired:
        with engine.begin() as conn:
            conn.execute(
                update(Server.__table__)  # type: ignore[attr-defined]
                .where(Server.__table__.c.name.in_(retired))  # type: ignore[attr-defined]
                .values(retired_at=time.time())
            )
    return retired


def get_server(engine: Engine, *, name: str | None = None, id: int | None = None) -> Server | None:
    with Session(engine, expire_on_commit=False) as s:
        if id is not None:
            return s.get(Server, id)
        return s.execute(select(Server).where(col(Server.name) == name)).scalars().first()


def upsert_profile(engine: Engine, *, name: str, **fields: Any) -> Profile:
    with Session(engine, expire_on_commit=False) as s:
        prof = s.execute(select(Profile).where(col(Profile.name) == name)).scalars().first()
        if prof is None:
            prof = Profile(name=name, **fields)
        else:
            for k, v in fields.items():
                setattr(prof, k, v)
        prof.updated_at = time.time()
        s.add(prof)
        s.commit()
        s.refresh(prof)
        return prof


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


def create_launch(engine: Engine, **fields: Any) -> Launch:
    fields.setdefault("started_at", time.time())
    with Session(engine, expire_on_commit=False) as s:
        launch = Launch(**fields)
        s.add(launch)
        s.commit()
        s.refresh(launch)
        return launch


def update_launch(engine: Engine, *, launch_id: int, **fields: Any) -> None:
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


def list_launches(engine: Engine, *, server_id: int | None = None, limit: int = 100) -> list[Launch]:
    with Session(engine, expire_on_commit=False) as s:
        q = select(Launch).order_by(col(Launch.id).desc()).limit(limit)
        if server_id is not None:
            q = q.where(col(Launch.server_id) == server_id)
        return list(s.execute(q).scalars())


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
    with Session(engine, expire_on_commit=False) as s:
        intent = Intent(
            kind=kind,
            server_id=server_id,
            payload=payload or {},
            requested_by=requested_by,
            created_at=time.time(),
        )
        s.add(intent)
        s.commit()
        s.refresh(intent)
        return intent


def claim_next_intent(engine: Engine, *, kinds: Iterable[str] | None = None) -> Intent | None:
    """Move the oldest pending intent to running and return it (None when there is none).

    The UPDATE is guarded by `state = 'pending'`, so two runners (or a stale one) can never
    claim the same intent.
    """
    with engine.begin() as conn:
        q = select(INTENT.c.id).where(INTENT.c.state == "pending").order_by(INTENT.c.id).limit(1)
        if kinds is not None:
            q = q.where(INTENT.c.kind.in_(list(kinds)))
        row = conn.execute(q).first()
        if row is None:
            return None
        res = conn.execute(
            update(INTENT)
            .where(and_(INTENT.c.id == row[0], INTENT.c.state == "pending"))
            .values(state="running", started_at=time.time())
        )
        if res.rowcount != 1:
            return None
    return get_intent(engine, intent_id=row[0])


def update_intent(engine: Engine, *, intent_id: int, **fields: Any) -> None:
    if fields.get("state") in ("done", "failed", "cancelled") and "finished_at" not in fields:
        fields["finished_at"] = time.time()
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


def fail_stale_intents(engine: Engine, *, reason: str) -> int:
    """Intents left `running` by a runner that died are failed with `reason` (runner start)."""
    with engine.begin() as conn:
        res = conn.execute(
            update(INTENT)
            .where(INTENT.c.state == "running")
            .values(state="failed", message=reason, finished_at=time.time())
        )
    return res.rowcount


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
    engine: Engine, *, server_id: int, metrics: Iterable[str], max_age_s: float | None = None
) -> dict[str, tuple[float, float]]:
    """{metric: (ts, value)} of the newest sample of each metric (one indexed lookup each)."""
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
    count-weighted. Columns: metric, ts (bucket start, epoch s), avg, min, max.
    """
    span = max(until - since, 1.0)
    bucket = max(1, int(np.ceil(span / max_points)))
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


def compute_rollups(
    engine: Engine, *, until: float, lookback_s: float = 3600, known_series: set[tuple[int, str]] | None = None
) -> int:
    """Write Rollup rows for complete minutes and RollupQuarter rows for complete quarter hours
    in [until - lookback_s, until).

    Idempotent: minutes and quarters already written are skipped. Minute percentiles are exact
    (numpy over that minute's values); a quarter aggregates its minutes (count-weighted avg,
    min of min, max of max). Returns the number of rows written (both tiers).

    A caller that rolls up a few minutes at a time (the runner) passes `known_series`, a set it
    keeps: the series seen so far are added to it, and quarters are written for all of them, so
    a series that stopped early in a quarter (a server gone down) still gets that quarter.
    """
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
            p50, p95, p99 = np.percentile(v, [50, 95, 99])
            rows.append(
                {
                    "ts": float(minute),
                    "server_id": int(sid),
                    "metric": metric,
                    "count": int(v.size),
                    "avg": float(v.mean()),
                    "min": float(v.min()),
                    "max": float(v.max()),
                    "p50": float(p50),
                    "p95": float(p95),
                    "p99": float(p99),
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


def insert_rollups(conn: Connection, *, rows: Sequence[dict[str, Any]]) -> int:
    if rows:
        conn.execute(insert(ROLLUP), list(rows))
    return len(rows)


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


# ---------------------------------------------------------------------------------------------
# probe runs


def create_probe_run(engine: Engine, **fields: Any) -> ProbeRun:
    fields.setdefault("created_at", time.time())
    with Session(engine, expire_on_commit=False) as s:
        run = ProbeRun(**fields)
        s.add(run)
        s.commit()
        s.refresh(run)
        return run


def update_probe_run(engine: Engine, *, run_id: int, **fields: Any) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(ProbeRun.__table__).where(ProbeRun.__table__.c.id == run_id).values(**fields)  # type: ignore[attr-defined]
        )


def insert_probe_requests(conn: Connection, *, rows: Sequence[dict[str, Any]]) -> int:
    if rows:
        conn.execute(insert(PROBE_REQUEST), list(rows))
    return len(rows)


def insert_probe_run(conn: Connection, **fields: Any) -> int:
    """Insert a ProbeRun row (Core) and return its id."""
    fields.setdefault("created_at", time.time())
    res = conn.execute(insert(ProbeRun.__table__).values(**fields))  # type: ignore[attr-defined]
    pk = res.inserted_primary_key
    assert pk is not None
    return int(pk[0])


def probe_run_row(engine: Engine, *, run_id: int) -> dict[str, Any] | None:
    """A ProbeRun as a plain dict (for the sweep subprocess, which avoids ORM sessions)."""
    run = ProbeRun.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        row = conn.execute(select(run).where(run.c.id == run_id)).mappings().first()
    return dict(row) if row else None


def probe_output_rows(engine: Engine, *, run_id: int) -> list[tuple[int, bool, str | None]]:
    """(seq, ok, output_hash) of every request of a run (the output-consistency check)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(PROBE_REQUEST.c.seq, PROBE_REQUEST.c.ok, PROBE_REQUEST.c.output_hash).where(
                PROBE_REQUEST.c.run_id == run_id
            )
        ).all()
    return [(int(s), bool(ok), h) for s, ok, h in rows]


def probe_request_count(engine: Engine, *, run_id: int) -> int:
    with engine.connect() as conn:
        q = select(func.count()).select_from(PROBE_REQUEST).where(PROBE_REQUEST.c.run_id == run_id)
        return int(conn.execute(q).scalar() or 0)


def get_probe_run(engine: Engine, *, run_id: int) -> ProbeRun | None:
    with Session(engine, expire_on_commit=False) as s:
        return s.get(ProbeRun, run_id)


def list_probe_runs(
    engine: Engine, *, server_id: int | None = None, limit: int = 100
) -> list[ProbeRun]:
    with Session(engine, expire_on_commit=False) as s:
        q = select(ProbeRun).order_by(col(ProbeRun.id).desc()).limit(limit)
        if server_id is not None:
            q = q.where(col(ProbeRun.server_id) == server_id)
        return list(s.execute(q).scalars())


def probe_requests(engine: Engine, *, run_id: int) -> pd.DataFrame:
    with engine.connect() as conn:
        rows = conn.execute(
            select(PROBE_REQUEST).where(PROBE_REQUEST.c.run_id == run_id).order_by(
                PROBE_REQUEST.c.id
            )
        ).mappings().all()
    return pd.DataFrame(rows, columns=[c.name for c in PROBE_REQUEST.columns])


# ---------------------------------------------------------------------------------------------
# audit and housekeeping


def add_audit(
    engine: Engine, *, actor: str, action: str, target: str = "", detail: dict[str, Any] | None = None
) -> None:
    with Session(engine) as s:
        s.add(Audit(ts=time.time(), actor=actor, action=action, target=target, detail=detail))
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


# ---------------------------------------------------------------------------------------------
# --- scorecard (issue 7)


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
    arr = np.asarray(rows, dtype=float)
    return arr[:, 0], arr[:, 1]
