"""Review findings on the comparison's judgement: the main table and the per-level
table agree at a shared level, and a workload that differs besides its level sets is not
comparable in both."""

from __future__ import annotations

import dataclasses

import pytest
from scorecard_seed import DETAIL_A, seed_levels

from scorecard.build import build_scorecard
from scorecard.compare import compare, headline


def _cards(engine, *seeds):
    return [build_scorecard(engine, run_id=s["run_id"]) for s in seeds]


def _delta(cmp, key):
    return next(d for d in cmp.deltas if d.key == key)


def _detail(levels, **over):
    return dict(DETAIL_A, levels=levels, requests_per_level=[9] * len(levels),
                warmup_per_level=[0] * len(levels), **over)


def test_level_sets_that_differ_are_compared_at_the_shared_level(engine):
    # baseline ran 1, 2; candidate 2, 4: level 2 is shared, the workloads are otherwise equal
    a = seed_levels(engine, name="a", levels={1.0: (1.0, 0.3), 2.0: (0.5, 0.5)},
                    detail=_detail([1.0, 2.0]))
    b = seed_levels(engine, name="b", levels={2.0: (0.5, 0.35), 4.0: (0.25, 0.4)},
                    detail=_detail([2.0, 4.0]), fingerprint="fp-24", t0=1_700_010_000.0)
    cmp = compare(_cards(engine, a, b))
    assert cmp.matched_level == 2.0
    assert cmp.level_workload_diff == [[]]
    main = _delta(cmp, "ttft_p50_s").verdicts[1]
    per_level = next(ld for ld in cmp.level_deltas if ld.key == "ttft_p50_s" and ld.level == 2.0)
    assert main == per_level.verdicts[1] == "better"
    assert "rerun" not in cmp.summary.lower()
    assert "concurrency 2" in cmp.summary
    assert not cmp.warnings


def test_a_workload_difference_is_not_comparable_in_both_tables(engine):
    a = seed_levels(engine, name="a", levels={2.0: (0.5, 0.5)}, detail=_detail([2.0]))
    b = seed_levels(engine, name="b", levels={2.0: (0.5, 0.35)}, fingerprint="fp-999",
                    detail=_detail([2.0], max_new_tokens=999), t0=1_700_010_000.0)
    cmp = compare(_cards(engine, a, b))
    per_level = next(ld for ld in cmp.level_deltas if ld.key == "ttft_p50_s")
    assert _delta(cmp, "ttft_p50_s").verdicts[1] == "not comparable"
    assert per_level.verdicts[1] == "not comparable"
    assert "rerun the candidate" in cmp.summary


def _goodput_pair(engine, cand_gap=0.5, cand_detail=None):
    base = {1.0: (1.0, 0.3), 2.0: (0.5, 0.5), 4.0: (0.25, 2.0)}  # level 4 breaks TTFT p99 ≤ 1 s
    cand = {1.0: (1.0, 0.3), 2.0: (cand_gap, 0.5), 4.0: (0.25, 2.0)}
    a = seed_levels(engine, name="a", levels=base, detail=_detail([1.0, 2.0, 4.0]))
    b = seed_levels(engine, name="b", levels=cand, t0=1_700_010_000.0,
                    fingerprint="fp-b" if cand_detail else "fp-lv",
                    detail=cand_detail or _detail([1.0, 2.0, 4.0]))
    return _cards(engine, a, b)


def test_goodput_inside_the_spread_is_called_a_tie(engine):
    cmp = compare(_goodput_pair(engine, cand_gap=0.502))
    assert [g["level"] for g in cmp.goodput] == [2.0, 2.0]
    clause = headline(cmp, "llm").split("; ")[-1]
    assert clause.startswith("goodput within the SLO 1.75 → 1.7") and clause.endswith("(tie)")


def test_goodput_at_the_highest_level_is_a_lower_bound(engine):
    a = seed_levels(engine, name="a", levels={1.0: (1.0, 0.3), 2.0: (0.5, 0.5)},
                    detail=_detail([1.0, 2.0]))
    b = seed_levels(engine, name="b", levels={1.0: (1.0, 0.3), 2.0: (0.5, 0.5), 4.0: (0.25, 2.0)},
                    detail=_detail([1.0, 2.0, 4.0]), fingerprint="fp-b", t0=1_700_010_000.0)
    cmp = compare(_cards(engine, a, b))
    clause = headline(cmp, "llm").split("; ")[-1]
    assert clause.startswith("goodput within the SLO ≥ 1.75 → 1.75 req/s"), clause
    assert "%" not in clause


