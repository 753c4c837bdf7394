"""Ranking of tune candidates (runner/tune_rank.py) on recorded per-level figures: goodput
against the SLO, ties within noise, cost, stability, slo_missed and failed last."""

from __future__ import annotations

from runner.tune_rank import goodput, public_json, rank

SLO = {"ttft_p99_s": 0.5, "itl_p99_s": 0.05, "success_rate": 0.99}


def lv(level: float, ttft: float, rps: float, *, itl: float = 0.02, ok: float = 1.0, tok_s: float = 1000.0) -> dict:
    return {"concurrency": level, "ttft_s": {"p99": ttft}, "itl_s": {"p99": itl}, "success_rate": ok,
            "throughput": {"rps": rps, "output_tok_s": tok_s}}


def cand(name: str, levels: list[dict], *, usd_h: float | None = 4.0, errors: int = 0, status: str = "scored") -> dict:
    return {"profile": name, "status": status, "levels": levels,
            "scorecard": {"cost": {"gpu_usd_per_hour": usd_h}, "stability": {"error_count": errors}}}


def test_goodput_is_the_highest_level_meeting_every_target() -> None:
    best, why = goodput([lv(1, 0.1, 2), lv(4, 0.3, 6), lv(8, 0.9, 7)], SLO, image=False)
    assert best["concurrency"] == 4 and why == ""
    best, why = goodput([lv(1, 0.1, 2, itl=0.2)], SLO, image=False)
    assert best is None and "p99 ITL 200 ms > 50 ms" in why


def test_higher_goodput_wins_and_a_missed_slo_and_a_failure_rank_last() -> None:
    cands = [cand("slow", [lv(4, 0.9, 9)]), cand("broken", [], status="failed"),
             cand("b", [lv(4, 0.3, 5)]), cand("a", [lv(4, 0.3, 8)])]
    cands[1]["reason"] = "did not start: exited"
    assert rank(cands, SLO) == "a"
    by = {c["profile"]: c for c in cands}
    assert [by[n]["rank"] for n in ("a", "b", "slow", "broken")] == [1, 2, 3, 4]
    assert by["slow"]["status"] == "slo_missed" and "p99 TTFT 900 ms > 500 ms" in by["slow"]["reason"]
    assert by["broken"]["status"] == "failed" and by["a"]["goodput_rps"] == 8
    out = public_json({"server": "s", "candidates": cands, "winner": "a", "restored_profile": "a"})
    assert [c["profile"] for c in out["candidates"]] == ["a", "b", "slow", "broken"]
    assert "levels" not in out["candidates"][0]


def test_goodput_within_noise_is_a_tie_ordered_by_stability_then_cost_then_latency() -> None:
    cands = [cand("fast", [lv(4, 0.40, 8.2)]), cand("cheap", [lv(4, 0.45, 8.0, tok_s=2000)]),
             cand("flaky", [lv(4, 0.10, 8.3)], errors=3)]
    assert rank(cands, SLO) == "cheap"  # half the cost per token at the same goodput
    by = {c["profile"]: c for c in cands}
    assert [by[n]["rank"] for n in ("cheap", "fast", "flaky")] == [1, 2, 3]
    assert "a tie with" in by["cheap"]["reason"]
    # without a price, the lower p99 TTFT decides inside the tie
    cands = [cand("x", [lv(4, 0.40, 8.2)], usd_h=None), cand("y", [lv(4, 0.30, 8.0)], usd_h=None)]
    assert rank(cands, SLO) == "y"


def test_a_clear_goodput_gap_is_not_a_tie() -> None:
    cands = [cand("a", [lv(4, 0.4, 10.0)]), cand("b", [lv(4, 0.1, 8.0)])]
    assert rank(cands, SLO) == "a"
    assert "tie" not in cands[0]["reason"]
