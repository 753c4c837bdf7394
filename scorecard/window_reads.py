"""A scorecard window's series reads, raw where the samples are kept and from rollups where
retention has removed them (storage/repo/windows.py splits a window by tier).

A series whose values in the window all come from raw samples is read as before (arrays, exact
percentiles and step functions). A series that reaches back into rollups gives what rollups can:
count, mean, sum, min and max (exact); percentiles of its values, time above a threshold,
1 -> 0 transitions and counter deltas are not available, and the reader says which figures
therefore are not (`unavailable`: figure key -> why) instead of computing them from the raw part
alone. `resolution` names the tiers each series was read from ("raw", "1-minute rollup",
"15-minute rollup"), for the scorecard's subject and every export.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine

from scorecard import math as sm
from storage import repo
from storage.repo.windows import MINUTE_ROLLUP, QUARTER_ROLLUP, RAW, WindowAggregate

DAY_S = 86_400.0
#: tiers from the finest, the order a window's resolution is named in
TIER_ORDER = (RAW, MINUTE_ROLLUP, QUARTER_ROLLUP)
ROLLUP_NOTE = "not available from rollups (part of the window is older than the raw samples kept)"


def policy_cutoffs(retention: dict[str, Any] | None, now: float) -> tuple[float | None, float | None]:
    """(raw_since, minute_since): now - retention.samples_days / rollups_days, None when kept
    forever or no policy is given (then what is stored decides)."""
    def cut(key: str) -> float | None:
        days = float((retention or {}).get(key) or 0.0)
        return None if days <= 0 else now - days * DAY_S
    return cut("samples_days"), cut("rollups_days")


class WindowReads:
    """Reads of one server's series over [since, until) for a scorecard (module docstring)."""

    def __init__(self, engine: Engine, *, server_id: int, since: float, until: float,
                 retention: dict[str, Any] | None = None, now: float | None = None) -> None:
        self.engine, self.sid, self.since, self.until = engine, server_id, since, until
        self.raw_since, self.minute_since = policy_cutoffs(retention, until if now is None else now)
        self.resolution: dict[str, str] = {}  # metric -> "raw" | "1-minute rollup + raw" | ...
        self.unavailable: dict[str, str] = {}  # figure key -> why it has no value
        self._aggs: dict[str, WindowAggregate] = {}

    def agg(self, metric: str) -> WindowAggregate:
        if metric not in self._aggs:
            a = repo.window_aggregate(self.engine, server_id=self.sid, metric=metric, since=self.since,
                                      until=self.until, raw_since=self.raw_since, minute_since=self.minute_since)
            self._aggs[metric] = a
            if a.resolutions:
                self.resolution[metric] = " + ".join(
                    t for t in reversed(TIER_ORDER) if t in a.resolutions)
        return self._aggs[metric]

    def rolled(self, metric: str) -> bool:
        return self.agg(metric).rolled_up

    def values(self, metric: str, *figures: str) -> np.ndarray:
        """Every raw value of a series (for percentiles); empty, with `figures` marked
        unavailable, when part of the series is only in rollups."""
        if self.rolled(metric):
            self.mark(*figures)
            return np.empty(0)
        return repo.sample_values(self.engine, server_id=self.sid, metric=metric, since=self.since,
                                  until=self.until)

    def points(self, metric: str, *figures: str) -> tuple[np.ndarray, np.ndarray]:
        """(ts, value) of a series (step functions, counters); empty, with `figures` marked
        unavailable, when part of the series is only in rollups."""
        if self.rolled(metric):
            self.mark(*figures)
            return np.empty(0), np.empty(0)
        return repo.sample_points(self.engine, server_id=self.sid, metric=metric, since=self.since,
                                  until=self.until)

    def mean(self, metric: str) -> float | None:
        return self.agg(metric).mean

    def window_mean(self, metric: str) -> float | None:
        """The window's mean of a series: the rollups' where it was read from them, else the raw
        values' (what a scorecard figure that is a mean reads)."""
        return self.mean(metric) if self.rolled(metric) else sm.mean_or_none(self.values(metric))

    def count(self, metric: str) -> int:
        return self.agg(metric).count

    def names(self, prefixes: Sequence[str]) -> list[str]:
        """The server's series whose key starts with one of `prefixes`."""
        return [n for n in repo.series_names(self.engine, server_id=self.sid) if n.startswith(tuple(prefixes))]

    def total(self, metric: str) -> tuple[float, int]:
        a = self.agg(metric)
        return a.total, a.count

    def maximum(self, metric: str) -> float | None:
        return self.agg(metric).max

    def mark(self, *figures: str) -> None:
        for key in figures:
            self.unavailable[key] = ROLLUP_NOTE

    def window_resolution(self) -> str:
        """The tiers every series of the window was read from, coarsest first ("raw" when no
        series reached rollups, or nothing was read)."""
        used = {t for r in self.resolution.values() for t in r.split(" + ")}
        return " + ".join(t for t in reversed(TIER_ORDER) if t in used) or RAW
