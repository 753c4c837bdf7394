"""Window reads that outlive raw retention: one series over [since, until) from the finest tier
that still holds each part of it.

Retention (storage/repo/retention.py) deletes raw samples after `retention.samples_days` and
minute rollups after `retention.rollups_days`, each only once the next tier covers them. A window
that reaches back past those horizons is therefore read in up to three parts, oldest first:

| part | tier | resolution label |
|---|---|---|
| [since, quarter_until) | RollupQuarter (count, avg, min, max) | "15-minute rollup" |
| [quarter_until, raw_from) | Rollup (count, avg, min, max) | "1-minute rollup" |
| [raw_from, until) | Sample (every value) | "raw" |

`raw_from` is where the series' raw samples begin: the later of the policy's cutoff (when the
caller passes it) and the oldest stored sample, rounded down to a whole minute (retention deletes
whole minutes), but never past the newest rolled-up minute (samples the rollups do not cover yet
are read raw). `quarter_until` is the same for minute rollups at quarter-hour grain. A series
whose raw samples were never deleted has no rollup row before its first sample's minute, so it is
read raw throughout. A rollup part reads the rows that start inside it, so its edges have the
tier's grain. Only count, sum, min and max survive in rollups: averages are exact,
percentiles, step functions and counter deltas are not available from them (callers say so).
Cross-check a rollup part: `SELECT sum(count), sum(avg * count) / sum(count) FROM rollup WHERE
server_id = N AND metric = 'm' AND ts >= A AND ts < B` against the same over `sample` before
retention removed it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection, Engine

from storage.repo._common import QUARTER, QUARTER_S, ROLLUP, SAMPLE

__all__ = ["RAW", "MINUTE_ROLLUP", "QUARTER_ROLLUP", "WindowAggregate", "first_ts", "older_rollups", "series_names",
           "tier_starts", "window_aggregate"]

RAW = "raw"
MINUTE_ROLLUP = "1-minute rollup"
QUARTER_ROLLUP = "15-minute rollup"


@dataclass
class WindowAggregate:
    """count, sum, min and max of one series over a window, and the tiers that held its values
    (oldest first: a subset of QUARTER_ROLLUP, MINUTE_ROLLUP, RAW; empty when no row)."""

    count: int = 0
    total: float = 0.0
    min: float | None = None
    max: float | None = None
    resolutions: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def rolled_up(self) -> bool:
        """Whether any value came from a rollup (so percentiles and step reads are not exact)."""
        return any(r != RAW for r in self.resolutions)

    def add(self, resolution: str, count: Any, total: Any, low: Any, high: Any) -> None:
        if not count:
            return
        self.count += int(count)
        self.total += float(total)
        self.min = float(low) if self.min is None else min(self.min, float(low))
        self.max = float(high) if self.max is None else max(self.max, float(high))
        self.resolutions.append(resolution)


def _edge(conn: Connection, table: Any, server_id: int, metric: str, *, oldest: bool) -> float | None:
    """Oldest or newest ts of one series in `table` (one index seek)."""
    agg = func.min if oldest else func.max
    ts = conn.execute(select(agg(table.c.ts)).where(
        and_(table.c.server_id == server_id, table.c.metric == metric))).scalar()
    return None if ts is None else float(ts)


def first_ts(engine: Engine, *, server_id: int, metrics: list[str]) -> float | None:
    """Epoch seconds where any of `metrics` begins, None when none has a value: its first raw
    sample, or its oldest minute / quarter rollup where retention removed the rows before
    (so a young server's chart can start there; one index seek per metric and tier)."""
    starts = []
    with engine.connect() as conn:
        for m in metrics:
            start = _edge(conn, SAMPLE, server_id, m, oldest=True)
            # a rollup row starts at its minute / quarter, before the first sample in it: it
            # moves the start only where retention removed the finer tier's older rows
            for table, grain in ((ROLLUP, 60), (QUARTER, QUARTER_S)):
                t = _edge(conn, table, server_id, m, oldest=True)
                if t is not None and (start is None or t + grain <= start):
                    start = t
            if start is not None:
                starts.append(start)
    return min(starts, default=None)


def _begin(conn: Connection, table: Any, grain: int, server_id: int, metric: str, cutoff: float | None) -> float:
    """Where `table`'s rows of a series begin for reading: the later of its oldest row and
    `cutoff`, rounded down to `grain` (retention deletes whole grains: retention.py); +inf when
    it holds none."""
    oldest = _edge(conn, table, server_id, metric, oldest=True)
    if oldest is None:
        return math.inf
    return max(oldest, -math.inf if cutoff is None else cutoff) // grain * grain


def _covered_until(conn: Connection, tiers: tuple[tuple[Any, int], ...], server_id: int, metric: str) -> float:
    """End of the newest row of a series in any of the coarser `tiers` (-inf: none holds any)."""
    ends = [t + grain for table, grain in tiers
            if (t := _edge(conn, table, server_id, metric, oldest=False)) is not None]
    return max(ends, default=-math.inf)


def tier_starts(conn: Connection, server_id: int, metric: str, raw_since: float | None = None,
                minute_since: float | None = None) -> tuple[float, float]:
    """(raw_from, minute_from) of a series: where its raw samples and its minute rollups begin
    for reading (module docstring; -inf: that tier holds all of it)."""
    covered = _covered_until(conn, ((ROLLUP, 60), (QUARTER, QUARTER_S)), server_id, metric)
    raw_from = min(_begin(conn, SAMPLE, 60, server_id, metric, raw_since), covered)
    q_covered = _covered_until(conn, ((QUARTER, QUARTER_S),), server_id, metric)
    minute_from = min(_begin(conn, ROLLUP, QUARTER_S, server_id, metric, minute_since), q_covered)
    return raw_from, min(minute_from, raw_from)


def _any(conn: Connection, table: Any, server_id: int, metric: str, a: float, z: float) -> bool:
    if a >= z:
        return False
    c = table.c
    return conn.execute(select(c.id).where(and_(c.server_id == server_id, c.metric == metric, c.ts >= a,
                                                c.ts < z)).limit(1)).first() is not None


def older_rollups(conn: Connection, server_id: int, metric: str, since: float) -> tuple[bool, bool]:
    """(minutes, quarters): whether the window from `since` holds minute rollups older than the
    series' raw samples, and quarter rollups older than its minute rollups (retention removed
    the finer tier there; a series that never lost any has neither)."""
    raw_from, minute_from = tier_starts(conn, server_id, metric)
    return (_any(conn, ROLLUP, server_id, metric, since, raw_from),
            _any(conn, QUARTER, server_id, metric, since, minute_from))


def series_names(engine: Engine, *, server_id: int, prefix: str = "") -> list[str]:
    """Metric keys of a server in any tier (raw samples, minute or quarter rollups), so a window
    older than raw retention still finds its series."""
    names: set[str] = set()
    with engine.connect() as conn:
        for table in (SAMPLE, ROLLUP, QUARTER):
            q = select(table.c.metric).where(table.c.server_id == server_id).distinct()
            if prefix:
                q = q.where(table.c.metric.like(prefix + "%"))
            names.update(conn.execute(q).scalars())
    return sorted(names)


def window_aggregate(
    engine: Engine, *, server_id: int, metric: str, since: float, until: float,
    raw_since: float | None = None, minute_since: float | None = None,
) -> WindowAggregate:
    """count, sum, min, max of one series over [since, until), each part from the finest tier
    that holds it (module docstring). `raw_since` / `minute_since`: the retention policy's
    cutoffs (now - samples_days, now - rollups_days), or None to go by what is stored."""
    out = WindowAggregate()
    with engine.connect() as conn:
        raw_from, minute_from = tier_starts(conn, server_id, metric, raw_since, minute_since)
        parts = ((QUARTER, QUARTER_ROLLUP, since, min(until, minute_from)),
                 (ROLLUP, MINUTE_ROLLUP, max(since, minute_from), min(until, raw_from)))
        for table, label, a, z in parts:
            if a >= z:
                continue
            c = table.c
            row = conn.execute(select(func.sum(c.count), func.sum(c.avg * c.count), func.min(c.min), func.max(c.max))
                               .where(and_(c.server_id == server_id, c.metric == metric, c.ts >= a, c.ts < z))).one()
            out.add(label, *row)
        a = max(since, raw_from)
        if a < until:
            v = SAMPLE.c.value
            row = conn.execute(select(func.count(v), func.sum(v), func.min(v), func.max(v)).where(
                and_(SAMPLE.c.server_id == server_id, SAMPLE.c.metric == metric, SAMPLE.c.ts >= a,
                     SAMPLE.c.ts < until))).one()
            out.add(RAW, *row)
    return out
