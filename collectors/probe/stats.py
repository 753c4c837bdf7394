"""Probe statistics, computed once: percentiles, the steady window, the spread over repeats, the
tie rule and goodput. Pure functions of numbers (seconds, tokens, requests in start order), so the
probe report (collectors/probe/report.py: Benchmarks and `pitwall probe`), the scorecard
(scorecard/compute.py), the Overview, the fleet scorecards and the tune ranking all read the same
figure from the same code.

**Percentiles** are `numpy.percentile` with linear interpolation (`percentiles`: p50, p95, p99;
`stats` adds the mean and the max), over the values that are there: NaN is dropped and no values
give None, never 0. Cross-check: `python -c "import numpy; print(numpy.percentile([...], 99))"`.

**The steady window** (`steady_window`) is the one definition of a level's throughput: from the
moment only measured requests run to the last measured start, counting the successful requests
that finished inside it.

**The spread.** A load level is measured once per sweep, but a verdict needs to know how much a
figure moves when nothing changed. The level's measured requests, in start order, are cut into
`REPEATS` consecutive slices. Each slice ran under the same load (closed loop: the same number of
workers; open loop: the same rate), so each is a repeat of the level. The figure computed on each
slice gives `REPEATS` values; the spread is their [min, max], together with the whole level's
figure. Throughput per repeat (`repeat_throughput`): a closed loop by Little's law
(`closed_loop_rps`), an open loop by the steady-window definition on the repeat's own window (its
first start -> the next repeat's first start, the last one to the level's last start), counting
every successful request that finished inside it.

A slice needs `MIN_PER_SLICE` requests; a level with fewer than `REPEATS × MIN_PER_SLICE`
measured requests has no spread (None): the verdict then says the spread is unknown, it never
pretends the level was repeated.

Two figures are a **tie** when their spreads overlap or they differ by less than `FLOOR_REL` of
the baseline (a floor below which no verdict is made even with a narrow spread), or, where
either spread is unknown, when they differ by less than `UNKNOWN_REL` (5 %). Cross-check: `pitwall probe ... --json` prints each level's
`spread` block; a tie's two [lo, hi] ranges share a point.

**Goodput** (the idea of a serving benchmark's `--goodput`): the highest load level of a
sweep at which every latency target holds: p99 TTFT (`ttft_p99_s`), p99 ITL (`itl_p99_s`) and, for
image servers, per-image p99 (`image_p99_s`), with the success rate at least its target. Levels
are probe report levels (collectors/probe/report.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from collectors.probe.report_model import Level

REPEATS = 3
MIN_PER_SLICE = 3
#: below this relative difference no verdict is made even when both spreads are narrower
FLOOR_REL = 0.01
#: with either spread not measured, a relative difference under this is a tie: the noise is
#: unknown, so a small difference crowns nothing
UNKNOWN_REL = 0.05

PCTS = (50, 95, 99)
LATENCY_TARGETS = (("ttft_p99_s", "ttft_s", "p99 TTFT"), ("itl_p99_s", "itl_s", "p99 ITL"))

T = TypeVar("T")


def _present(values: Iterable[float | None] | np.ndarray) -> np.ndarray:
    arr = np.asarray(values if isinstance(values, np.ndarray) else
                     [np.nan if v is None else v for v in values], dtype=float)
    return arr[~np.isnan(arr)] if arr.size else arr


def percentiles(values: Iterable[float | None] | np.ndarray) -> dict[int, float | None]:
    """{50: p50, 95: p95, 99: p99} (numpy linear interpolation) of the values present; all None
    for no values."""
    arr = _present(values)
    if arr.size == 0:
        return dict.fromkeys(PCTS, None)
    return {p: float(v) for p, v in zip(PCTS, np.percentile(arr, PCTS), strict=True)}


def percentile(values: Iterable[float | None] | np.ndarray, q: float) -> float | None:
    """One percentile (numpy linear interpolation) of the values present; None for no values."""
    arr = _present(values)
    return float(np.percentile(arr, q)) if arr.size else None


def stats(values: Iterable[float | None] | np.ndarray) -> dict[str, float | None]:
    """p50/p95/p99/mean/max of the values present; all None when there are none."""
    arr = _present(values)
    if arr.size == 0:
        return {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}
    pct = percentiles(arr)
    return {"p50": pct[50], "p95": pct[95], "p99": pct[99], "mean": float(arr.mean()),
            "max": float(arr.max())}


def steady_window(starts: Sequence[float], ends: Sequence[float], ok: Sequence[bool],
                  warm_ends: Sequence[float], closed_loop: bool) -> tuple[list[bool], float]:
    """(which measured requests count, seconds) for throughput: the steady window. The one
    definition of throughput: the probe report (Benchmarks) and the scorecard both use it.

    From the moment only measured requests run (closed loop: the last warm-up end; open loop: the
    first measured start) to the last measured start (after it the pacer runs dry and workers
    idle), counting successful requests that *finished* inside it. Ramp-up and drain would
    otherwise count as idle capacity. Falls back to every successful request over the whole
    window (first start -> last end) when the steady one holds < 2 completions."""
    if not len(starts):
        return [], 0.0
    t_a = min(starts)
    if closed_loop and len(warm_ends):
        t_a = max(t_a, max(warm_ends))
    t_b = max(starts)
    inside = [good and t_a <= end <= t_b for good, end in zip(ok, ends, strict=True)]
    if t_b - t_a > 0 and sum(inside) >= 2:
        return inside, t_b - t_a
    return list(ok), max(ends) - min(starts)


@dataclass(frozen=True)
class Spread:
    lo: float
    hi: float
    repeats: int  # how many slices gave a value

    def as_list(self) -> list[float]:
        return [self.lo, self.hi]


def slices(items: Sequence[T], repeats: int = REPEATS) -> list[list[T]]:
    """`items` (already in start order) cut into `repeats` consecutive slices of near-equal size;
    [] when a slice would hold fewer than MIN_PER_SLICE items."""
    n = len(items)
    if repeats < 2 or n < repeats * MIN_PER_SLICE:
        return []
    bounds = [round(i * n / repeats) for i in range(repeats + 1)]
    return [list(items[bounds[i]:bounds[i + 1]]) for i in range(repeats)]


def spread_of(items: Sequence[T], figure: Callable[[list[T]], float | None],
              repeats: int = REPEATS) -> Spread | None:
    """The [min, max] of `figure` over the slices of `items` (None: too few items, or fewer than
    two slices gave a value)."""
    return from_values([figure(part) for part in slices(items, repeats)])


def from_values(values: Sequence[float | None]) -> Spread | None:
    """The [min, max] of the repeats' figures already computed (None: fewer than two values); for
    a figure whose repeat needs more than its own items (throughput counts the requests that
    finished inside the repeat's window, whichever repeat started them)."""
    got = [v for v in values if v is not None]
    if len(got) < 2:
        return None
    return Spread(min(got), max(got), len(got))


def closed_loop_rps(e2e_s: Sequence[float | None], ok: Sequence[bool], concurrency: float) -> float | None:
    """Successful requests/s of one repeat of a closed-loop level, by Little's law: the repeat's
    busy time Σ e2e (every request's, failures included) is shared by `concurrency` requests in
    flight, so rps = concurrency × n_ok / Σ e2e. Pass the level's in-flight count implied by its
    own steady-window figure (`level_in_flight`), so each repeat's rps is the level's rps × the
    level's Σ e2e per success ÷ the repeat's: the repeats centre on the level's figure. (The
    achieved concurrency over the whole window counts the ramp and the drain, and biased every
    repeat low.) Counting the completions inside a repeat's own short window instead swings with
    where its edges fall (a level of 16 requests at concurrency 4 read 12–53 req/s); this averages
    the repeat's latencies. None without a finished request."""
    busy = sum(float(e) for e in e2e_s if e is not None)
    n_ok = sum(1 for good in ok if good)
    if busy <= 0 or n_ok == 0 or concurrency <= 0:
        return None
    return concurrency * n_ok / busy


def level_in_flight(level_rps: float | None, e2e_s: Sequence[float | None], ok: Sequence[bool],
                    workers: float) -> float:
    """The requests in flight a closed-loop level's own throughput implies (Little's law the other
    way): level rps × Σ e2e ÷ successes over its measured requests; `workers` when the level has
    no rps or no finished success."""
    busy = sum(float(e) for e in e2e_s if e is not None)
    n_ok = sum(1 for good in ok if good)
    if level_rps is None or level_rps <= 0 or busy <= 0 or n_ok == 0:
        return workers
    return level_rps * busy / n_ok


def repeat_throughput(starts: Sequence[float], ends: Sequence[float], ok: Sequence[bool],
                      e2e_s: Sequence[float | None], amounts: Sequence[float | None], *,
                      in_flight: float | None, per: float = 1.0) -> list[float | None]:
    """Per repeat of a level (requests in start order, cut by `slices`), the rate of `amounts`
    (1 per request: requests/s; output tokens: tok/s; ...) times `per` (60: per minute); []
    when the level is too short to repeat. Only successful requests' amounts count; a repeat
    whose successes carry no amount at all gives None.

    Closed loop (`in_flight`: the requests in flight the level's own rps implies,
    `level_in_flight`): the repeat's rps by Little's law (`closed_loop_rps`) times the mean amount
    of its successes. Open loop (`in_flight` None): Σ amount of the successful requests (of any
    repeat) that finished inside the repeat's window (its first start -> the next repeat's first
    start; the last one to the level's last start, inclusive) over the window's seconds, None
    with fewer than two such completions."""
    parts = slices(list(range(len(starts))))
    out: list[float | None] = []
    if in_flight is not None:
        for part in parts:
            rps = closed_loop_rps([e2e_s[i] for i in part], [ok[i] for i in part], in_flight)
            good = [i for i in part if ok[i]]
            got = [float(a) for i in good if (a := amounts[i]) is not None]
            out.append(None if rps is None or not good or not got else rps * sum(got) / len(good) * per)
        return out
    bounds = [starts[part[0]] for part in parts] + [starts[-1]] if parts else []
    for k in range(len(parts)):
        t_a, t_b = bounds[k], bounds[k + 1]
        last = k + 1 == len(parts)
        done = [i for i in range(len(starts))
                if ok[i] and t_a <= ends[i] and (ends[i] <= t_b if last else ends[i] < t_b)]
        got = [float(a) for i in done if (a := amounts[i]) is not None]
        out.append(sum(got) / (t_b - t_a) * per if t_b > t_a and len(done) >= 2 and got else None)
    return out


def widen(spread: Spread | None, value: float | None) -> Spread | None:
    """`spread` stretched to include the whole level's own figure (a slice's min and max need not
    bracket the figure of all requests together, a percentile in particular)."""
    if spread is None or value is None:
        return spread
    return Spread(min(spread.lo, value), max(spread.hi, value), spread.repeats)


def overlap(a: Sequence[float], b: Sequence[float]) -> bool:
    """True when the two [lo, hi] ranges share a point."""
    (a_lo, a_hi), (b_lo, b_hi) = sorted(a), sorted(b)
    return a_lo <= b_hi and b_lo <= a_hi


def is_tie(base: float, other: float, base_spread: Sequence[float] | None,
           other_spread: Sequence[float] | None) -> bool:
    """True when `other` against `base` is inside the noise: with both spreads measured, the
    two [lo, hi] ranges overlap or the relative difference is under FLOOR_REL; with a spread
    unknown, the relative difference is under UNKNOWN_REL (unmeasured noise is not called
    small)."""
    if base == other:
        return True
    rel = abs(other - base) / abs(base) if base != 0 else float("inf")
    if base_spread is None or other_spread is None:
        return rel < UNKNOWN_REL
    return rel < FLOOR_REL or overlap(base_spread, other_spread)


def describe(spread: Spread | Sequence[float] | None, fmt: Callable[[float], str]) -> str:
    """'3.1–3.4 req/s over 3 repeats' style range text (the Spread's own count of repeats; a
    bare [lo, hi] read back from a report does not carry one), or 'spread not measured'."""
    if spread is None:
        return "spread not measured (too few requests to repeat)"
    if isinstance(spread, Spread):
        return f"{fmt(spread.lo)}–{fmt(spread.hi)} over {spread.repeats} repeats"
    lo, hi = sorted(spread)
    return f"{fmt(lo)}–{fmt(hi)} over the level's repeats"


#: a probe report level, typed or as stored (collectors/probe/report_model.py reads the dict)
LevelLike = TypeVar("LevelLike", Level, dict[str, Any])


def level_p99(level: Level | dict[str, Any], key: str) -> float | None:
    """The p99 (s) of a report level's `key` block (`ttft_s`, `itl_s`; "image": per image)."""
    return Level.of(level).p99(key)


def level_value(level: Level | dict[str, Any]) -> float:
    """The load level of a report level: its concurrency, or its request rate."""
    lv = Level.of(level)
    for v in (lv.concurrency, lv.rate):
        if isinstance(v, (int, float)):
            return float(v)
    return 0.0


def level_misses(level: Level | dict[str, Any], slo: dict[str, float], *, image: bool) -> list[str]:
    """What a report level misses of the SLO targets, one phrase each (empty: it meets them)."""
    lv = Level.of(level)
    misses = []
    checks = [("image_p99_s", "image", "per-image p99")] if image else list(LATENCY_TARGETS)
    for target_key, report_key, label in checks:
        target = slo.get(target_key)
        if target is None:
            continue
        value = lv.p99(report_key)
        if value is None:
            misses.append(f"{label} not measured")
        elif value > target:
            misses.append(f"{label} {value * 1000:.0f} ms > {target * 1000:.0f} ms")
    want_ok = slo.get("success_rate")
    rate = lv.success_rate
    if want_ok is not None and (rate is None or float(rate) < want_ok):
        misses.append(f"success rate {float(rate or 0) * 100:.1f} % < {want_ok * 100:.1f} %")
    return misses


def goodput(levels: Sequence[LevelLike], slo: dict[str, float], *, image: bool
            ) -> tuple[LevelLike | None, str]:
    """(the highest level meeting the SLO or None, why none does: the misses of the lowest); the
    level given back is the one passed in."""
    ordered = sorted(levels, key=level_value)
    best = None
    for lv in ordered:
        if not level_misses(lv, slo, image=image):
            best = lv
    if best is not None:
        return best, ""
    if not ordered:
        return None, "no load level was measured"
    low = ordered[0]
    return None, f"no load level meets the SLO (at {level_value(low):g}: {'; '.join(level_misses(low, slo, image=image))})"