def test_no_goodput_clause_across_workloads_or_slo_targets(engine):
    cards = _goodput_pair(engine, cand_gap=0.4,
                          cand_detail=_detail([1.0, 2.0, 4.0], max_new_tokens=999))
    assert "goodput" not in headline(compare(cards), "llm")
    cards = _goodput_pair(engine, cand_gap=0.4)
    assert "goodput within the SLO" in headline(compare(cards), "llm")
    fig = cards[1].figures["ttft_p99_s"]
    cards[1].figures["ttft_p99_s"] = dataclasses.replace(fig, target=5.0)
    assert "goodput" not in headline(compare(cards), "llm")


def test_verdict_words_name_the_rule_that_made_the_tie() -> None:
    from scorecard.matched import verdict_words

    # known spreads that do not overlap, a difference under the 1 % floor
    assert verdict_words("rps", "tie", [6.0, 6.01], [5.97, 5.98]) == "tie (under 1 %)"
    assert verdict_words("rps", "tie", None, None) == "tie (spread not measured: under 5 %)"
    assert verdict_words("rps", "better", None, [1.0, 2.0]).endswith("more than 5 % apart)")


def test_server_figures_of_two_probe_runs_are_workload_bound(engine):
    from scorecard_seed import seed_alpha

    a = seed_alpha(engine, name="a")
    b = seed_alpha(engine, name="b", fingerprint="fp-b", detail=dict(DETAIL_A, max_new_tokens=256))
    cards = _cards(engine, a, b)
    cmp = compare(cards)
    server = [d for d in cmp.deltas if (f := cards[0].figures.get(d.key)) is not None
              and f.source in ("server", "gpu") and d.values[0] is not None
              and d.values[1] is not None and d.verdicts[1] not in ("n/a", "different sources")]
    assert server, "the seed has server figures on both sides"
    assert {d.verdicts[1] for d in server} == {"not comparable"}, [(d.key, d.verdicts) for d in server]


def test_image_headline_says_which_figures_are_the_whole_runs():
    from scorecard.compare import Comparison, Delta

    def delta(key, a, b):
        return Delta(key, [a, b], [None, b - a], [None, (b - a) / a], ["baseline", "better"])

    cmp = Comparison(titles=["A", "B"], fingerprints=["x", "x"], comparable=True,
                     workload_diff=[[]], config_diff=[], level_mode="concurrency",
                     shared_levels=[2.0], matched_level=2.0,
                     deltas=[delta("image_p50_s", 10.0, 7.0), delta("image_step_s", 0.3, 0.2),
                             delta("peak_mem_bytes", 8.0 * (1 << 30), 8.0 * (1 << 30))])
    assert headline(cmp, "image") == ("at concurrency 2: p50 −30 %; "
                                      "whole run: s/step −33 %, peak memory +0.0 GiB")


def test_ttft_tail_ratio_is_read_at_the_matched_level(engine):
    from scorecard.matched import levels_of

    a = seed_levels(engine, name="a", levels={1.0: (1.0, 0.3), 2.0: (0.5, 0.5)}, jitter=0.2)
    b = seed_levels(engine, name="b", levels={1.0: (0.25, 0.2), 2.0: (0.5, 0.35)}, jitter=0.2,
                    t0=1_700_010_000.0)
    cards = _cards(engine, a, b)
    assert (cards[0].subject["level"], cards[1].subject["level"]) == (2.0, 1.0)
    ratio = _delta(compare(cards), "ttft_p99_p50_ratio")
    want = [levels_of(c)[2.0]["ttft_p99_s"] / levels_of(c)[2.0]["ttft_p50_s"] for c in cards]
    assert ratio.values == pytest.approx(want)
    # no level in common: each card's ratio is of its own level, so no verdict
    c = seed_levels(engine, name="c", levels={4.0: (0.25, 0.2), 8.0: (0.125, 0.4)}, jitter=0.2,
                    fingerprint="fp-48", t0=1_700_020_000.0)
    ratio = _delta(compare(_cards(engine, a, c)), "ttft_p99_p50_ratio")
    assert ratio.verdicts[1] == "different levels"


def test_an_untrusted_runs_scorecard_says_why_in_the_runs_own_plain_words(engine):
    """The scorecard's note is the run's one trust note (collectors/probe/trust.run_note), the
    sentence Benchmarks prints, not a pointer to an internal key."""
    from storage import repo

    a = seed_levels(engine, name="a", levels={1.0: (1.0, 0.30)})
    late = {"loop_lag_p99_s": 0.005, "lag_bound_s": 0.002, "lag_basis": "TTFT p50",
            "client_cpu_pct": 5.0, "cpu_max_pct": 70.0, "trusted": False,
            "reasons": ["client event-loop lag p99 5.0 ms > 2.0 ms"]}
    repo.update_probe_run(engine, run_id=a["run_id"],
                          report={"levels": [{"concurrency": 1, "self_check": late}]})
    card = build_scorecard(engine, run_id=a["run_id"])
    note = next(n for n in card.notes if n.startswith("Not trusted"))
    assert "c=1: 5.0 ms against a bound of 2.0 ms" in note
    assert not any("provenance.self_check" in n for n in card.notes)
