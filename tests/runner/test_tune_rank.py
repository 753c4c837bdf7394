"""Ranking of tune candidates (runner/tune_rank.py) on recorded per-level figures: goodput
against the SLO, ties within noise, cost, stability, slo_missed and failed last."""

from __future__ import annotations

from tune_seed import candidate as cand_r
from tune_seed import report_level

from collectors.probe.stats import goodput
from runner.tune_rank import public_json, rank, state_verdict, verdict

SLO = {"ttft_p99_s": 0.5, "itl_p99_s": 0.05, "success_rate": 0.99}


def lv(level: float, ttft: float, rps: float, *, itl: float = 0.02, ok: float = 1.0, tok_s: float = 1000.0,
       spread: float = 0.0) -> dict:
    return {"concurrency": level, "ttft_s": {"p99": ttft}, "itl_s": {"p99": itl}, "success_rate": ok,
            "throughput": {"rps": rps, "output_tok_s": tok_s},
            "spread": {"rps": [rps - spread, rps + spread] if spread else None}}


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


def test_goodput_within_noise_is_a_tie_listed_by_stability_then_cost_then_latency() -> None:
    # spreads of ±0.3 req/s around 8.0-8.3 all overlap: a tie, listed (not crowned) in order
    cands = [cand("fast", [lv(4, 0.40, 8.2, spread=0.3)]), cand("cheap", [lv(4, 0.45, 8.0, tok_s=2000, spread=0.3)]),
             cand("flaky", [lv(4, 0.10, 8.3, spread=0.3)], errors=3)]
    assert rank(cands, SLO) is None  # a tie is not a winner, however cheap
    by = {c["profile"]: c for c in cands}
    assert [by[n]["rank"] for n in ("cheap", "fast", "flaky")] == [1, 2, 3]  # half the cost per token first
    assert "a tie with" in by["cheap"]["reason"]
    # without a price, the lower p99 TTFT comes first inside the tie
    cands = [cand("x", [lv(4, 0.40, 8.2, spread=0.3)], usd_h=None), cand("y", [lv(4, 0.30, 8.0, spread=0.3)], usd_h=None)]
    assert rank(cands, SLO) is None and [c["rank"] for c in cands] == [2, 1]


def test_a_clear_goodput_gap_is_not_a_tie() -> None:
    cands = [cand("a", [lv(4, 0.4, 10.0)]), cand("b", [lv(4, 0.1, 8.0)])]
    assert rank(cands, SLO) == "a"
    assert "tie" not in cands[0]["reason"]


# -- ties measured on real report levels ------------------------------------------------------------
def test_goodput_inside_the_measured_spread_is_a_tie_and_no_winner() -> None:
    # 5.96 vs 5.95 req/s, each level measured over 3 repeats about ±4 % apart: the spreads
    # (about 5.73-6.21 and 5.72-6.20) overlap, so the 0.01 req/s "gain" is noise
    cands = [cand_r("demo-radix-off", [report_level(5.96)]), cand_r("demo", [report_level(5.95)])]
    assert rank(cands, SLO) is None
    said = verdict(cands)
    assert said.winner is None and said.tied == ("demo-radix-off", "demo")
    assert said.text.startswith("demo-radix-off and demo tie: goodput 5.96 vs 5.95 req/s, inside the measured "
                                "spread 5.7"), said.text
    assert "keep the current profile" in said.text
    # the in-tie order is kept for display, and each reason says it is a tie
    assert [c["rank"] for c in cands] == [1, 2] and all("a tie with" in c["reason"] for c in cands)
    out = public_json({"candidates": cands, "winner": None})
    assert out["winner"] is None and out["tie"] == ["demo-radix-off", "demo"] and "tie" in out["verdict"]
    assert out["candidates"][0]["goodput_spread"][0] < 5.95 < out["candidates"][0]["goodput_spread"][1]


def test_a_clearly_better_candidate_still_wins() -> None:
    cands = [cand_r("slow", [report_level(5.0, jitter=0.02)]), cand_r("fast", [report_level(8.0, jitter=0.02)])]
    assert rank(cands, SLO) == "fast"
    said = verdict(cands)
    assert said.winner == "fast" and said.tied == ()
    assert said.text == "fast wins: goodput 8.00 req/s vs slow 5.00 req/s, outside the measured spread."


def test_a_stored_crown_on_noise_is_judged_again() -> None:
    # a tune recorded before ties were measured: "winner" stored, no verdict and no spreads;
    # 5.96 vs 5.95 is under the 5 % floor of an unmeasured spread: a tie, the spread said unmeasured
    state = {"winner": "demo-radix-off", "candidates": [
        {"profile": "demo-radix-off", "status": "ok", "rank": 1, "goodput_rps": 5.96},
        {"profile": "demo", "status": "ok", "rank": 2, "goodput_rps": 5.95}]}
    said = state_verdict(state)
    assert said is not None and said.winner is None and "spread not measured" in said.text
    assert public_json(state)["winner"] is None
    # 6.0 vs 5.9 (1.7 %) with the spread unmeasured: under 5 %, still a tie, nothing applied
    state["candidates"][0]["goodput_rps"], state["candidates"][1]["goodput_rps"] = 6.0, 5.9
    said = state_verdict(state)
    assert said is not None and said.winner is None
    assert "spread not measured: under 5 %" in said.text
    state["candidates"][0]["goodput_rps"] = 5.96
    state["candidates"][1]["goodput_rps"] = 5.0  # 16 % apart: a winner even without a spread
    said = state_verdict(state)
    assert said is not None and said.winner == "demo-radix-off" and "spread not measured" in said.text


