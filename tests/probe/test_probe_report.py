"""Exact per-level statistics, self-check, JSON shape, fingerprint diff, output consistency."""

from __future__ import annotations

import pytest

from collectors.probe.client import RequestRecord
from collectors.probe.consistency import compare_outputs, consistency_warnings
from collectors.probe.fingerprint import diff_fingerprints, fingerprint_detail, fingerprint_hash
from collectors.probe.pacing import LevelPlan, LevelResult
from collectors.probe.report import level_report, public_report, self_check
from collectors.probe.stats import stats
from collectors.probe.workloads import WorkloadSpec, build_prompts


def test_stats_hand_computed() -> None:
    # values 0.1 .. 1.0 (10 values). numpy linear: rank = q/100 * (n-1) = q * 0.09
    # p50: rank 4.5 -> (0.5 + 0.6)/2 = 0.55; p95: rank 8.55 -> 0.9 + 0.55*0.1 = 0.955
    # p99: rank 8.91 -> 0.9 + 0.91*0.1 = 0.991; mean 0.55; max 1.0
    s = stats([i / 10 for i in range(10, 0, -1)])
    assert s["p50"] == pytest.approx(0.55)
    assert s["p95"] == pytest.approx(0.955)
    assert s["p99"] == pytest.approx(0.991)
    assert s["mean"] == pytest.approx(0.55)
    assert s["max"] == pytest.approx(1.0)
    assert stats([]) == {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}


def _rec(seq: int, ok: bool, ttft: float, e2e: float, start: float, itl: list[float],
         warm: bool = False, kind: str | None = None) -> RequestRecord:
    return RequestRecord(level=2, seq=seq, warmup=warm, t_start=start, t_end=start + e2e,
                         ttft_s=ttft if ok else None, e2e_s=e2e, itl_s=itl, tokens_out=len(itl) + 1 if ok else None,
                         tpot_s=(sum(itl) / len(itl)) if ok and itl else None, ok=ok, error_kind=kind)


def test_level_report_from_records() -> None:
    # warm-up (seq 0) is excluded even though it is slow; seq 3 failed (timeout).
    recs = [
        _rec(0, True, 9.0, 9.0, 0.0, [9.0], warm=True),
        _rec(1, True, 0.1, 0.5, 1.0, [0.2, 0.2]),        # ends 1.5
        _rec(2, True, 0.3, 1.0, 1.2, [0.4]),             # ends 2.2
        _rec(3, False, 0.0, 2.0, 1.4, [], kind="timeout"),  # ends 3.4
    ]
    res = LevelResult(LevelPlan("concurrency", 2, requests=3, warmup=1), records=recs,
                      loop_lag_s=[0.001] * 100, cpu_pct=20.0, wall_s=4.0)
    lv = level_report(res).to_dict()
    assert (lv["concurrency"], lv["requests"], lv["ok"]) == (2, 3, 2)
    assert lv["errors"] == {"timeout": 1}
    # TTFT over ok measured requests [0.1, 0.3]: p50 0.2, max 0.3
    assert lv["ttft_s"]["p50"] == pytest.approx(0.2) and lv["ttft_s"]["max"] == pytest.approx(0.3)
    # ITL pooled [0.2, 0.2, 0.4]: p50 0.2, mean 0.8/3
    assert lv["itl_s"]["p50"] == pytest.approx(0.2) and lv["itl_s"]["mean"] == pytest.approx(0.8 / 3)
    # window: first measured start 1.0 -> last end 3.4 = 2.4 s; 2 ok -> rps 2/2.4
    assert lv["throughput"]["rps"] == pytest.approx(2 / 2.4)
    # output tokens 3 + 2 = 5 over 2.4 s
    assert lv["throughput"]["output_tok_s"] == pytest.approx(5 / 2.4)
    # achieved concurrency = sum e2e (0.5 + 1.0 + 2.0) / 2.4
    assert lv["achieved"]["concurrency"] == pytest.approx(3.5 / 2.4)
    assert lv["success_rate"] == pytest.approx(2 / 3)
    pub = public_report({"fingerprint": "abc", "levels": [lv]})
    assert set(pub) == {"fingerprint", "levels"}
    assert set(pub["levels"][0]) == {"concurrency", "requests", "ok", "errors", "ttft_s", "itl_s",
                                     "tpot_s", "e2e_s", "throughput", "self_check", "spread"}
    assert set(pub["levels"][0]["throughput"]) == {"rps", "output_tok_s"}
    assert set(pub["levels"][0]["self_check"]) == {"loop_lag_p99_s", "client_cpu_pct", "trusted"}
    assert set(pub["levels"][0]["ttft_s"]) == {"p50", "p95", "p99", "mean", "max"}


