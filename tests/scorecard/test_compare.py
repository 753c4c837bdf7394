"""Comparisons: deltas coloured by METRIC_SPECS direction, config diff, workload fingerprints."""

from __future__ import annotations

import pytest
from scorecard_seed import DETAIL_A, seed_alpha

from scorecard.build import build_scorecard
from scorecard.compare import compare


def _delta(cmp, key):
    return next(d for d in cmp.deltas if d.key == key)


def test_same_workload_deltas_by_direction(engine):
    a = seed_alpha(engine, name="a")
    # b: every TTFT doubled, tp_size changed
    b = seed_alpha(engine, name="b", ttft_scale=2.0, flags={"tp_size": 4,
                                                             "chunked_prefill_size": 8192})
    cards = [build_scorecard(engine, run_id=a["run_id"]), build_scorecard(engine, run_id=b["run_id"])]
    cmp = compare(cards)
    assert cmp.comparable and cmp.workload_diff == [[]]
    ttft = _delta(cmp, "ttft_p50_s")
    # 0.25 -> 0.5: +0.25 s, +100 %, worse (lower is better)
    assert ttft.deltas[1] == pytest.approx(0.25)
    assert ttft.rel[1] == pytest.approx(1.0)
    assert ttft.verdicts == ["baseline", "worse"]
    # identical throughput: same
    assert _delta(cmp, "rps").verdicts[1] == "same"
    # informational figures are never better/worse
    assert _delta(cmp, "gpu_usd_per_hour").verdicts[1] == "n/a"
    flags = {r["key"]: r["values"] for r in cmp.config_diff}
    assert flags["flag.tp_size"] == ["2", "4"]
    assert flags["profile"] == ["prof-a", "prof-b"]
    assert "flag.chunked_prefill_size" not in flags


def test_higher_is_better_direction(engine):
    a = seed_alpha(engine, name="a")
    b = seed_alpha(engine, name="b", ttft_scale=0.5)
    cmp = compare([build_scorecard(engine, run_id=a["run_id"]),
                   build_scorecard(engine, run_id=b["run_id"])])
    assert _delta(cmp, "ttft_p99_s").verdicts[1] == "better"


def test_different_fingerprints_are_not_compared_silently(engine):
    a = seed_alpha(engine, name="a")
    detail_b = dict(DETAIL_A, levels=[8], sampling={"temperature": 0.7})
    b = seed_alpha(engine, name="b", detail=detail_b, fingerprint="fp-b", ttft_scale=2.0)
    cmp = compare([build_scorecard(engine, run_id=a["run_id"]),
                   build_scorecard(engine, run_id=b["run_id"])])
    assert not cmp.comparable
    assert cmp.workload_diff == [["levels: [4] -> [8]", "sampling.temperature: 0.0 -> 0.7"]]
    assert _delta(cmp, "ttft_p50_s").verdicts[1] == "not comparable"
    # cost per token divides the price by the probe's throughput: it is workload-bound too
    cost = _delta(cmp, "usd_per_1m_output_tok")
    assert cost.values[0] is not None and cost.verdicts[1] == "not comparable"
    # server-side event counts do not depend on the workload: still judged
    assert _delta(cmp, "oom_count").verdicts[1] == "same"
    assert cmp.warnings and "not comparable" in cmp.warnings[0]


def test_needs_two():
    with pytest.raises(ValueError, match="at least two"):
        compare([])
