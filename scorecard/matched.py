"""Compare at matched load: the probe figures of two or more scorecards are set against each other
only at a load level every run measured (same mode, same value), and each difference is judged
against the measured spread of both sides (collectors/probe/stats.py, carried per level by
compute.py as `spread`).

- **Shared levels**: the levels every card's probe run measured. The **matched level** is the
  highest of them; compare.py takes the headline deltas' probe figures (latency percentiles,
  throughput, cost per unit) from it and names it ("at concurrency 2: p50 −30 %").
- **No shared level**: `refusal` says in words which levels each run measured and what to do;
  no delta is made across levels.
- **Goodput within the SLO** needs no shared level: collectors/probe/stats.py's definition (the
  highest level at which every latency target and the success-rate target hold; its requests/s),
  fed with each card's own SLO targets. Without a latency target there is no goodput, and the
  comparison says so. A goodput at a run's highest level is a lower bound ("≥"); compare.py
  sets two goodputs against each other only under the same SLO targets and workload.
- **Verdicts**: `same` (equal), `tie` (inside the measured spread or under spread.FLOOR_REL; under
  spread.UNKNOWN_REL when a spread is unknown), else `better` / `worse` by METRIC_SPECS direction; `n/a` for an
  informational figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors.probe import stats as probe_stats
from collectors.probe.report_model import ImageFigures, Level, Stats, Throughput
from present.format import fmt_value
from scorecard.compute import SPREAD_KEYS, level_name
from scorecard.metric_specs import SPECS_BY_KEY, MetricSpec
from scorecard.model import Scorecard

#: figures a load level has (compute.level_figures), so they are only compared level by level
LEVEL_KEYS = SPREAD_KEYS
#: the rows of the per-level delta table
LLM_LEVEL_TABLE = ("ttft_p50_s", "ttft_p99_s", "itl_p50_s", "e2e_p50_s", "rps", "output_tok_s",
                   "usd_per_1m_output_tok")
IMAGE_LEVEL_TABLE = ("image_p50_s", "image_p99_s", "images_per_min", "rps", "usd_per_image")
#: SLO keys goodput reads (collectors/probe/stats.py level_misses)
GOODPUT_TARGETS = ("ttft_p99_s", "itl_p99_s", "image_p99_s", "success_rate")


@dataclass
class LevelDelta:
    level: float
    key: str
    values: list[float | None]  # one per scorecard, baseline first
    rel: list[float | None]  # (value - baseline) / |baseline|
    spreads: list[list[float] | None]  # [lo, hi] per scorecard; None: not measured
    verdicts: list[str]  # baseline | same | tie | better | worse | n/a


def levels_of(card: Scorecard) -> dict[float, dict[str, Any]]:
    return {float(lv["level"]): lv for lv in card.levels}


def mode_of(card: Scorecard) -> str | None:
    mode = card.subject.get("level_mode")
    if mode is None and card.levels:
        mode = card.levels[0].get("mode")
    return None if mode is None else str(mode)


def shared_levels(cards: Sequence[Scorecard]) -> tuple[str | None, list[float]]:
    """(mode, the level values every card measured, ascending); ([], None) when a card has no
    probe levels or the modes differ."""
    if not cards or any(not c.levels for c in cards):
        return None, []
    modes = {mode_of(c) for c in cards}
    if len(modes) != 1:
        return None, []
    common = set.intersection(*(set(levels_of(c)) for c in cards))
    return modes.pop(), sorted(common)


def _ran(card: Scorecard) -> str:
    values = ", ".join(f"{v:g}" for v in sorted(levels_of(card)))
    mode = mode_of(card) or "concurrency"
    return f"{card.title} ran {mode} {values}"


def refusal(cards: Sequence[Scorecard]) -> str | None:
    """Why no level can be compared, in one paragraph with what to do; None when every card has
    levels in common, or a card has no probe levels (compare.py says that instead)."""
    if len(cards) < 2 or any(not c.levels for c in cards):
        return None
    mode, shared = shared_levels(cards)
    if shared:
        return None
    base = cards[0]
    wanted = ", ".join(level_name(mode_of(base), v) for v in sorted(levels_of(base)))
    return ("These runs share no load level, so their latency and throughput are not set against "
            "each other: " + "; ".join(_ran(c) for c in cards) + ". Rerun the candidate with the "
            "baseline's workload (Benchmarks → Rerun), or with levels that include the "
            f"baseline's ({wanted}), to compare them at matched load.")


def judge(spec: MetricSpec, base: float, other: float, base_spread: Sequence[float] | None,
          other_spread: Sequence[float] | None) -> str:
    """`other` against `base`: same | tie | better | worse | n/a (see the module docstring)."""
    if spec.better == "none":
        return "n/a"
    if base == other:
        return "same"
    if probe_stats.is_tie(base, other, base_spread, other_spread):
        return "tie"
    return "better" if (other < base) == (spec.better == "lower") else "worse"


def verdict_words(key: str, verdict: str, base_spread: Sequence[float] | None,
                  other_spread: Sequence[float] | None) -> str:
    """A verdict in words with its evidence: "tie (inside the measured spread 300.0–340.0 ms vs
    310.0–350.0 ms)", "better (spread not measured: more than 5 % apart)"."""
    if verdict not in ("tie", "better", "worse"):
        return verdict
    unit = SPECS_BY_KEY[key].unit if key in SPECS_BY_KEY else ""

    def rng(s: Sequence[float]) -> str:
        lo, hi = sorted(s)
        return f"{fmt_value(lo, unit)}–{fmt_value(hi, unit)}"

    if base_spread is None or other_spread is None:
        if verdict == "tie":
            return f"tie (spread not measured: under {probe_stats.UNKNOWN_REL * 100:g} %)"
        return (f"{verdict} (spread not measured: more than {probe_stats.UNKNOWN_REL * 100:g} % "
                "apart)")
    if verdict == "tie" and not probe_stats.overlap(base_spread, other_spread):
        return f"tie (under {probe_stats.FLOOR_REL * 100:g} %)"
    if verdict == "tie":
        return f"tie (inside the measured spread {rng(other_spread)} vs {rng(base_spread)})"
    return f"{verdict} (outside the measured spread {rng(base_spread)})"


