"""Each probe figure computed once (collectors/probe/stats.py): the probe report and the
scorecard read a level's spread with the same rule and give the same numbers."""

from __future__ import annotations

import pandas as pd
import pytest

from collectors.probe.client import RequestRecord
from collectors.probe.pacing import LevelPlan, LevelResult
from collectors.probe.report import level_report
from scorecard.compute import _in_flight, level_figures, level_spread


def _rec(seq: int, start: float, e2e: float, *, ok: bool = True, tokens: int = 10) -> RequestRecord:
    return RequestRecord(level=4, seq=seq, warmup=False, t_start=start, t_end=start + e2e,
                         ttft_s=e2e / 4 if ok else None, e2e_s=e2e, itl_s=[e2e / 20] * 3 if ok else [],
                         tokens_out=tokens if ok else None, tpot_s=e2e / 20 if ok else None, ok=ok,
                         error_kind=None if ok else "timeout")


def _rows(recs: list[RequestRecord]) -> pd.DataFrame:
    """The records as the scorecard reads them back from ProbeRequest rows."""
    return pd.DataFrame([{"start_ts": r.t_start, "e2e_s": r.e2e_s, "ok": r.ok, "tokens_in": 5,
                          "tokens_out": r.tokens_out, "ttft_s": r.ttft_s, "tpot_s": r.tpot_s,
                          "itl_s": r.itl_s} for r in recs])


def test_an_open_loops_spread_is_the_same_in_the_probe_report_and_the_scorecard() -> None:
    # open loop at 4 req/s: starts every 0.25 s (0 .. 2.75), 12 requests, seq 5 fails; ends
    # 0.3 0.75 0.9 | 1.65 2.2 (2.05 failed) 1.85 | 2.2 2.6 2.75 2.8 3.15. Repeats of 4 in start
    # order, each read over its own window (first start -> next repeat's first start, the last
    # to the last start), counting the successes that finished inside it:
    #   [0, 1): 0.3 0.75 0.9 -> 3 req/s, tokens 10+11+12 = 33 tok/s
    #   [1, 2): 1.65 1.85 -> 2 req/s, tokens 13+16 = 29 tok/s
    #   [2, 2.75]: 2.2 2.2 2.6 2.75 -> 4 / 0.75 = 5.33 req/s, tokens 14+17+18+19 = 68 / 0.75
    # The scorecard read each repeat's own steady window instead and gave rps [2.5, 3.27]
    # (output tok/s [28.0, 49.3]): the two paths disagreed; now both give the report's.
    lat = [0.3, 0.5, 0.4, 0.9, 1.2, 0.8, 0.35, 0.45, 0.6, 0.5, 0.3, 0.4]
    recs = [_rec(i, i * 0.25, d, ok=i != 5, tokens=10 + i) for i, d in enumerate(lat)]
    res = LevelResult(LevelPlan("rate", 4.0, requests=12, warmup=0), records=recs,
                      loop_lag_s=[0.001], cpu_pct=5.0, wall_s=4.0)
    report = level_report(res).to_dict()["spread"]
    assert report["rps"] == pytest.approx([2.0, 4 / 0.75])
    assert report["output_tok_s"] == pytest.approx([29.0, 68 / 0.75])
    kw = {"kind": "llm", "images_per_request": 1, "gpu_usd_per_hour": 2.0, "warm_ends": [],
          "closed_loop": False}
    rows = _rows(recs)
    figs = level_figures(rows, **kw)
    card = level_spread(rows, figs, None, **kw)
    for key in ("rps", "output_tok_s", "ttft_p99_s", "itl_p99_s", "e2e_p99_s"):
        assert card[key] == report[key], key
    # input tokens (5 a request) by the same rule: 15, 10, 20 / 0.75 tok/s
    assert card["input_tok_s"] == pytest.approx([10.0, 20 / 0.75])
    # the cost divides the price by the same repeats' throughput: 2 USD/h / 3600 / tok/s x 1e6
    assert card["usd_per_1m_output_tok"] == pytest.approx([2 / 3600 / (68 / 0.75) * 1e6, 2 / 3600 / 29 * 1e6])


def test_a_closed_loops_spread_is_the_same_in_the_probe_report_and_the_scorecard() -> None:
    # concurrency 1, back to back: 1 s, 1 s, 1 s | 0.5 s x 3 | 1 s x 3 (the report test's level).
    # In flight by the level's own rps: 8 ends in [0, 6.5] -> 8 / 6.5 req/s x 7.5 s / 9 = 1.026;
    # the repeats read 1.026 x 3 / 3 s, x 3 / 1.5 s, x 3 / 3 s.
    recs, t = [], 0.0
    for seq, d in enumerate([1.0] * 3 + [0.5] * 3 + [1.0] * 3):
        recs.append(_rec(seq, t, d))
        t += d
    res = LevelResult(LevelPlan("concurrency", 1, requests=9, warmup=0), records=recs,
                      loop_lag_s=[0.001], cpu_pct=5.0, wall_s=t)
    report = level_report(res).to_dict()["spread"]
    in_flight = 8 / 6.5 * 7.5 / 9
    assert report["rps"] == pytest.approx([in_flight, 2 * in_flight])
    kw = {"kind": "llm", "images_per_request": 1, "gpu_usd_per_hour": None, "warm_ends": [],
          "closed_loop": True}
    rows = _rows(recs)
    figs = level_figures(rows, **kw)
    card = level_spread(rows, figs, _in_flight(rows, figs, 1.0), **kw)
    for key in ("rps", "output_tok_s", "ttft_p99_s", "itl_p99_s", "e2e_p99_s"):
        assert card[key] == report[key], key
