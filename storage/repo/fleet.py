"""Fleet reads: one query per kind of row for every server at once (the Overview's fleet table and
fleet scorecards at 50 servers; dashboard/services/views/fleet.py).

Each function answers for all servers in one round trip, so the number of queries a fleet view
costs does not grow with the number of servers (tests/views/test_fleet.py counts them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from storage.models import Launch, ProbeRun
from storage.repo._common import EVENT, PROBE_REQUEST, SAMPLE

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FLEET_SAMPLE_COLUMNS", "fleet_samples", "fleet_latest_launches", "fleet_done_runs",
           "fleet_probe_requests", "fleet_event_counts", "fleet_gpu_indices", "fleet_aggregates",
           "fleet_latest"]

FLEET_SAMPLE_COLUMNS = ["server_id", "metric", "ts", "value"]


def fleet_samples(
    engine: Engine, *, metrics: Iterable[str], prefixes: Sequence[str] = (), since: float,
    until: float | None = None,
) -> pd.DataFrame:
    """Every sample of `metrics` (and of metrics starting with `prefixes`) in [since, until) of
    every server, as a frame (server_id, metric, ts, value) ordered by ts: one query."""
    import pandas as pd  # here, not at import: a sweep process never needs it
    names = list(metrics)
    match = [SAMPLE.c.metric.in_(names)] if names else []
    match += [SAMPLE.c.metric.like(p.replace("_", r"\_") + "%", escape="\\") for p in prefixes]
    if not match:
        return pd.DataFrame(columns=FLEET_SAMPLE_COLUMNS)
    q = select(SAMPLE.c.server_id, SAMPLE.c.metric, SAMPLE.c.ts, SAMPLE.c.value).where(
        and_(SAMPLE.c.ts >= since, or_(*match))).order_by(SAMPLE.c.ts)
    if until is not None:
        q = q.where(SAMPLE.c.ts < until)
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    if not rows:
        return pd.DataFrame(columns=FLEET_SAMPLE_COLUMNS)
    # column arrays, not row tuples: a DataFrame of row tuples costs ~10x more at 100k+ rows
    sid, metric, ts, value = zip(*rows, strict=True)
    return pd.DataFrame({"server_id": np.asarray(sid, dtype=np.int64),
                         "metric": pd.Categorical(metric), "ts": np.asarray(ts, dtype=float),
                         "value": np.asarray(value, dtype=float)})


def fleet_latest_launches(engine: Engine) -> dict[int, Launch]:
    """{server_id: newest Launch} (highest id, as latest_launch) of every server: one query."""
    newest = select(func.max(col(Launch.id))).group_by(col(Launch.server_id))
    with Session(engine, expire_on_commit=False) as s:
        rows = s.execute(select(Launch).where(col(Launch.id).in_(newest))).scalars().all()
    return {r.server_id: r for r in rows}


def fleet_done_runs(engine: Engine, *, since: float, until: float) -> dict[int, ProbeRun]:
    """{server_id: newest finished probe run that started in [since, until)}: one query (the
    run a window's scorecard scores, as build._pick_run picks it per server)."""
    start = func.coalesce(col(ProbeRun.started_at), col(ProbeRun.created_at))
    q = (select(ProbeRun).where(and_(col(ProbeRun.status) == "done", start >= since, start < until,
                                     col(ProbeRun.server_id).is_not(None)))
         .order_by(col(ProbeRun.id).desc()))
    out: dict[int, ProbeRun] = {}
    with Session(engine, expire_on_commit=False) as s:
        for run in s.execute(q).scalars():
            assert run.server_id is not None
            out.setdefault(run.server_id, run)
    return out


def fleet_probe_requests(engine: Engine, *, run_ids: Sequence[int]) -> pd.DataFrame:
    """Every ProbeRequest row of `run_ids` (with its run_id column): one query."""
    import pandas as pd  # here, not at import: a sweep process never needs it
    cols = [c.name for c in PROBE_REQUEST.columns]
    if not run_ids:
        return pd.DataFrame(columns=cols)
    q = select(PROBE_REQUEST).where(PROBE_REQUEST.c.run_id.in_(list(run_ids))).order_by(
        PROBE_REQUEST.c.id)
    with engine.connect() as conn:
        rows = conn.execute(q).mappings().all()
    return pd.DataFrame(rows, columns=cols)


def fleet_event_counts(engine: Engine, *, since: float, until: float | None = None
                       ) -> dict[int, dict[str, int]]:
    """{server_id: {kind: count}} over [since, until): one grouped query."""
    q = (select(EVENT.c.server_id, EVENT.c.kind, func.count())
         .where(and_(EVENT.c.ts >= since, EVENT.c.server_id.is_not(None)))
         .group_by(EVENT.c.server_id, EVENT.c.kind))
    if until is not None:
        q = q.where(EVENT.c.ts < until)
    out: dict[int, dict[str, int]] = {}
    with engine.connect() as conn:
        for sid, kind, n in conn.execute(q).all():
            out.setdefault(int(sid), {})[kind] = int(n)
    return out


def fleet_gpu_indices(engine: Engine, *, since: float) -> dict[int, list[int]]:
    """{server_id: GPU indices with any `gpu.<i>.*` sample since `since`}: one DISTINCT query.
    The scorecard's "GPUs seen" counts the same series, in every storage tier and at any time
    (build.gather_inputs): the two differ only for GPUs that stopped reporting before the window."""
    q = (select(SAMPLE.c.server_id, SAMPLE.c.metric).distinct()
         .where(and_(SAMPLE.c.ts >= since, SAMPLE.c.metric.like("gpu.%"))))
    out: dict[int, set[int]] = {}
    with engine.connect() as conn:
        for sid, metric in conn.execute(q).all():
            idx = metric.split(".")[1]
            if idx.isdigit():
                out.setdefault(int(sid), set()).add(int(idx))
    return {sid: sorted(v) for sid, v in out.items()}


def fleet_aggregates(engine: Engine, *, metrics: Iterable[str], since: float,
                     until: float | None = None) -> dict[tuple[int, str], tuple[int, float, float]]:
    """{(server_id, metric): (count, sum, max)} of `metrics` over [since, until) for every
    server: one GROUP BY query (series the fleet view only averages, sums or maxes)."""
    names = list(metrics)
    if not names:
        return {}
    q = (select(SAMPLE.c.server_id, SAMPLE.c.metric, func.count(), func.sum(SAMPLE.c.value),
                func.max(SAMPLE.c.value))
         .where(and_(SAMPLE.c.ts >= since, SAMPLE.c.metric.in_(names)))
         .group_by(SAMPLE.c.server_id, SAMPLE.c.metric))
    if until is not None:
        q = q.where(SAMPLE.c.ts < until)
    with engine.connect() as conn:
        return {(int(sid), m): (int(n), float(total), float(top))
                for sid, m, n, total, top in conn.execute(q).all()}


def fleet_latest(engine: Engine, *, metrics: Iterable[str], since: float
                 ) -> dict[tuple[int, str], tuple[float, float]]:
    """{(server_id, metric): (ts, value)} of the newest sample since `since` of each of `metrics`
    for every server: one query (the newest timestamp per series, joined back to its row)."""
    names = list(metrics)
    if not names:
        return {}
    newest = (select(SAMPLE.c.server_id, SAMPLE.c.metric, func.max(SAMPLE.c.ts).label("mts"))
              .where(and_(SAMPLE.c.ts >= since, SAMPLE.c.metric.in_(names)))
              .group_by(SAMPLE.c.server_id, SAMPLE.c.metric).subquery())
    q = select(SAMPLE.c.server_id, SAMPLE.c.metric, SAMPLE.c.ts, SAMPLE.c.value).join(
        newest, and_(SAMPLE.c.server_id == newest.c.server_id, SAMPLE.c.metric == newest.c.metric,
                     SAMPLE.c.ts == newest.c.mts))
    with engine.connect() as conn:
        return {(int(sid), m): (float(ts), float(v)) for sid, m, ts, v in conn.execute(q).all()}
