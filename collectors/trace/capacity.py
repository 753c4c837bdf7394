"""`--speed auto`: the highest speed-up of a trace a server serves within its SLO.

A replay at speed s meets the SLO when its p99 TTFT and p99 ITL (per-image p99, its E2E, for image
traces) are within `[slo]` and its success rate is at least the target, and the replay itself is
trusted (its schedule lag within bound: an overloaded client says nothing of the server). The
search:

1. **Grow** from `start` by `grow`x until a speed fails (or `max_speed` is met); a start that
   already fails shrinks by the same factor until one meets (or `min_speed` fails too: no speed
   of this trace meets the SLO, said so).
2. **Bisect** in log space between the highest speed that met and the lowest that failed until
   they are within `resolution` (10 %) of each other.
A trial the client could not keep to its schedule (not trusted) is run once more. A second one
that is not trusted ends the search there (`client_bound`, that speed): a replay sent late says
nothing of the server, so it is neither a miss (a descent from it would blame the server for a
busy client and call a fine server slow) nor a pass. What was measured before stands: the knee is
at least the highest speed that met (`capped`) or lies in the bracket found so far; with no speed
met yet, nothing is known of the server.

3. **Repeat** the bisection `repeats` times inside the first bracket: each repeat ends with a
   speed that met and one that failed, within `resolution` of each other; the knee is the median
   of the speeds that met, and its interval runs from the lowest speed that met to the highest that
   failed: "holds 2.3x (2.1-2.6x) of trace tuesday within its SLO". Load is noisy near a knee (one
   search alone would hide how much), and a search knows the knee only to its resolution (three
   searches that agree still leave the knee somewhere in their last bracket).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collectors.probe.stats import level_misses

Measure = Callable[[float], dict[str, Any]]


def misses(rep: dict[str, Any], slo: dict[str, float], *, image: bool = False) -> list[str]:
    """What a replay report misses of the SLO, one phrase each (empty: it meets it): the sweep's
    rule (collectors/probe/stats.py `level_misses`; an image trace's per-image latency is its
    E2E), and a replay the client could not keep to its schedule."""
    level = {**rep, "image": {"per_image_s": rep.get("e2e_s") or {}}} if image else rep
    out = level_misses(level, slo, image=image)
    if not rep.get("trusted", True):
        out.append("the client fell behind its schedule (not trusted)")
    return out


@dataclass(slots=True)
class Step:
    speed: float
    meets: bool
    why: list[str]
    run_id: int | None = None


@dataclass(slots=True)
class Capacity:
    knee: float | None  # median of the repeats' knees (the highest speed each found to meet); None: none met
    low: float | None  # the lowest of those knees
    high: float | None  # the highest speed a repeat found to fail next to its knee (capped: the knee)
    knees: list[float] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    capped: bool = False  # max_speed (or the client's limit) met the SLO: the knee is at least this, not found
    client_bound: float | None = None  # the speed the client could not keep to its schedule at (the search ended)

    def sentence(self, server: str, trace: str) -> str:
        return self._measured(server, trace) + (
            f"; the search stopped at {self.client_bound:.3g}x, where the client fell behind the trace's schedule "
            "twice (a late replay says nothing of the server): run it from a less busy host"
            if self.client_bound is not None else "")

    def _measured(self, server: str, trace: str) -> str:
        if self.knee is None and self.client_bound is not None:
            missed = self.steps[-2] if len(self.steps) > 1 else None  # the last is the speed the client gave out at
            return (f"{server} misses its SLO at {missed.speed:.3g}x of trace {trace} ({'; '.join(missed.why)}); "
                    "no slower speed was measured" if missed else f"{server}: nothing measured of trace {trace}")
        if self.knee is None:
            worst = self.steps[-1] if self.steps else None
            return (f"{server} meets its SLO at no speed of trace {trace} tried (down to {worst.speed:g}x: "
                    f"{'; '.join(worst.why)})" if worst else f"{server}: nothing measured")
        if self.capped:
            fastest = "the fastest measured" if self.client_bound is not None else "the fastest tried"
            return f"{server} holds at least {self.knee:.3g}x of trace {trace} within its SLO ({fastest})"
        return (f"{server} holds {self.knee:.2g}x ({self.low:.2g}-{self.high:.2g}x) of trace {trace} within its SLO "
                f"(median of {len(self.knees)} searches; the interval runs to the speed that failed)")


def search(measure: Measure, slo: dict[str, float], *, image: bool = False, start: float = 1.0, grow: float = 2.0,
           max_speed: float = 1024.0, min_speed: float = 1 / 64, resolution: float = 0.10, repeats: int = 3) -> Capacity:
    steps: list[Step] = []

    def trial(speed: float) -> bool | None:
        """Whether `speed` meets the SLO; None when the client fell behind twice (the search ends)."""
        rep = measure(speed)
        if not rep.get("trusted", True):  # the client fell behind: that says nothing of the server, try again
            rep = measure(speed)
        why = misses(rep, slo, image=image)
        steps.append(Step(speed=speed, meets=not why, why=why, run_id=rep.get("run_id")))
        return None if not rep.get("trusted", True) else not why

    def stopped(speed: float, lo: float | None, hi: float | None, knees: list[float], fails: list[float]) -> Capacity:
        """Where the client gave out at `speed`: what was measured before stands."""
        if lo is None:
            return Capacity(knee=None, low=None, high=None, steps=steps, client_bound=speed)
        if hi is None:  # still growing: at least what met last
            return Capacity(knee=lo, low=lo, high=lo, knees=[lo], steps=steps, capped=True, client_bound=speed)
        if not knees:  # stopped in the first bisection: its bracket is what was measured
            knees, fails = [lo], [hi]
        # a later repeat cut short knows no more than its starting bracket: the finished ones stand
        return Capacity(knee=statistics.median(knees), low=min(knees), high=max(fails), knees=knees, steps=steps,
                        client_bound=speed)

    lo: float | None = None
    hi: float | None = None
    speed = start
    met = trial(speed)
    if met is None:
        return stopped(speed, None, None, [], [])
    if met:
        lo = speed
        while lo < max_speed:
            speed = min(lo * grow, max_speed)
            met = trial(speed)
            if met is None:
                return stopped(speed, lo, None, [], [])
            if met:
                lo = speed
            else:
                hi = speed
                break
        if hi is None:
            return Capacity(knee=lo, low=lo, high=lo, knees=[lo], steps=steps, capped=True)
    else:
        hi = speed
        while hi > min_speed:
            speed = max(hi / grow, min_speed)
            met = trial(speed)
            if met is None:
                return stopped(speed, None, hi, [], [])
            if met:
                lo = speed
                break
            hi = speed
        if lo is None:
            return Capacity(knee=None, low=None, high=None, steps=steps)
    knees: list[float] = []
    fails: list[float] = []
    for _ in range(max(1, repeats)):
        a, b = lo, hi
        while b / a > 1 + resolution:
            mid = math.sqrt(a * b)
            met = trial(mid)
            if met is None:
                return stopped(mid, a, b, knees, fails)
            if met:
                a = mid
            else:
                b = mid
        knees.append(a)
        fails.append(b)
    return Capacity(knee=statistics.median(knees), low=min(knees), high=max(fails), knees=knees, steps=steps)
