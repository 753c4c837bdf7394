"""The measured spread of a figure, and the one rule that calls two figures a tie.

A load level is measured once per sweep, but a verdict needs to know how much a figure moves when
nothing changed. The level's measured requests, in start order, are cut into `REPEATS`
consecutive slices. Each slice ran under the same load (closed loop: the same number of workers;
open loop: the same rate), so each is a repeat of the level. The figure computed on each slice
gives `REPEATS` values; the spread is their [min, max], together with the whole level's figure.

A slice needs `MIN_PER_SLICE` requests; a level with fewer than `REPEATS × MIN_PER_SLICE`
measured requests has no spread (None): the verdict then says the spread is unknown, it never
pretends the level was repeated.

Two figures are a **tie** when their spreads overlap or they differ by less than `FLOOR_REL` of
the baseline (a floor below which no verdict is made even with a narrow spread), or, where
either spread is unknown, when they differ by less than `UNKNOWN_REL` (5 %). Cross-check: `pitwall probe ... --json` prints each level's
`spread` block; a tie's two [lo, hi] ranges share a point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

REPEATS = 3
MIN_PER_SLICE = 3
#: below this relative difference no verdict is made even when both spreads are narrower
FLOOR_REL = 0.01
#: with either spread not measured, a relative difference under this is a tie: the noise is
#: unknown, so a small difference crowns nothing
UNKNOWN_REL = 0.05

T = TypeVar("T")


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
