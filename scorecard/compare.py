"""Compare two or more scorecards: figure deltas against the first (the baseline) at matched
load, the per-level delta table, the config diff (launch flags and env) and the workload check.

- **Matched load** (matched.py): probe figures (latency percentiles, throughput, cost per unit)
  are set against each other only at a load level every run measured; the headline deltas take
  them from the highest shared level and name it. Runs with no level in common get a refusal in
  words (`refusal`) and no cross-level delta; goodput within the SLO needs no shared level.
- **Verdicts** by METRIC_SPECS direction: `better` / `worse`, `same` (equal), `tie` (inside the
  measured spread of collectors/probe/stats.py, or under 5 % without one). No verdict where
  the figures cannot be set against each other: `not comparable` (workload fingerprints differ:
  collectors.probe.fingerprint.diff_fingerprints says what), `different levels` (no shared
  level), `different sources` (probe sweep vs canary vs server log vs /metrics histogram),
  `canary only` (one request at a time) and `no sweep` (latency and throughput of a run with
  no probe sweep: its load is unknown). Between two probe runs the server's and GPUs' figures
  (RUN_LOAD_SOURCES) were read under each sweep's load, so they are workload-bound too.
  `notes` says why, once per reason.
- **What differs** (`summary`): one sentence naming the workload and config differences and
  what to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from collectors.probe import stats as spread_mod
from present.format import fmt_ts, launch_label
from scorecard import definitions, matched
from scorecard.compare_sides import config_diff, output_sentence
from scorecard.compute import level_name
from scorecard.matched import LevelDelta
from scorecard.metric_specs import METRIC_SPECS
from scorecard.model import NOT_APPLICABLE, NOT_CONFIGURED, Figure, Scorecard
from storage import repo, units

#: Figures that depend on the probe workload (the others come from server samples and events).
WORKLOAD_SOURCES = ("probe", "canary")
#: Figures the server and GPUs report: during a probe run's scorecard they were read under the
#: sweep's load, so between two probe runs they depend on the workload too
RUN_LOAD_SOURCES = ("server", "gpu")
#: verdicts that set nothing against anything: shown without colour, explained in `notes`
NO_VERDICT = ("not comparable", "different levels", "different sources", "different definitions",
              "burst stream", "canary only", "no sweep")
NOTES = {
    "different levels": "Figures of a load level are only set against the same level: these "
                        "runs share none, so they carry no verdict.",
    "different sources": "Figures measured by different sources (probe sweep, canary, scheduler "
                         "log, /metrics histogram) are shown side by side without a verdict: "
                         "one source's number is not the other's.",
    "different definitions": "The engines define these figures differently (each figure's note "
                             "says how): shown side by side without a verdict, since one engine's "
                             "number is not the other's.",
    "burst stream": "A side's stream arrived in a burst (its TPOT p50 under 0.2 ms: 5,000 tokens/s "
                    "within one request is no generation; the server held its tokens back and sent "
                    "them together): its gaps between tokens measure the burst, so client ITL and "
                    "TPOT carry no verdict; the server's own ITL histogram does.",
    "canary only": "Canary figures (one request at a time, no load) are shown without a "
                   "verdict: run a probe sweep on each side to compare latency under load.",
    "no sweep": "A side has no probe sweep, so its latency and throughput were measured under "
                "whatever load the server had: shown without a verdict. Run a sweep "
                "(Benchmarks) on each side to compare them at matched load.",
}


@dataclass
class Delta:
    key: str
    values: list[float | None]  # one per scorecard, baseline first
    deltas: list[float | None]  # value - baseline (None for the baseline or missing values)
    rel: list[float | None]  # (value - baseline) / |baseline|
    verdicts: list[str]  # baseline | better | worse | same | tie | n/a | one of NO_VERDICT
    spreads: list[list[float] | None] = field(default_factory=list)  # [lo, hi] or None per card


@dataclass
class Comparison:
    titles: list[str]
    fingerprints: list[str | None]
    comparable: bool
    workload_diff: list[list[str]]  # per non-baseline card: lines of what differs
    config_diff: list[dict[str, Any]]  # {key, values: [...]} for every flag/env that differs
    deltas: list[Delta] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: matched load (matched.py): the mode and levels every run measured, the headline level
    level_mode: str | None = None
    shared_levels: list[float] = field(default_factory=list)
    matched_level: float | None = None
    level_deltas: list[LevelDelta] = field(default_factory=list)
    refusal: str | None = None  # why no level is compared, and what to do
    goodput: list[dict[str, Any]] = field(default_factory=list)  # per card: {level, rps, why}
    summary: str = ""  # what differs, in one sentence with what to do
    #: per non-baseline card: what differs besides the level sets (LEVEL_SET_FIELDS); the
    #: figures read at a shared level are judged on this one
    level_workload_diff: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why some figures carry no verdict
    #: per non-baseline card: its run's greedy outputs against the baseline run's, in words
    #: ("" when it has no output check against this baseline)
    outputs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: workload fields that only say which levels ran and how many requests each had: figures read
#: at a level both runs measured do not depend on them
LEVEL_SET_FIELDS = ("levels", "requests_per_level", "warmup_per_level")


def reduced_diff(lines: list[str]) -> list[str]:
    """`lines` (diff_fingerprints) without the level-set fields (LEVEL_SET_FIELDS)."""
    out = []
    for line in lines:
        m = _DIFF_LINE.match(line)
        if m is None or m["key"].split(".")[0] not in LEVEL_SET_FIELDS:
            out.append(line)
    return out


def diff_details(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """What differs between two fingerprint details (the probe engineer's diff_fingerprints)."""
    from collectors.probe.fingerprint import diff_fingerprints

    return diff_fingerprints(a, b)


#: workload fields in words, for the one-sentence summary (the first dotted part decides)
FIELD_WORDS = {
    "max_new_tokens": "output length", "input_lengths": "input length", "levels": "load levels",
    "mode": "load mode", "prompt_set": "prompt set", "prompts_hash": "prompts",
    "requests_per_level": "requests per level", "warmup_per_level": "warm-up requests",
    "sampling": "sampling", "model": "model", "api": "API", "ignore_eos": "ignore_eos",
    "image.size": "image size", "image.steps": "steps", "image.n": "images per request",
    "image.guidance": "guidance", "image.seed": "seed",
}
_DIFF_LINE = re.compile(r"^(?P<key>[^:]+): (?P<a>.*) -> (?P<b>.*)$")


def _field_words(line: str) -> str:
    m = _DIFF_LINE.match(line)
    if m is None:
        return line
    key = m["key"]
    name = FIELD_WORDS.get(key) or FIELD_WORDS.get(key.split(".")[0]) or key
    return f"{name} ({m['a']} vs {m['b']})"


def summary(workload_diff: list[list[str]], config: list[dict[str, Any]], no_sweep: list[str],
            refused: bool = False, shared_level: str | None = None) -> str:
    """What differs, in one sentence with what to do. `shared_level` names the level every run
    measured: when only the level sets differ, the runs are compared there and no rerun is
    asked for."""
    if no_sweep:
        return (f"No probe sweep behind {', '.join(no_sweep)}: latency, throughput and cost are "
                "not measured at a known load; run a sweep (Benchmarks) on each side, then "
                "compare the runs.")
    words: list[str] = []
    for lines in workload_diff:
        for w in (_field_words(line) for line in lines):
            if w not in words:
                words.append(w)
    if refused and not any(w.startswith("load levels") for w in words):
        words.append("load levels")
    settings = [r["key"].removeprefix("flag.").removeprefix("env.") for r in config]
    if (words and shared_level is not None and not refused
            and not any(reduced_diff(lines) for lines in workload_diff)):
        what = ", ".join(words[:-1]) + (" and " if len(words) > 1 else "") + words[-1]
        return (f"These runs differ only in {what}: their load-level figures are compared at "
                f"{shared_level}, a level both measured.")
    if words:
        what = ", ".join(words[:-1]) + (" and " if len(words) > 1 else "") + words[-1]
        return (f"These runs differ in {what}; rerun the candidate with the baseline's workload "
                "(Benchmarks → Rerun) to compare them.")
    if settings:
        shown = ", ".join(settings[:4]) + (f" and {len(settings) - 4} more" if len(settings) > 4 else "")
        return (f"Same workload; the launches differ in {shown}: the deltas below are what "
                "that change does.")
    return "Same workload and the same launch settings: any delta below is run-to-run noise."


def _source(fig: Figure | None) -> str:
    """Where a figure was measured: its source, and for server figures which series (a log
    mean and a /metrics histogram of the same quantity are different sources)."""
    if fig is None:
        return ""
    if fig.source != "server":
        return fig.source
    return re.sub(r"[\d.]+", "#", fig.note.split(";")[0])


def _at_level(card: Scorecard, key: str, level: float | None) -> tuple[float | None, Any]:
    """(value, spread) of a level figure at `level`; the card's own figure when it has no
    probe levels or the figure is not applicable / not configured."""
    fig = card.figures.get(key)
    if fig is None or level is None or not card.levels or fig.status in (
            NOT_APPLICABLE, NOT_CONFIGURED):
        return (None if fig is None else fig.value), None
    lv = matched.levels_of(card).get(level) or {}
    return lv.get(key), (lv.get("spread") or {}).get(key)


#: figures made of level figures, read at the matched level: key -> (numerator, denominator)
LEVEL_RATIOS = {"ttft_p99_p50_ratio": ("ttft_p99_s", "ttft_p50_s")}


def _ratio_at_level(cards: list[Scorecard], key: str, level: float | None) -> list[float | None] | None:
    """A LEVEL_RATIOS figure of each card read at `level`, when the cards' own headline levels
    differ (each card's figure is of its own level); None when they agree or the figure is not
    the probe's (canary figures have no level)."""
    figs = [c.figures.get(key) for c in cards]
    if any(f is None or f.source != "probe" for f in figs):
        return None
    if len({c.subject.get("level") for c in cards}) == 1:
        return None
    if level is None:
        return [None] * len(cards)  # no shared level: "different levels"
    num, den = LEVEL_RATIOS[key]
    out: list[float | None] = []
    for c in cards:
        lv = matched.levels_of(c).get(level) or {}
        a, b = lv.get(num), lv.get(den)
        out.append(a / b if a is not None and b else None)
    return out


def _workload_bound(spec: Any, cards: tuple[Scorecard, Scorecard], pair: tuple[Figure | None, Figure | None],
                    probe_run: bool) -> bool:
    """Whether a figure of this pair depends on the workload (so differing workloads refuse it)."""
    bound = WORKLOAD_SOURCES + (RUN_LOAD_SOURCES if probe_run else ())
    if any(f is not None and f.source in bound for f in pair):
        return True
    # cost per token / image / request is price ÷ measured throughput: it inherits the workload
    # of the throughput it was divided by
    return spec.dimension == "cost" and spec.key != "gpu_usd_per_hour" and any(
        (f := c.figures.get(k)) is not None and f.source in WORKLOAD_SOURCES
        for c in cards for k in ("output_tok_s", "rps", "images_per_min"))


#: the client figures made of the gaps between streamed tokens
GAP_FIGURES = ("itl_", "tpot_")


def burst(card: Scorecard, level: float | None) -> bool:
    """True when `card`'s stream arrived in one burst at `level` (matched.is_burst: its TPOT p50
    under 0.2 ms, 5,000 tokens/s within a request). A run whose probe did not trust itself (its
    event loop lagged: chunks piled up in the socket and read as one) is no evidence of a burst."""
    if (card.provenance.get("self_check") or {}).get("trusted") is False:
        return False
    tpot = _at_level(card, "tpot_p50_s", level)[0]
    return matched.is_burst(tpot if tpot is not None else _at_level(card, "itl_p50_s", level)[0])


def _level_notes(level_deltas: list[LevelDelta], used: list[str]) -> list[str]:
    """The notes of verdicts only the per-level table gives (a burst at one level only)."""
    seen = {v for ld in level_deltas for v in ld.verdicts[1:]}
    return [NOTES[v] for v in NOTES if v in seen and v not in used]


def compare(cards: list[Scorecard]) -> Comparison:
    """Compare scorecards against the first; needs at least two."""
    if len(cards) < 2:
        raise ValueError("a comparison needs at least two scorecards")
    base = cards[0]
    fps = [c.provenance.get("fingerprint") for c in cards]
    no_sweep = [c.title for c in cards if c.subject.get("latency_source") != "probe"]
    workload_diff: list[list[str]] = []
    level_diff: list[list[str]] = []  # the same without the level sets (LEVEL_SET_FIELDS)
    warnings: list[str] = []
    comparable = True
    for c in cards[1:]:
        lines: list[str] = []
        swept = [x.title for x in (base, c) if x.subject.get("latency_source") == "probe"]
        if len(swept) == 1:  # one side has no sweep: one line, not every field "(absent)"
            lines = [f"probe sweep: only {swept[0]} has one"]
        elif c.provenance.get("fingerprint") != base.provenance.get("fingerprint"):
            lines = diff_details(base.provenance.get("fingerprint_detail"),
                                 c.provenance.get("fingerprint_detail"))
            if not lines:  # hashes differ but details agree
                lines = [f"fingerprint: {base.provenance.get('fingerprint')} -> "
                         f"{c.provenance.get('fingerprint')}"]
        workload_diff.append(lines)
        level_diff.append(reduced_diff(lines))
    mode, shared = matched.shared_levels(cards)
    level = shared[-1] if shared else None
    for c, lines, reduced in zip(cards[1:], workload_diff, level_diff, strict=True):
        if lines:
            comparable = False
        if reduced or (lines and level is None):
            warnings.append(f"{c.title}: workload differs from {base.title}; probe and canary "
                            "deltas are marked not comparable")
    refused = matched.refusal(cards)
    used: list[str] = []
    # both cards score a probe run: their server and GPU figures were read under its load
    probe_runs = [False] + [base.subject.get("run_id") is not None
                            and c.subject.get("run_id") is not None for c in cards[1:]]
    deltas = []
    for spec in METRIC_SPECS:
        figs = [c.figures.get(spec.key) for c in cards]
        at_level = spec.key in matched.LEVEL_KEYS
        got = [_at_level(c, spec.key, level) if at_level else
               ((f.value if f else None), None) for c, f in zip(cards, figs, strict=True)]
        values = [v for v, _ in got]
        spreads = [s for _, s in got]
        at_ratio = _ratio_at_level(cards, spec.key, level) if spec.key in LEVEL_RATIOS else None
        if at_ratio is not None and level is not None:  # read at the matched level
            values, spreads, at_level = at_ratio, [None] * len(cards), True
        if all(v is None for v in values):
            continue  # absent on every side: the summary says what is missing
        d: list[float | None] = [None]
        rel: list[float | None] = [None]
        verdicts = ["baseline"]
        b = values[0]
        for i, v in enumerate(values[1:], start=1):
            pair = (figs[0], figs[i])
            workload_bound = _workload_bound(spec, (cards[0], cards[i]), pair, probe_runs[i])
            if b is None or v is None:
                d.append(None)
                rel.append(None)
                verdicts.append("n/a")
                continue
            if units.is_category(spec.unit):  # a category, not a quantity: same or not, no delta
                d.append(None)
                rel.append(None)
                verdicts.append("same" if v == b else "n/a")
                continue
            if (at_level and refused and workload_bound) or (at_ratio is not None and level is None):
                d.append(None)  # never a delta across load levels
                rel.append(None)
                verdicts.append("different levels")
                continue
            d.append(v - b)
            rel.append((v - b) / abs(b) if b != 0 else None)
            # a figure read at a level both runs measured does not depend on the level sets
            differs = level_diff[i - 1] if at_level and level is not None else workload_diff[i - 1]
            if differs and workload_bound:
                verdict = "not comparable"
            elif (no_sweep and spec.dimension in ("latency", "throughput", "cost")
                  and spec.key != "gpu_usd_per_hour"
                  and not all(f is not None and f.source == "canary" for f in pair)):
                verdict = "no sweep"
            elif definitions.defined_apart(cards[0], cards[i], spec.key):
                verdict = "different definitions"
            elif spec.key.startswith(GAP_FIGURES) and any(burst(c, level) for c in (cards[0], cards[i])):
                verdict = "burst stream"
            elif _source(pair[0]) != _source(pair[1]):
                verdict = "different sources"
            elif any(f is not None and f.source == "canary" for f in pair):
                verdict = "canary only"
            else:
                verdict = matched.judge(spec, b, v, spreads[0], spreads[i])
            verdicts.append(verdict)
            if verdict in NOTES and verdict not in used:
                used.append(verdict)
        deltas.append(Delta(spec.key, values, d, rel, verdicts, spreads))
    kind = str(base.subject.get("server_kind") or "llm")
    level_deltas = matched.level_deltas(cards, kind, level_diff)
    return Comparison(
        titles=[c.title for c in cards],
        fingerprints=fps,
        comparable=comparable,
        workload_diff=workload_diff,
        level_workload_diff=level_diff,
        config_diff=config_diff(cards),
        deltas=deltas,
        warnings=warnings,
        level_mode=mode,
        shared_levels=shared,
        matched_level=level,
        level_deltas=level_deltas,
        refusal=refused,
        goodput=[matched.goodput(c) for c in cards],
        summary=summary(workload_diff, config_diff(cards), no_sweep, refused is not None,
                        None if level is None else level_name(mode, level)),
        notes=[NOTES[v] for v in used] + _level_notes(level_deltas, used),
        outputs=[output_sentence(c, base) for c in cards[1:]],
    )


def resolution_caption(cards: list[Scorecard]) -> str | None:
    """One sentence naming the scorecards read (partly) from rollups and at what resolution;
    None when every card is from raw samples."""
    rolled = [f"{c.title}: {c.subject.get('resolution')}" for c in cards
              if (c.subject.get("resolution") or "raw") != "raw"]
    if not rolled:
        return None
    return ("Older than the raw samples kept (retention.samples_days), so read from rollups — "
            "averages, sums, min and max are exact, percentiles and time above a threshold are "
            "not available: " + "; ".join(rolled) + ".")


#: the figures of the one-line summary of an image A/B, with their short names
IMAGE_HEADLINE = (("image_p50_s", "p50"), ("image_p99_s", "p99"), ("images_per_min", "images/min"),
                  ("usd_per_image", "$/image"), ("image_step_s", "s/step"),
                  ("peak_mem_bytes", "peak memory"))
LLM_HEADLINE = (("ttft_p50_s", "TTFT p50"), ("ttft_p99_s", "TTFT p99"),
                ("output_tok_s", "output tok/s"), ("usd_per_1m_output_tok", "$/1M tok"))
#: headline figures of the whole run (server log, GPU memory), never read at a load level
WHOLE_RUN = ("image_step_s", "peak_mem_bytes")


def _goodput_clause(cmp: Comparison, index: int) -> str:
    """"goodput within the SLO 1.75 → 2.10 req/s (+20 %)", or "(tie)" inside the goodput
    levels' measured spreads (spread.is_tie); "≥ X" and no percentage where a run's goodput is
    at its highest level (the sweep stopped before the SLO broke). No clause when the workloads
    differ besides their level sets or the two cards' SLO targets differ: their goodputs
    answer different questions."""
    if len(cmp.goodput) <= index:
        return ""
    a, b = cmp.goodput[0], cmp.goodput[index]
    if a.get("rps") is None or b.get("rps") is None or a.get("slo") != b.get("slo"):
        return ""
    if len(cmp.level_workload_diff) >= index and cmp.level_workload_diff[index - 1]:
        return ""

    def figure(g: dict[str, Any]) -> str:
        return ("≥ " if g.get("capped") else "") + f"{g['rps']:.2f}"

    capped = a.get("capped") or b.get("capped")
    rel = (b["rps"] - a["rps"]) / abs(a["rps"]) if a["rps"] and not capped else None
    pct = "" if rel is None else f" ({rel * 100:+.0f} %)".replace("-", "−")
    tie = " (tie)" if spread_mod.is_tie(a["rps"], b["rps"], a.get("spread"), b.get("spread")) else ""
    return f"goodput within the SLO {figure(a)} → {figure(b)} req/s{pct}{tie}"


def headline(cmp: Comparison, kind: str, index: int = 1) -> str:
    """One line of the deltas that matter, card `index` against the baseline, at the matched
    level it names ("at concurrency 2: p50 −30 %, …"): relative for times, rates and prices,
    absolute for memory ("peak memory +3.0 GiB"); a tie says so. Whole-run figures (WHOLE_RUN:
    s/step, peak memory) follow, labelled "whole run: …". Figures without a verdict
    (NO_VERDICT) are left out; with no shared level only goodput within the SLO is offered."""
    by_key = {d.key: d for d in cmp.deltas}
    level_parts: list[str] = []
    whole: list[str] = []  # WHOLE_RUN figures: after the level's, labelled "whole run"
    for key, short in IMAGE_HEADLINE if kind == "image" else LLM_HEADLINE:
        parts = whole if key in WHOLE_RUN else level_parts
        d = by_key.get(key)
        delta, rel = (None, None) if d is None else (d.deltas[index], d.rel[index])
        if d is None or delta is None or d.verdicts[index] in NO_VERDICT:
            continue
        if key == "peak_mem_bytes":
            parts.append(f"{short} {delta / (1 << 30):+.1f} GiB")
        elif rel is not None:
            parts.append(f"{short} {rel * 100:+.0f} %".replace("-", "−"))
        else:
            continue
        if d.verdicts[index] == "tie":
            parts[-1] += " (tie)"
    line = ", ".join(level_parts)
    if line and cmp.matched_level is not None:
        line = f"at {level_name(cmp.level_mode, cmp.matched_level)}: {line}"
    run = f"whole run: {', '.join(whole)}" if whole else ""
    good = _goodput_clause(cmp, index)
    return "; ".join(p for p in (line, run, good) if p)


# ---------------------------------------------------------------------------------------------
# what a page can offer to compare


def run_choices(engine: Engine, *, limit: int = 100, include: Iterable[int] = ()) -> list[tuple[int, str]]:
    """(run id, label) of finished probe runs, newest first; the runs named in `include` (a
    link's ids) are offered too when they exist and are done, however old."""
    names = {s.id: s.name for s in repo.list_servers(engine, include_retired=True)}
    runs = repo.list_probe_runs(engine, limit=limit)
    seen = {r.id for r in runs}
    runs += [r for i in dict.fromkeys(include) if i not in seen and (r := repo.get_probe_run(engine, run_id=i))]
    out = []
    for r in runs:
        if r.status != "done" or r.id is None:
            continue
        when = fmt_ts(r.started_at or r.created_at)
        out.append((r.id, f"#{r.id} {names.get(r.server_id, r.url)} · {r.name or r.api} · "
                           f"fp {r.fingerprint[:8] or '—'} · {when}"))
    return out


def launch_choices(engine: Engine, *, limit: int = 100, include: Iterable[int] = ()) -> list[tuple[int, str]]:
    """(launch id, label) of launches, newest first (and those named in `include`, however old);
    a launch is named by its number among its server's launches ("demo launch 3",
    format.launch_label), never by its row id."""
    names = {s.id: s.name for s in repo.list_servers(engine, include_retired=True)}
    launches = [la for la in repo.list_launches(engine, limit=limit) if la.id is not None]
    seen = {la.id for la in launches}
    launches += [la for i in dict.fromkeys(include) if i not in seen and (la := repo.get_launch(engine, launch_id=i))]
    numbers = repo.launch_numbers(engine, [la.id for la in launches if la.id is not None])
    return [(la.id, f"{launch_label(names.get(la.server_id, '?'), numbers.get(la.id))} · "
                    f"{la.profile_name or '—'} · {la.status} · {fmt_ts(la.started_at)}")
            for la in launches if la.id is not None]