def test_self_check_thresholds() -> None:
    assert self_check([0.001] * 100, 50.0).trusted is True  # 1 ms: under the 2 ms floor
    lagged = self_check([0.001] * 90 + [0.02] * 10, 10.0)  # p99 = 20 ms > the 2 ms floor
    assert lagged.trusted is False and "lag" in lagged.reasons[0]
    assert "overloaded" not in lagged.reasons[0]  # a lagging loop is not a busy CPU
    busy = self_check([0.0] * 10, 85.0)
    assert busy.trusted is False and "CPU" in busy.reasons[0] and "overloaded" in busy.reasons[0]
    assert self_check([0.0] * 10, 5.0).trusted is True  # 5 % CPU is no reason at all


def _lag_level(e2e: float, ttft: float | None, lag: float) -> dict:
    recs = [RequestRecord(level=1, seq=i, warmup=False, t_start=i * e2e, t_end=(i + 1) * e2e,
                          ttft_s=ttft, e2e_s=e2e, ok=True) for i in range(10)]
    res = LevelResult(LevelPlan("concurrency", 1, requests=10, warmup=0), records=recs,
                      loop_lag_s=[lag] * 100, cpu_pct=5.0, wall_s=10 * e2e)
    return level_report(res).to_dict()["self_check"]


def test_self_check_is_relative_to_the_latency_it_measures() -> None:
    # 5 ms of loop lag on 5 s image requests: bound max(2 ms, 5 % x 5 s = 250 ms) -> trusted
    slow = _lag_level(5.0, None, 0.005)
    assert slow["trusted"] is True, slow["reasons"]
    assert slow["lag_bound_s"] == pytest.approx(0.25) and slow["lag_basis"] == "E2E p50"
    # the same 5 ms on 10 ms TTFTs: bound max(2 ms, 5 % x 10 ms = 0.5 ms) = 2 ms -> not trusted
    fast = _lag_level(0.05, 0.010, 0.005)
    assert fast["trusted"] is False and fast["lag_basis"] == "TTFT p50"
    assert fast["lag_bound_s"] == pytest.approx(0.002)
    assert fast["reasons"] == ["client event-loop lag p99 5.0 ms > 2.0 ms (5% of TTFT p50 10.0 ms, "
                               "at least 2 ms)"]
    # microsecond noise never counts, even on sub-millisecond requests (the floor)
    assert _lag_level(0.0005, 0.0002, 0.0015)["trusted"] is True


def _detail(**over: object) -> dict:
    wl = WorkloadSpec(**over)  # type: ignore[arg-type]
    return fingerprint_detail(api="generate", model="m", workload=wl, prompts=build_prompts(wl),
                              mode="concurrency", levels=[1, 4], requests_per_level=[50, 50],
                              warmup_per_level=[1, 4])


def test_fingerprint_stable_and_diff() -> None:
    a, b = _detail(), _detail()
    assert fingerprint_hash(a) == fingerprint_hash(b) and diff_fingerprints(a, b) == []
    c = _detail(temperature=0.7, max_new_tokens=64)
    assert fingerprint_hash(c) != fingerprint_hash(a)
    assert diff_fingerprints(a, c) == ["max_new_tokens: 128 -> 64", "sampling.temperature: 0.0 -> 0.7"]
    d = _detail(prompt_set="synthetic", input_tokens=16)
    diffs = diff_fingerprints(a, d)
    assert any(x.startswith("prompts_hash:") for x in diffs) and any(x.startswith("input_lengths.words.p50") for x in diffs)


def test_compare_outputs_counts_differences() -> None:
    # 2 prompts. baseline: prompt 0 -> "h0" (twice), prompt 1 -> "h1".
    base = [(0, True, "h0"), (1, True, "h1"), (2, True, "h0"), (3, False, None)]
    # current: seq 0 (p0) same, seq 1 (p1) differs, seq 2 (p0) differs, seq 3 failed (not compared)
    cur = [(0, True, "h0"), (1, True, "XX"), (2, True, "YY"), (3, False, None)]
    assert compare_outputs(base, cur, 2) == {"compared": 3, "differing": 2, "prompts_compared": 2, "prompts_differing": 2}
    assert consistency_warnings({"prompts_hash": "a", "sampling": {"temperature": 0.0}},
                                {"prompts_hash": "a", "sampling": {"temperature": 0.0}}) == []
    assert len(consistency_warnings({"prompts_hash": "a", "sampling": {"temperature": 0.0}},
                                    {"prompts_hash": "b", "sampling": {"temperature": 1.0}})) == 2


