"""Compare at matched load: per-level deltas, a headline at a level both runs measured,
a refusal where they share none, ties inside the measured spread, no verdict across sources,
one sentence of what differs, and runs attached to no server."""

from __future__ import annotations

import dataclasses

import pytest
from scorecard_seed import DETAIL_A, seed_alpha, seed_canary_only, seed_levels

from scorecard.build import build_scorecard
from scorecard.compare import compare, headline
from scorecard.matched import verdict_words

# baseline: level 1 at 1 req/s, level 2 at 2 req/s (its own headline: level 2);
# candidate: level 1 at 4 req/s, level 2 at 2 req/s (its own headline: level 1)
BASE = {1.0: (1.0, 0.30), 2.0: (0.5, 0.50)}
CAND = {1.0: (0.25, 0.20), 2.0: (0.5, 0.35)}


def _cards(engine, *seeds):
    return [build_scorecard(engine, run_id=s["run_id"]) for s in seeds]


def _delta(cmp, key):
    return next(d for d in cmp.deltas if d.key == key)


def test_headline_at_a_shared_level_never_across_levels(engine):
    a = seed_levels(engine, name="a", levels=BASE)
    b = seed_levels(engine, name="b", levels=CAND, t0=1_700_010_000.0)
    cards = _cards(engine, a, b)
    # each run's own headline level is different: that is what made the old headline cross-level
    assert (cards[0].subject["level"], cards[1].subject["level"]) == (2.0, 1.0)
    cmp = compare(cards)
    assert cmp.shared_levels == [1.0, 2.0] and cmp.matched_level == 2.0
    # TTFT p50 at level 2: 0.50 -> 0.35 s = −30 %; across levels (0.50 -> 0.20) it would be −60 %
    ttft = _delta(cmp, "ttft_p50_s")
    assert ttft.values == pytest.approx([0.50, 0.35])
    assert ttft.rel[1] == pytest.approx(-0.30)
    line = headline(cmp, "llm")
    assert line.startswith("at concurrency 2: TTFT p50 −30 %"), line
    assert "−60" not in line
    # the per-level table: every shared level against the baseline's same level
    per_level = {ld.level: ld for ld in cmp.level_deltas if ld.key == "ttft_p50_s"}
    assert per_level[1.0].rel[1] == pytest.approx(0.20 / 0.30 - 1)  # −33 %
    assert per_level[2.0].rel[1] == pytest.approx(-0.30)
    # the spreads (±2 % per third) are far apart: a measured win, not a tie
    assert per_level[2.0].verdicts == ["baseline", "better"]
    assert verdict_words("ttft_p50_s", "better", *per_level[2.0].spreads).startswith(
        "better (outside the measured spread 490.0 ms–510.0 ms")
    # goodput within the default SLO (TTFT p99 ≤ 1 s): the highest level, 2, on both sides
    assert [g["level"] for g in cmp.goodput] == [2.0, 2.0]


def test_no_shared_level_is_refused_in_words(engine):
    a = seed_levels(engine, name="a", levels=BASE)
    b = seed_levels(engine, name="b", levels={4.0: (0.25, 0.2), 8.0: (0.125, 0.4)},
                    fingerprint="fp-48", t0=1_700_010_000.0)
    cmp = compare(_cards(engine, a, b))
    assert cmp.matched_level is None and cmp.level_deltas == []
    assert cmp.refusal is not None
    assert "ran concurrency 1, 2" in cmp.refusal and "ran concurrency 4, 8" in cmp.refusal
    assert "Benchmarks → Rerun" in cmp.refusal
    ttft = _delta(cmp, "ttft_p50_s")
    assert ttft.verdicts[1] == "different levels" and ttft.deltas[1] is None
    assert _delta(cmp, "rps").deltas[1] is None
    # no level headline; goodput within the SLO needs no shared level. Level 2: 7 of 9 requests
    # finish by the last start (0.55 s each), over 8 × 0.5 s = 1.75 req/s; level 8: starts every
    # 0.125 s, 0.45 s each, 5 finish within 1 s = 5.00 req/s. Each is its run's highest level:
    # the goodput is at least that, so no percentage
    line = headline(cmp, "llm")
    assert line == "goodput within the SLO ≥ 1.75 → ≥ 5.00 req/s"
    assert "load levels ([1.0, 2.0] vs [4.0, 8.0])" in cmp.summary
    assert cmp.summary.endswith("rerun the candidate with the baseline's workload "
                                "(Benchmarks → Rerun) to compare them.")


