"""Two servers on different engines, one workload: probe figures get verdicts, a figure the engines
define differently gets none ("different definitions"), each card says its engine's definition next
to the figure, and the config diff names the engines."""

from __future__ import annotations

from scorecard_seed import T0, seed_levels

from scorecard.build import build_scorecard
from scorecard.compare import compare
from storage import repo


def _hits(engine, sid: int, cached: float, prompt: float) -> None:
    rows = [{"ts": T0 + dt, "server_id": sid, "launch_id": None, "source": "metrics", "metric": m, "value": v}
            for dt in (1.0, 5.0) for m, v in (("metrics.cached_tokens_per_s", cached),
                                             ("metrics.prompt_tokens_per_s", prompt))]
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)


def _pair(engine, second_engine: str):
    a = seed_levels(engine, name="on-a", levels={1.0: (1.0, 0.30)})
    b = seed_levels(engine, name="on-b", levels={1.0: (1.0, 0.15)})
    repo.upsert_server(engine, name="on-b", engine=second_engine)
    _hits(engine, a["server_id"], 40.0, 100.0)
    _hits(engine, b["server_id"], 80.0, 100.0)
    cards = [build_scorecard(engine, run_id=a["run_id"]), build_scorecard(engine, run_id=b["run_id"])]
    return cards, compare(cards)


def _verdict(cmp, key: str) -> str:
    return next(d for d in cmp.deltas if d.key == key).verdicts[1]


def test_a_figure_the_engines_define_apart_has_no_verdict(engine) -> None:
    cards, cmp = _pair(engine, "vllm")
    assert [c.subject["engine"] for c in cards] == ["sglang", "vllm"]
    assert cards[0].figures["radix_hit_rate"].value == 0.4 and cards[1].figures["radix_hit_rate"].value == 0.8
    assert "SGLang: prompt tokens matched in the radix cache" in cards[0].figures["radix_hit_rate"].note
    assert "vLLM: cached prompt tokens" in cards[1].figures["radix_hit_rate"].note
    assert _verdict(cmp, "radix_hit_rate") == "different definitions"
    assert any("define these figures differently" in n for n in cmp.notes)
    # the probe measured both the same way: a TTFT of half the baseline's is better
    assert _verdict(cmp, "ttft_p50_s") == "better"
    assert {"key": "engine", "values": ["SGLang", "vLLM"]} in cmp.config_diff


def test_one_engine_on_both_sides_compares_the_figure(engine) -> None:
    _, cmp = _pair(engine, "sglang")
    assert _verdict(cmp, "radix_hit_rate") == "better"
    assert not any(r["key"] == "engine" for r in cmp.config_diff)


def test_the_output_check_against_the_baseline_run_is_said_in_words(engine) -> None:
    cards, _ = _pair(engine, "vllm")
    base_run = cards[0].subject["run_id"]
    cards[1].provenance["output_check"] = {"baseline_run_id": base_run, "compared": 18, "differing": 2,
                                           "prompts_compared": 9, "prompts_differing": 1, "warnings": []}
    cmp = compare(cards)
    assert cmp.outputs == ["Outputs: 16 of 18 requests gave the baseline run's output for the same prompt "
                           "(8 of 9 prompts alike)."]
    cards[1].provenance["output_check"]["baseline_run_id"] = base_run + 100  # checked against another run
    assert compare(cards).outputs == [""]


def test_a_stream_that_arrived_in_one_burst_gives_its_token_gaps_no_verdict(engine) -> None:
    cards, cmp = _pair(engine, "vllm")
    assert _verdict(cmp, "itl_p50_s") != "burst stream"
    # the candidate's server held its tokens back: 0.01 ms a token after the first is no generation
    for lv in cards[1].levels:
        lv["tpot_p50_s"], lv["itl_p50_s"] = 1e-5, 0.0
    cards[1].figures["tpot_p50_s"].value, cards[1].figures["itl_p50_s"].value = 1e-5, 0.0
    cmp = compare(cards)
    assert _verdict(cmp, "itl_p50_s") == _verdict(cmp, "tpot_p50_s") == "burst stream"
    assert _verdict(cmp, "ttft_p50_s") == "better"  # the first token still counts
    assert any("arrived in a burst" in n for n in cmp.notes)
    assert all(ld.verdicts[1] == "burst stream" for ld in cmp.level_deltas if ld.key == "itl_p50_s")


def test_a_burst_is_no_evidence_when_the_probe_did_not_trust_itself(engine) -> None:
    cards, _ = _pair(engine, "vllm")
    for lv in cards[1].levels:
        lv["tpot_p50_s"] = 1e-5
    cards[1].figures["tpot_p50_s"].value = 1e-5
    cards[1].provenance["self_check"] = {"trusted": False}  # its event loop lagged: chunks read as one
    assert _verdict(compare(cards), "tpot_p50_s") != "burst stream"


def test_an_output_check_that_compared_nothing_says_so(engine) -> None:
    cards, _ = _pair(engine, "vllm")
    cards[1].provenance["output_check"] = {"baseline_run_id": cards[0].subject["run_id"], "compared": 0,
                                           "differing": 0, "prompts_compared": 0, "prompts_differing": 0}
    assert compare(cards).outputs[0].startswith("Outputs not compared")


def test_a_burst_leaves_goodput_to_the_targets_it_does_not_disqualify(engine) -> None:
    from scorecard import matched

    cards, _ = _pair(engine, "vllm")
    card = cards[1]
    for lv in card.levels:
        lv["tpot_p50_s"] = 1e-5
    for key, target in (("ttft_p99_s", None), ("itl_p99_s", 0.05)):
        card.figures[key].target = target
    got = matched.goodput(card)
    assert got["rps"] is None and "arrived in a burst" in got["why"] and "itl_p99_s" not in got["slo"]
    card.figures["ttft_p99_s"].target = 10.0  # a TTFT target still judges it
    assert matched.goodput(card)["rps"] is not None