def test_throughput_uses_steady_window() -> None:
    # closed loop c=2, warm-up seq 0/1 end at 1.0 and 1.2; measured requests (start, end):
    # seq2 (1.0, 2.0), seq3 (1.2, 2.2), seq4 (2.0, 3.0), seq5 (2.2, 3.2), seq6 (3.0, 4.0)
    # steady window: last warm-up end 1.2 -> last measured start 3.0 = 1.8 s
    # finished inside it: seq2 (2.0), seq3 (2.2), seq4 (3.0) -> 3 / 1.8 rps; tokens 3 x 3 / 1.8
    spans = [(0.0, 1.0, True), (0.2, 1.2, True), (1.0, 2.0, False), (1.2, 2.2, False),
             (2.0, 3.0, False), (2.2, 3.2, False), (3.0, 4.0, False)]
    recs = [_rec(i, True, 0.1, e - s, s, [0.1, 0.1], warm=w) for i, (s, e, w) in enumerate(spans)]
    res = LevelResult(LevelPlan("concurrency", 2, requests=5, warmup=2), records=recs,
                      loop_lag_s=[0.0], cpu_pct=1.0, wall_s=4.0)
    lv = level_report(res).to_dict()
    assert lv["steady_window_s"] == pytest.approx(1.8)
    assert lv["throughput"]["rps"] == pytest.approx(3 / 1.8)
    assert lv["throughput"]["output_tok_s"] == pytest.approx(9 / 1.8)
    # achieved concurrency uses the whole measured window: 5 x 1.0 s busy / (1.0 -> 4.0 = 3.0 s)
    assert lv["achieved"]["concurrency"] == pytest.approx(5 / 3)