def cap_cand(name: str, knees: list[float] | None, *, rate: float = 2.4, capped: bool = False,
             fails_at: float | None = None) -> dict:
    """A trace-workload candidate as runner/tunes.py records it: its capacity search's repeats
    (`fails_at`: the highest speed that failed next to a knee; default 10 % above the highest knee)."""
    high = (max(knees) if capped else fails_at or round(max(knees) * 1.1, 6)) if knees else None
    capacity = {"trace": "t", "rate_rps": rate, "capped": capped,
                "knee": sorted(knees)[len(knees) // 2] if knees else None,
                "low": min(knees) if knees else None, "high": high, "knees": knees or [],
                "steps": [{"speed": 1.0, "meets": bool(knees), "why": [] if knees else ["p99 TTFT 900 ms > 500 ms"],
                           "run_id": 7}]}
    return {"profile": name, "status": "scored", "levels": [lv(2.4, 0.3, 2.4)], "capacity": capacity,
            "scorecard": {"cost": {"gpu_usd_per_hour": 4.0}, "stability": {"error_count": 0}}}


def test_a_trace_tune_ranks_on_capacity_and_its_repeats_are_the_spread() -> None:
    cands = [cap_cand("small", [2.0, 2.1, 2.2]), cap_cand("big", [5.0, 5.3, 5.6]), cap_cand("none", None)]
    assert rank(cands, SLO) == "big"
    by = {c["profile"]: c for c in cands}
    assert [by[n]["rank"] for n in ("big", "small", "none")] == [1, 2, 3]
    assert by["big"]["goodput_rps"] == 5.3 * 2.4
    # the spread runs to the speed that failed next to the highest knee (a knee is known only to 10 %)
    assert by["big"]["goodput_spread"] == [5.0 * 2.4, round(5.6 * 1.1, 6) * 2.4]
    assert by["big"]["reason"] == "holds 5.3x (5-6.16x) of trace t: 12.72 req/s"
    assert by["none"]["status"] == "slo_missed" and "at no speed of trace t tried" in by["none"]["reason"]
    assert verdict(cands).text.startswith("big wins: holds 5.3x (5-6.16x) of trace t: 12.72 req/s vs small")
    assert public_json({"candidates": cands})["candidates"][0]["capacity"]["knees"] == [5.0, 5.3, 5.6]


def test_capacities_whose_repeats_overlap_are_a_tie_not_a_winner() -> None:
    # knees 4.0-4.4x and 4.5-4.9x: apart, but b's search failed only at 4.84x, inside a's knees
    cands = [cap_cand("a", [4.5, 4.7, 4.9]), cap_cand("b", [4.0, 4.2, 4.4])]
    assert rank(cands, SLO) is None
    said = verdict(cands)
    assert said.winner is None and said.tied == ("a", "b") and "a longer window of the trace" in said.text
    apart = [cap_cand("a", [5.5, 5.7, 5.9]), cap_cand("b", [4.0, 4.2, 4.4])]
    assert rank(apart, SLO) == "a"
    # both met the SLO at the fastest speed tried: neither is known to hold more
    capped = [cap_cand("a", [8.0], capped=True), cap_cand("b", [8.0], capped=True)]
    assert rank(capped, SLO) is None and verdict(capped).tied == ("a", "b")
    assert capped[0]["reason"].startswith("holds at least 8x of trace t")


def test_a_candidate_whose_client_fell_behind_is_not_called_slow() -> None:
    """The capacity search ends where the client fell behind the trace's schedule (a busy host):
    with nothing met first the candidate is not measured (failed, ranked last), never `slo_missed`;
    with a speed met first it holds at least that, its top unknown, so it ties a faster lead."""
    unmeasured = cap_cand("busy", None)
    unmeasured["capacity"]["client_bound"] = 1.0
    lead = cap_cand("lead", [5.0, 5.3, 5.6])
    cands = [unmeasured, lead]
    assert rank(cands, SLO) == "lead"
    assert unmeasured["status"] == "failed" and unmeasured["rank"] == 2 and unmeasured["goodput_rps"] is None
    assert unmeasured["reason"].startswith("not measured: the client fell behind trace t's schedule twice at 1x")
    floor = cap_cand("floor", [2.0], capped=True)
    floor["capacity"]["client_bound"] = 4.0
    cands = [cap_cand("lead", [5.0, 5.3, 5.6]), floor]
    assert rank(cands, SLO) is None  # 'at least 2x' may be as much as the lead's 5.3x: a tie
    said = verdict(cands)
    assert said.tied == ("lead", "floor") and "floor measured only up to where the client fell behind" in said.text
    assert said.text.endswith("or tune again from a less busy host, where the client keeps to the trace's schedule.")
    assert floor["reason"].startswith("holds at least 2x of trace t, the client's limit at 4x: 4.80 req/s")
    # a lead known only from below still wins over a candidate measured to fail beneath it
    top = cap_cand("top", [6.0], capped=True)
    top["capacity"]["client_bound"] = 12.0
    assert rank([top, cap_cand("low", [2.0, 2.1, 2.2])], SLO) == "top"
