"""Pure rule evaluation: stored observations in, a `Verdict` out (no I/O; runner/alerts/engine.py
reads the rows and feeds them here, tests feed recorded data).

Burn rate (SRE workbook, "Alerting on SLOs", multi-window multi-burn-rate): a request is bad when
it failed (success_rate) or took longer than the target (ttft_p99_s on LLM TTFT, image_p99_s on an
image request's e2e; failed requests do not count there). The error budget is the fraction of
bad requests the SLO allows: 1 - target for success_rate, 0.01 for a p99 target. The burn rate of
a window is (bad / all) / budget; the alert is active while BOTH the short and the long window burn
faster than the factor (fast: 5 min and 1 h > 14.4; slow: 30 min and 6 h > 6). Requiring both
keeps it quiet on a single slow request and lets it resolve quickly once the short window is clean.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

P99_BUDGET = 0.01  # a p99 target lets 1 % of requests be slower
_OPS: dict[str, Callable[[float, float], bool]] = {">": operator.gt, ">=": operator.ge, "<": operator.lt,
                                                   "<=": operator.le}


@dataclass(frozen=True)
class Verdict:
    active: bool
    value: float | None  # the figure behind it (burn rate, aggregate, count, seconds silent)
    summary: str  # one sentence with the figure and the target
    known: bool = True  # False: nothing to judge (no sample in the window): the alert keeps its state


@dataclass(frozen=True)
class Outcome:
    """One probe or canary request: when it started, whether it was bad for the SLO."""

    ts: float
    bad: bool


def outcomes_for(slo: str, target: float, rows: Sequence[tuple[float, bool, float | None, float | None]],
                 ) -> list[Outcome]:
    """(ts, ok, ttft_s, e2e_s) rows -> Outcomes for one SLO (see the module docstring)."""
    out = []
    for ts, ok, ttft, e2e in rows:
        if slo == "success_rate":
            out.append(Outcome(ts, not ok))
        elif ok:
            figure = ttft if slo == "ttft_p99_s" else e2e
            if figure is not None:
                out.append(Outcome(ts, figure > target))
    return out


def error_budget(slo: str, target: float) -> float:
    return max(1.0 - target, 1e-9) if slo == "success_rate" else P99_BUDGET


def burn_rate(outcomes: Sequence[Outcome], *, now: float, window_s: float, budget: float) -> float | None:
    """(bad / all) / budget over [now - window_s, now]; None without a request in the window."""
    inside = [o for o in outcomes if now - window_s <= o.ts <= now]
    if not inside:
        return None
    return sum(o.bad for o in inside) / len(inside) / budget


def multiwindow(outcomes: Sequence[Outcome], *, now: float, short_s: float, long_s: float, factor: float,
                budget: float, what: str) -> Verdict:
    """Active while both windows burn faster than `factor`; value = the short window's burn."""
    short = burn_rate(outcomes, now=now, window_s=short_s, budget=budget)
    long = burn_rate(outcomes, now=now, window_s=long_s, budget=budget)
    if short is None or long is None:
        return Verdict(False, None, f"{what}: no probe or canary request in the last {short_s / 60:.0f} min")
    active = short > factor and long > factor
    return Verdict(active, short, f"{what} burns its error budget {short:.1f}x ({short_s / 60:.0f} min) and "
                                  f"{long:.1f}x ({long_s / 60:.0f} min); alert above {factor:g}x in both")


def aggregate(values: Sequence[float], agg: str) -> float | None:
    if not len(values):
        return None
    if agg == "last":
        return float(values[-1])
    if agg == "max":
        return float(max(values))
    if agg == "min":
        return float(min(values))
    return float(sum(values) / len(values))


def threshold(values: Sequence[float], *, agg: str, op: str, value: float, what: str) -> Verdict:
    """The window's aggregate against `value`. No sample in the window is no verdict (`known`
    False): a firing alert stays firing and a pending one pending until a sample says otherwise,
    so a sampler slowed by the incident itself (a canary whose requests take longer than the
    window) does not resolve and re-fire the alert with every gap; a server that sends nothing at
    all is the `no_sample` rule's."""
    figure = aggregate(values, agg)
    if figure is None:
        return Verdict(False, None, f"{what}: no sample in the window", known=False)
    return Verdict(_OPS[op](figure, value), figure, f"{what} {agg} is {figure:.4g} (alert when {op} {value:g})")


def latest_event(events: Sequence[tuple[float, str]], raise_kinds: Sequence[str], clear_kinds: Sequence[str],
                 *, now: float, window_s: float, inhibited: Callable[[float], bool], what: str) -> Verdict:
    """Active while the newest raising event (not inhibited, within window_s) has no clearing
    event after it. `events` are (ts, kind), any order."""
    raised = [ts for ts, kind in events if kind in raise_kinds and now - ts <= window_s and not inhibited(ts)]
    if not raised:
        return Verdict(False, None, f"{what}: none in the last {window_s / 60:.0f} min")
    last = max(raised)
    cleared = any(kind in clear_kinds and ts >= last for ts, kind in events)
    ago = now - last
    return Verdict(not cleared, float(len(raised)), f"{what}: {len(raised)} in the last {window_s / 60:.0f} min, "
                                                    f"newest {ago:.0f} s ago" + (" (cleared since)" if cleared else ""))


def event_rate(timestamps: Sequence[float], *, now: float, window_s: float, rate_per_min: float, what: str) -> Verdict:
    n = sum(1 for ts in timestamps if now - window_s <= ts <= now)
    rate = n / (window_s / 60.0)
    return Verdict(rate > rate_per_min, rate, f"{what}: {rate:.1f}/min over {window_s / 60:.0f} min "
                                              f"(alert above {rate_per_min:g}/min)")


def silent_for(newest_ts: float | None, *, now: float, limit_s: float, what: str) -> Verdict:
    """Dead man's switch: active when nothing arrived for more than limit_s seconds."""
    if newest_ts is None:
        return Verdict(True, None, f"{what}: nothing in the last {limit_s:.0f} s (alert after {limit_s:.0f} s)")
    gap = now - newest_ts
    return Verdict(gap > limit_s, gap, f"{what}: newest {gap:.0f} s ago (alert after {limit_s:.0f} s)")