def test_a_difference_inside_the_spread_is_a_tie(engine):
    a = seed_levels(engine, name="a", levels=BASE, jitter=0.05)
    # 3 % slower at every level: inside the ±5 % spread of both sides
    b = seed_levels(engine, name="b", levels={1.0: (1.0, 0.309), 2.0: (0.5, 0.515)},
                    jitter=0.05, t0=1_700_010_000.0)
    cmp = compare(_cards(engine, a, b))
    ttft = _delta(cmp, "ttft_p50_s")
    assert ttft.verdicts[1] == "tie"
    words = verdict_words("ttft_p50_s", "tie", ttft.spreads[0], ttft.spreads[1])
    assert words.startswith("tie (inside the measured spread")
    assert "(tie)" in headline(cmp, "llm")


def test_without_a_spread_the_verdict_says_so(engine):
    a = seed_alpha(engine, name="a")
    b = seed_alpha(engine, name="b", ttft_scale=2.0)  # 4 measured requests: no repeats
    cmp = compare(_cards(engine, a, b))
    ttft = _delta(cmp, "ttft_p50_s")
    assert ttft.verdicts[1] == "worse" and ttft.spreads == [None, None]
    assert verdict_words("ttft_p50_s", "worse", None, None) == (
        "worse (spread not measured: more than 5 % apart)")


def test_figures_from_different_sources_get_no_verdict(engine):
    a = seed_alpha(engine, name="a")
    b = seed_alpha(engine, name="b")
    cards = _cards(engine, a, b)
    fig = cards[1].figures["server_gen_tok_s"]
    cards[1].figures["server_gen_tok_s"] = dataclasses.replace(
        fig, value=fig.value * 3, note="mean of metrics.gen_throughput_tok_s")
    cmp = compare(cards)
    assert _delta(cmp, "server_gen_tok_s").verdicts[1] == "different sources"
    assert sum("different sources" in n for n in cmp.notes) == 1


def test_launches_without_sweeps_list_no_absent_lines(engine):
    seed_canary_only(engine, name="c1")
    seed_canary_only(engine, name="c2")
    a = seed_alpha(engine, name="a")
    now = 1_700_000_010.0
    canary = build_scorecard(engine, server="c1", since_s=60, now=now)
    canary2 = build_scorecard(engine, server="c2", since_s=60, now=now)
    swept = build_scorecard(engine, run_id=a["run_id"])
    # one side swept: one line, not every fingerprint field "(absent)"
    cmp = compare([swept, canary])
    assert cmp.workload_diff == [[f"probe sweep: only {swept.title} has one"]]
    assert "(absent)" not in repr(cmp.to_dict())
    # neither side swept: canary figures carry no verdict, the summary says how to get them
    cmp = compare([canary, canary2])
    assert _delta(cmp, "ttft_p50_s").verdicts[1] == "canary only"
    assert cmp.summary.startswith("No probe sweep behind c1, c2")
    assert "run a sweep (Benchmarks)" in cmp.summary
    assert all(any(v is not None for v in d.values) for d in cmp.deltas)


def test_what_differs_is_one_sentence(engine):
    a = seed_alpha(engine, name="a")
    b = seed_alpha(engine, name="b", detail=dict(DETAIL_A, max_new_tokens=256), fingerprint="fp-b")
    cmp = compare(_cards(engine, a, b))
    assert cmp.summary == ("These runs differ in output length (100 vs 256); rerun the candidate "
                           "with the baseline's workload (Benchmarks → Rerun) to compare them.")
    same = compare(_cards(engine, a, seed_alpha(engine, name="c", flags={"tp_size": 4})))
    assert same.summary.startswith("Same workload; the launches differ in ")
    assert "tp_size" in same.summary


def test_a_run_attached_to_no_server_is_scored_from_its_requests(engine):
    a = seed_levels(engine, name="a", levels=BASE)
    orphan = seed_levels(engine, name="cli", levels=CAND, attached=False, t0=1_700_010_000.0)
    card = build_scorecard(engine, run_id=orphan["run_id"])
    assert card.subject["server"].startswith("no server (")
    assert card.value("ttft_p50_s") == pytest.approx(0.20)  # its own headline level 1
    assert any("attached to no server" in n for n in card.notes)
    assert "attached to no server" in card.figures["server_gen_tok_s"].note
    cmp = compare([build_scorecard(engine, run_id=a["run_id"]), card])
    assert headline(cmp, "llm").startswith("at concurrency 2: TTFT p50 −30 %")


def test_headline_level_note_names_the_level_and_the_count(engine):
    card = _cards(engine, seed_levels(engine, name="a", levels=BASE))[0]
    assert any(n.startswith("Headline figures are from concurrency 2 (the highest requests/s "
                            "of the 2 levels)") for n in card.notes), card.notes