def _rel(base: float | None, other: float | None) -> float | None:
    if base is None or other is None or base == 0:
        return None
    return (other - base) / abs(base)


#: a per-token time under this (5,000 tokens/s within one request) is no generation: the server
#: (a busy API process, a proxy) held the tokens back and handed them over at once
BURST_TPOT_S = 0.0002


def is_burst(tpot_p50: Any) -> bool:
    """The stream arrived in a burst: the median request's time per output token after the first
    (TPOT p50) is under BURST_TPOT_S, so the gaps between its tokens say nothing of the generation."""
    return isinstance(tpot_p50, int | float) and 0 <= tpot_p50 < BURST_TPOT_S


def _burst(lv: dict[str, Any]) -> bool:
    tpot = lv.get("tpot_p50_s")
    return is_burst(tpot if tpot is not None else lv.get("itl_p50_s"))


def level_deltas(cards: Sequence[Scorecard], kind: str,
                 workload_diff: Sequence[Sequence[str]] | None = None) -> list[LevelDelta]:
    """Per shared level, the level table's figures against the baseline's at the same level.
    `workload_diff`: per non-baseline card, what its workload differs in besides the level sets
    (compare.reduced_diff); a card with a difference gets "not comparable", never a colour."""
    diffs = list(workload_diff or [])
    _, shared = shared_levels(cards)
    table = IMAGE_LEVEL_TABLE if kind == "image" else LLM_LEVEL_TABLE
    by_card = [levels_of(c) for c in cards]
    out = []
    for level in shared:
        for key in table:
            lvs = [lv[level] for lv in by_card]
            values = [lv.get(key) for lv in lvs]
            if all(v is None for v in values):
                continue
            spreads = [(lv.get("spread") or {}).get(key) for lv in lvs]
            rel: list[float | None] = [None]
            verdicts = ["baseline"]
            for i, (v, s) in enumerate(zip(values[1:], spreads[1:], strict=True)):
                rel.append(_rel(values[0], v))
                if values[0] is None or v is None:
                    verdicts.append("n/a")
                elif i < len(diffs) and diffs[i]:
                    verdicts.append("not comparable")
                elif key.startswith(("itl_", "tpot_")) and any(_burst(lv) for lv in (lvs[0], lvs[i + 1])):
                    verdicts.append("burst stream")  # the gaps measure a buffered burst (compare.NOTES)
                else:
                    verdicts.append(judge(SPECS_BY_KEY[key], values[0], v, spreads[0], s))
            out.append(LevelDelta(level, key, values, rel, spreads, verdicts))
    return out


