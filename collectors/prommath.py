"""Counter deltas with reset detection, and histogram quantiles as Prometheus estimates them.

Pure functions on plain numbers; the windowing state lives in each engine's metrics collector,
and the scorecards sum stored counters with `counter_delta`.

- `counter_delta(prev, cur)`: the increase between two scrapes. A drop means the counter restarted
  (the server restarted): the increase is then `cur` (what was counted since the restart), as
  Prometheus' `increase()` does; never negative, never the old total again.
- `histogram_quantile(q, buckets)`: `buckets` are cumulative (upper bound `le` -> count, `+Inf`
  included). The estimate interpolates linearly inside the bucket holding rank q x total, with 0
  as the lower bound of the first bucket, exactly like PromQL's `histogram_quantile`. When the
  rank lands in the `+Inf` bucket the answer is the last finite bound, and the estimate is
  flagged `clamped`: the true quantile is somewhere above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def counter_delta(prev: float | None, cur: float) -> float | None:
    """Increase since `prev`; `cur` itself after a reset; None on a first sighting.

    The one reset rule for counters: scorecards sum it over stored samples (counter_increase).
    """
    if prev is None:
        return None
    return cur - prev if cur >= prev else cur


def bucket_delta(
    prev: dict[float, float] | None, cur: dict[float, float]
) -> dict[float, float] | None:
    """Windowed histogram buckets: cur - prev per bound; `cur` after a reset; None if no prev."""
    if prev is None:
        return None
    if any(cur.get(le, 0.0) < v for le, v in prev.items()):  # any bucket went down: a restart
        return dict(cur)
    return {le: v - prev.get(le, 0.0) for le, v in cur.items()}


@dataclass(frozen=True, slots=True)
class Quantile:
    q: float
    value: float
    clamped: bool  # the estimate sits at/above the last finite bucket bound


def histogram_quantile(q: float, buckets: dict[float, float]) -> Quantile | None:
    """PromQL-style estimate from cumulative buckets; None with no observations or no +Inf."""
    if not buckets or not 0.0 < q < 1.0:
        return None
    bounds = sorted(buckets)
    if not math.isinf(bounds[-1]):
        return None  # no +Inf bucket: the total is unknown (PromQL returns NaN)
    # cumulative counts must not decrease (Prometheus applies the same monotonicity fix-up)
    counts: list[float] = []
    running = 0.0
    for le in bounds:
        running = max(running, buckets[le])
        counts.append(running)
    total = counts[-1]
    if total <= 0:
        return None
    finite = [b for b in bounds if not math.isinf(b)]
    last_finite = finite[-1] if finite else math.inf
    rank = q * total
    i = next(idx for idx, c in enumerate(counts) if c >= rank)
    if math.isinf(bounds[i]):
        return Quantile(q, last_finite, True)
    upper = bounds[i]
    if i == 0 and upper <= 0:
        return Quantile(q, upper, upper >= last_finite)
    lower = bounds[i - 1] if i > 0 else 0.0
    prev_count = counts[i - 1] if i > 0 else 0.0
    in_bucket = counts[i] - prev_count
    value = upper if in_bucket <= 0 else lower + (upper - lower) * (rank - prev_count) / in_bucket
    return Quantile(q, value, value >= last_finite)


def parse_le(text: str) -> float | None:
    """A bucket's `le` label as a float (`+Inf` included); None if it is not a number."""
    try:
        return float(text)
    except ValueError:
        return None
