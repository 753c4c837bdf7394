"""The verdict a review export leads with, in words, shared by every format (md, html, png).

A review reads top down: what is scored (subject_line), the verdict (grades of each scorecard;
for a comparison, one sentence per candidate against the baseline and its per-metric verdicts
grouped as better / worse / tie / not comparable), then the figures, then the provenance. This
module owns the words of the verdict; the scores and deltas themselves are the scorecard's and
scorecard/compare.py's (Comparison), read as they are.

- A verdict says what it compares: each sentence names both scorecards and the load level each
  headline figure was read at (the level both ran: scorecard/matched.py), or the refusal when
  they share none.
- A tie is called a tie: compare.py's `same` (a change inside the noise: under
  compare.SAME_TOLERANCE, or inside the measured spread, collectors/probe/stats.py) reads "tie".
"""

from __future__ import annotations

from collections.abc import Sequence

from present.format import fmt_ts, launch_label
from scorecard.compare import NO_VERDICT, Comparison, headline
from scorecard.metric_specs import DIMENSION_LABELS, DIMENSIONS, SPECS_BY_KEY
from scorecard.model import Scorecard

GRADE_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "none": "—"}
#: a Comparison verdict in words (a verdict not listed reads as it is)
DELTA_WORDS = {"same": "tie", "tie": "tie", "baseline": "baseline", "better": "better",
               "worse": "worse", "n/a": "n/a", "not comparable": "not comparable"}
#: the groups of per-metric verdicts, in the order a reader wants them, with their heading
GROUPS = (("worse", "Worse"), ("better", "Better"),
          ("not comparable", "Not comparable (the notes below say why)"),
          ("tie", "Tie (inside the measured noise)"))


#: ties beyond this many are counted, not listed, in the verdict (the deltas table has them all)
TIES_LISTED = 6


def words(verdict: str) -> str:
    return DELTA_WORDS.get(verdict, verdict)


def level_text(card: Scorecard) -> str | None:
    """The load level a scorecard's probe figures were read at ("concurrency 4"), or None."""
    s = card.subject
    if s.get("level") is None:
        return None
    return f"{s.get('level_mode') or 'level'} {float(s['level']):g}"


def subject_line(card: Scorecard) -> str:
    """One line naming what a scorecard scores: server, launch, run, window, level, source."""
    s = card.subject
    bits = [f"server {s.get('server')} ({s.get('server_kind')})"]
    if s.get("launch_id") is not None:
        bits.append(launch_label(None, s.get("launch_number")))  # its number, as titles say
    if s.get("run_id") is not None:
        bits.append(f"probe run #{s['run_id']}" + (f" {s['run_name']}" if s.get("run_name") else ""))
    bits.append(f"window {fmt_ts(s.get('since'))} → {fmt_ts(s.get('until'))} "
                f"({s.get('window_label')})")
    if (lv := level_text(card)) is not None:
        bits.append(f"headline level {lv}")
    bits.append(f"latency from {s.get('latency_source')}")
    return " · ".join(bits)


def grade_rows(cards: Sequence[Scorecard]) -> list[list[str]]:
    """[dimension, grade of each card] per dimension: the grades side by side."""
    return [[DIMENSION_LABELS[d], *(GRADE_MARK[c.dimensions[d].grade] for c in cards)]
            for d in DIMENSIONS]


def lead_sentence(cmp: Comparison, cards: Sequence[Scorecard], index: int) -> str:
    """"B against A (baseline), at concurrency 4: TTFT p50 +100 %, ..." for card `index`: the
    headline is read at a load level both ran (compare.headline names it), or, with none shared,
    the refusal says so and only goodput within the SLO is offered."""
    kind = str(cards[0].subject.get("server_kind") or "llm")
    line = headline(cmp, kind, index)
    if not line:
        line = cmp.refusal or ("no headline figure on both sides" if cmp.comparable else
                               "no headline figure is comparable (what differs is said below)")
    elif cmp.refusal:
        line = f"{line} ({cmp.refusal})"
    return f"{cmp.titles[index]} against {cmp.titles[0]} (baseline): {line}"


def verdict_groups(cmp: Comparison, index: int) -> list[tuple[str, str, list[str]]]:
    """(verdict, heading, ["TTFT p50 (+100.0 %)", ...]) for each non-empty group of per-metric verdicts
    of card `index` against the baseline (GROUPS order; n/a figures are left out)."""
    found: dict[str, list[str]] = {}
    for d in cmp.deltas:
        verdict = words(d.verdicts[index])
        if verdict in NO_VERDICT:  # levels, sources, definitions, a burst stream, canary only, no sweep
            verdict = "not comparable"
        if verdict in ("n/a", "baseline"):
            continue
        rel = d.rel[index]  # a figure not comparable is never set against the baseline's
        pct = "" if rel is None or verdict == "not comparable" else f" ({rel * 100:+.1f} %)"
        found.setdefault(verdict, []).append(SPECS_BY_KEY[d.key].label + pct)
    ties = found.get("tie", [])
    if len(ties) > TIES_LISTED:  # a tie's ±0 % is noise: name a few, count the rest
        found["tie"] = [t.split(" (")[0] for t in ties[:TIES_LISTED]] + [
            f"and {len(ties) - TIES_LISTED} more (the deltas table lists them)"]
    named = {key for key, _ in GROUPS}
    out = [(key, title, found[key]) for key, title in GROUPS if found.get(key)]
    out += [(key, key.capitalize(), items) for key, items in found.items() if key not in named]
    return out


def comparability(cmp: Comparison) -> tuple[str, list[str]]:
    """(one sentence, the lines of what differs) about whether the workloads match."""
    outputs = [f"{t}: {o}" for t, o in zip(cmp.titles[1:], cmp.outputs, strict=False) if o]
    if cmp.summary:
        lines = [f"{t}: {line}" for t, lines in zip(cmp.titles[1:], cmp.workload_diff, strict=True)
                 for line in lines]
        return cmp.summary, lines + list(cmp.notes) + outputs
    if cmp.comparable:
        return "Same workload fingerprint: the probe deltas are comparable.", outputs
    lines = [f"{t}: {line}" for t, lines in zip(cmp.titles[1:], cmp.workload_diff, strict=True)
             for line in lines]
    return ("Workloads differ: probe deltas are not comparable (marked so below); rerun the "
            "baseline workload on the candidate to compare them.", lines + outputs)