def _report_level(lv: dict[str, Any]) -> Level:
    """A scorecard level as the probe report level collectors/probe/stats.py goodput reads."""
    value = float(lv["level"])
    return Level(
        concurrency=None if lv.get("mode") == "rate" else value,
        rate=value if lv.get("mode") == "rate" else None,
        ttft_s=Stats(p99=lv.get("ttft_p99_s")),
        itl_s=Stats(p99=lv.get("itl_p99_s")),
        image=ImageFigures(per_image_s=Stats(p99=lv.get("image_p99_s"))),
        success_rate=lv.get("success_rate"),
        throughput=Throughput(rps=lv.get("rps")),
    )


def goodput(card: Scorecard) -> dict[str, Any]:
    """{level, rps, spread, capped, slo, why}: the card's goodput within its own SLO targets
    (collectors/probe/stats.py goodput); `spread` is the goodput level's rps [lo, hi] (None: not measured),
    `capped` True when that level is the highest the run measured (the goodput is at least
    `rps`: the sweep stopped before the SLO broke), `slo` the targets it was judged on; level and
    rps None with `why` when there is none."""
    slo = {k: float(f.target) for k in GOODPUT_TARGETS
           if (f := card.figures.get(k)) is not None and f.target is not None}
    image = card.subject.get("server_kind") == "image"
    latency = ("image_p99_s",) if image else ("ttft_p99_s", "itl_p99_s")
    none: dict[str, Any] = {"level": None, "rps": None, "spread": None, "capped": False,
                            "slo": slo}
    if not card.levels:
        return {**none, "why": "no probe sweep"}
    trusted = (card.provenance.get("self_check") or {}).get("trusted") is not False
    if not image and trusted and "itl_p99_s" in slo and any(_burst(lv) for lv in card.levels):
        # the stream arrived in a burst: any ITL target is met without saying anything of the
        # generation, so goodput rests on the other targets only
        slo.pop("itl_p99_s")
        none["slo"] = slo
        if not any(k in slo for k in latency):
            return {**none, "why": "its stream arrived in a burst (the ITL target says nothing of it): "
                                   "set a TTFT target (ttft_p99_s)"}
    if not any(k in slo for k in latency):
        return {**none, "why": f"no latency target set ({' or '.join(latency)})"}
    best, why = probe_stats.goodput([_report_level(lv) for lv in card.levels], slo, image=image)
    if best is None:
        return {**none, "why": why}
    lv = levels_of(card)[probe_stats.level_value(best)]
    return {"level": float(lv["level"]), "rps": lv.get("rps"),
            "spread": (lv.get("spread") or {}).get("rps"),
            "capped": float(lv["level"]) == max(levels_of(card)), "slo": slo,
            "why": f"highest level meeting the SLO: {level_name(mode_of(card), lv['level'])}"}