def test_benchmarks_and_scorecard_share_one_throughput_definition() -> None:
    """The probe report (Benchmarks) and the scorecard's level figures count the same requests
    over the same steady window: warm-up ends at 2.0, the last measured start is 6.5, so requests
    finishing in [2, 6.5] count over 4.5 s (ramp and drain excluded), in both."""
    import pandas as pd

    from scorecard.compute import level_figures

    recs = [_rec(0, True, 0.1, 2.0, 0.0, [0.1], warm=True)] + [
        _rec(i, True, 0.1, 1.5, 0.5 + i, [0.1] * i) for i in range(1, 7)]  # starts 1.5 .. 6.5
    res = LevelResult(LevelPlan("concurrency", 2, requests=6, warmup=1), records=recs,
                      loop_lag_s=[0.001] * 100, cpu_pct=20.0, wall_s=8.0)
    report = level_report(res).to_dict()["throughput"]
    rows = pd.DataFrame([{"start_ts": r.t_start, "e2e_s": r.e2e_s, "ok": r.ok, "tokens_in": 1, "tokens_out": r.tokens_out,
                          "ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "itl_s": r.itl_s} for r in recs if not r.warmup])
    card = level_figures(rows, kind="llm", images_per_request=1, gpu_usd_per_hour=None, warm_ends=[2.0])
    # ends 3.0, 4.0, 5.0, 6.0 fall in [2.0, 6.5]: 4 requests over 6.5 - 2.0 = 4.5 s
    assert report["rps"] == pytest.approx(4 / 4.5) and card["rps"] == pytest.approx(report["rps"])
    assert card["output_tok_s"] == pytest.approx(report["output_tok_s"])


def test_untrusted_levels_are_said_once_per_run_with_the_measured_lag_and_its_bound() -> None:
    from collectors.probe.report import format_table
    from collectors.probe.trust import run_note

    ok = _lag_level(5.0, None, 0.005)  # 5 ms on 5 s: trusted
    late = _lag_level(0.05, 0.010, 0.005)  # 5 ms on a 10 ms TTFT: not
    levels = []
    for c, sc in ((1, ok), (4, late), (8, late)):
        lv = level_report(LevelResult(LevelPlan("concurrency", c, requests=1, warmup=0))).to_dict()
        levels.append({**lv, "self_check": sc})
    assert run_note(levels) == (
        "Not trusted: 2 of 3 levels (c=4, c=8). The probe client's event loop ran late (lag p99 "
        "c=4: 5.0 ms against a bound of 2.0 ms (5% of its TTFT p50, at least 2 ms); c=8: 5.0 ms "
        "against a bound of 2.0 ms (5% of its TTFT p50, at least 2 ms)), so each latency it timed "
        "there can be late by about that much. Read their figures as upper bounds, or run those "
        "levels again on a quieter client.")
    table = format_table({"levels": levels})
    assert [line.split()[-1] for line in table.splitlines()[1:]] == ["yes", "lag", "lag"]  # "no: lag"
    assert "event-loop" not in table  # the reason is not repeated on every level
    assert run_note(levels[:1]) is None


def test_level_spread_from_three_repeats_of_the_level() -> None:
    # concurrency 1, 9 measured requests back to back (each starts when the previous ends), no
    # warm-up. Repeat 1: seq 0-2 take 1 s each; repeat 2: seq 3-5 take 0.5 s; repeat 3: seq 6-8
    # take 1 s. Starts: 0,1,2 | 3,3.5,4 | 4.5,5.5,6.5; ends 1,2,3 | 3.5,4,4.5 | 5.5,6.5,7.5.
    durations = [1.0] * 3 + [0.5] * 3 + [1.0] * 3
    recs, t = [], 0.0
    for seq, d in enumerate(durations):
        recs.append(_rec(seq, True, d / 4, d, t, [d / 10] * 4))
        t += d
    res = LevelResult(LevelPlan("concurrency", 1, requests=9, warmup=0), records=recs,
                      loop_lag_s=[0.001], cpu_pct=5.0, wall_s=t)
    lv = level_report(res).to_dict()
    # a closed loop's repeat by Little's law, in flight x successes / its busy seconds, in flight
    # = the level's steady-window rps (8 ends in [0, 6.5] -> 1.23 req/s) x 7.5 s / 9 successes
    # = 1.026: 1.026 x 3 / 3 s = 1.03, 1.026 x 3 / 1.5 s = 2.05, 1.03 req/s; the level's own
    # figure is inside
    lo, hi = lv["spread"]["rps"]
    in_flight = 8 / 6.5 * 7.5 / 9
    assert lo == pytest.approx(in_flight) and hi == pytest.approx(2 * in_flight)
    assert lo <= lv["throughput"]["rps"] <= hi
    # e2e p99 per repeat ~1.0, 0.5, 1.0 -> [0.5, 1.0]; TTFT is a quarter of it
    assert lv["spread"]["e2e_p99_s"] == pytest.approx([0.5, 1.0])
    assert lv["spread"]["ttft_p99_s"] == pytest.approx([0.125, 0.25])
    assert lv["spread"]["images_per_min"] is None and lv["spread"]["image_p99_s"] is None
    assert public_report({"levels": [lv]})["levels"][0]["spread"] == lv["spread"]
    # 8 measured requests cannot be cut into 3 repeats of 3: no spread, not a fake one
    short = LevelResult(LevelPlan("concurrency", 1, requests=8, warmup=0), records=recs[:8],
                        loop_lag_s=[0.001], cpu_pct=5.0, wall_s=t)
    assert set(level_report(short).to_dict()["spread"].values()) == {None}


def test_a_closed_loops_throughput_spread_reads_its_repeats_by_littles_law() -> None:
    # 4 workers, 16 requests back to back, each 0.1 s except every third at 0.12 s: the level runs
    # at about 4 / 0.107 = 37 req/s. Counting completions inside each repeat's few-request window
    # swung with where the edges fell (12-53 req/s on the demo); by Little's law each repeat reads
    # 4 x n / its busy seconds, within the latencies' own +-10 %
    recs, free = [], [0.0] * 4
    for seq in range(16):
        w = min(range(4), key=lambda i: free[i])
        d = 0.12 if seq % 3 == 0 else 0.1
        recs.append(_rec(seq, True, d / 4, d, free[w], [d / 10] * 4))
        free[w] += d
    res = LevelResult(LevelPlan("concurrency", 4, requests=16, warmup=0), records=recs,
                      loop_lag_s=[0.001], cpu_pct=5.0, wall_s=max(free))
    lv = level_report(res).to_dict()
    lo, hi = lv["spread"]["rps"]
    assert 4 / 0.12 <= lo <= hi <= 4 / 0.1 + 1e-9  # inside what the latencies allow
    assert lo <= lv["throughput"]["rps"] <= hi
