"""The spread of a figure over repeats of a level, and the tie rule (collectors/probe/stats.py)."""

from __future__ import annotations

from collectors.probe.stats import (
    FLOOR_REL,
    UNKNOWN_REL,
    Spread,
    describe,
    is_tie,
    slices,
    spread_of,
    widen,
)


def test_slices_cut_in_start_order_and_refuse_too_few() -> None:
    # 10 items in 3 slices: bounds round(0), round(3.33)=3, round(6.67)=7, 10 -> 3, 4, 3 items
    assert slices(list(range(10))) == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]
    assert slices(list(range(8))) == []  # 8 < 3 slices x 3 requests: no spread, not a fake one


def test_spread_is_min_and_max_of_the_slices_and_widens_to_the_whole_figure() -> None:
    values = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0]

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    s = spread_of(values, mean)
    assert s is not None and (s.lo, s.hi, s.repeats) == (1.0, 4.0, 3)
    w = widen(spread_of(values, mean), 5.0)
    assert w is not None and (w.lo, w.hi) == (1.0, 5.0)
    assert spread_of(values, lambda xs: None) is None  # no slice gave a value


def test_overlapping_spreads_are_a_tie_and_separate_ones_are_not() -> None:
    # 5.96 vs 5.95 req/s with ranges 5.7-6.2 and 5.6-6.1: inside the noise
    assert is_tie(5.95, 5.96, [5.6, 6.1], [5.7, 6.2])
    # 5.0 vs 8.0 with ranges that do not meet: a real difference
    assert not is_tie(5.0, 8.0, [4.8, 5.2], [7.7, 8.3])


def test_without_a_spread_only_the_floor_calls_a_tie() -> None:
    assert is_tie(100.0, 100.0 * (1 + FLOOR_REL / 2), None, None)
    assert not is_tie(100.0, 110.0, None, [105.0, 115.0])
    # unmeasured noise is not called small: 6.0 vs 5.9 req/s (1.7 %) crowns nothing
    assert is_tie(6.0, 5.9, None, None) and is_tie(6.0, 5.9, [5.99, 6.01], None)
    assert not is_tie(100.0, 100.0 * (1 + UNKNOWN_REL), None, None)
    # both measured, apart and 1.7 % different: a verdict; under the 1 % floor: a tie
    assert not is_tie(6.0, 5.9, [5.99, 6.01], [5.89, 5.91])
    assert is_tie(6.0, 5.95, [5.99, 6.01], [5.94, 5.96])


def test_describe_counts_the_spreads_own_repeats() -> None:
    assert describe(Spread(3.1, 3.4, 2), lambda v: f"{v:.1f} req/s") == "3.1 req/s–3.4 req/s over 2 repeats"
    assert "over 3 repeats" not in describe([3.1, 3.4], str)


def test_closed_loop_repeats_centre_on_the_levels_own_rps() -> None:
    """Concurrency 8, requests of 0.8-1.2 s: the repeats' rps lie either side of the level's own
    steady-window figure, in the probe report and the scorecard alike. The achieved concurrency
    over the whole window (ramp and drain included) put every repeat below it."""
    import heapq

    import pandas as pd

    from collectors.probe.client import RequestRecord
    from collectors.probe.pacing import LevelPlan, LevelResult
    from collectors.probe.report import level_report
    from scorecard.compute import _in_flight, level_figures, level_spread

    workers, recs = [0.0] * 8, []
    for i in range(32):
        t, d = heapq.heappop(workers), 0.8 + 0.4 * ((i * 7) % 11) / 10
        recs.append(RequestRecord(level=8, seq=i, warmup=i < 8, t_start=t, t_end=t + d,
                                  start_ts=1000.0 + t, e2e_s=d, ttft_s=0.1, itl_s=[0.01] * 5,
                                  tokens_out=20, tokens_in=10, ok=True))
        heapq.heappush(workers, t + d)
    lv = level_report(LevelResult(plan=LevelPlan(mode="concurrency", value=8, requests=24, warmup=8),
                                  records=recs, loop_lag_s=[0.001], cpu_pct=5)).to_dict()
    lo, hi = lv["spread"]["rps"]
    assert lo < lv["throughput"]["rps"] < hi
    df = pd.DataFrame([{"start_ts": r.start_ts, "e2e_s": r.e2e_s, "ok": r.ok, "ttft_s": r.ttft_s,
                        "tpot_s": None, "itl_s": r.itl_s, "tokens_in": 10, "tokens_out": 20,
                        "warmup": r.warmup} for r in recs])
    rows, warm = df[~df.warmup], df[df.warmup]
    kw = dict(kind="llm", images_per_request=1, gpu_usd_per_hour=None,
              warm_ends=(warm.start_ts + warm.e2e_s).tolist(), closed_loop=True)
    figs = level_figures(rows, **kw)
    spread = level_spread(rows, figs, _in_flight(rows, figs, 8.0), **kw)
    assert spread["rps"][0] < figs["rps"] < spread["rps"][1]
