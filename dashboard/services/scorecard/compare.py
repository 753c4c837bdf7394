"""Compare two or more scorecards: figure deltas against the first (the baseline), the config diff
(launch flags and env) and the workload check.

Deltas are coloured by METRIC_SPECS direction: for a `lower` metric a smaller value is `better`.
Changes within SAME_TOLERANCE (relative) read `same`. Probe-derived figures of two scorecards are
comparable only when their workload fingerprints match; otherwise the comparison lists exactly
what differs (collectors.probe.fingerprint.diff_fingerprints) and marks those deltas
`not comparable` instead of better/worse. Latency from the canary against latency from a probe is
likewise not comparable (one request at a time versus a load level).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from dashboard.services.format import fmt_ts, launch_label
from dashboard.services.scorecard.metric_specs import METRIC_SPECS
from dashboard.services.scorecard.model import Scorecard
from storage import repo

SAME_TOLERANCE = 0.01  # |Δ| / |baseline| below 1 % is noise, not a verdict
#: Figures that depend on the probe workload (the others come from server samples and events).
WORKLOAD_SOURCES = ("probe", "canary")


@dataclass
class Delta:
    key: str
    values: list[float | None]  # one per scorecard, baseline first
    deltas: list[float | None]  # value - baseline (None for the baseline or missing values)
    rel: list[float | None]  # (value - baseline) / |baseline|
    verdicts: list[str]  # baseline | better | worse | same | n/a | not comparable


@dataclass
class Comparison:
    titles: list[str]
    fingerprints: list[str | None]
    comparable: bool
    workload_diff: list[list[str]]  # per non-baseline card: lines of what differs
    config_diff: list[dict[str, Any]]  # {key, values: [...]} for every flag/env that differs
    deltas: list[Delta] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def diff_details(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """What differs between two fingerprint details (the probe engineer's diff_fingerprints)."""
    from collectors.probe.fingerprint import diff_fingerprints

    return diff_fingerprints(a, b)


def _flat(prefix: str, d: dict[str, Any] | None) -> dict[str, str]:
    return {f"{prefix}{k}": json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
            for k, v in (d or {}).items()}


def config_of(card: Scorecard) -> dict[str, str]:
    """Flags (server args, else argv) and env of a scorecard's launch, flattened to strings."""
    prov = card.provenance
    out = {"profile": str(card.subject.get("profile_name") or "—"),
           "sglang_version": str(prov.get("sglang_version") or "unknown")}
    if prov.get("server_args"):
        out.update(_flat("flag.", prov["server_args"]))
    elif prov.get("argv"):
        out["argv"] = " ".join(prov["argv"])
    out.update(_flat("env.", prov.get("env")))
    return out


def config_diff(cards: list[Scorecard]) -> list[dict[str, Any]]:
    configs = [config_of(c) for c in cards]
    keys = sorted(set().union(*configs))
    rows = []
    for k in keys:
        vals = [c.get(k) for c in configs]
        if len(set(vals)) > 1:
            rows.append({"key": k, "values": ["(unset)" if v is None else v for v in vals]})
    return rows


def _verdict(better: str, base: float, other: float) -> str:
    if better == "none":
        return "n/a"
    rel = (other - base) / abs(base) if base != 0 else (0.0 if other == base else float("inf"))
    if abs(rel) < SAME_TOLERANCE:
        return "same"
    lower_is_better = better == "lower"
    return "better" if (other < base) == lower_is_better else "worse"


def compare(cards: list[Scorecard]) -> Comparison:
    """Compare scorecards against the first; needs at least two."""
    if len(cards) < 2:
        raise ValueError("a comparison needs at least two scorecards")
    base = cards[0]
    fps = [c.provenance.get("fingerprint") for c in cards]
    workload_diff: list[list[str]] = []
    warnings: list[str] = []
    comparable = True
    for c in cards[1:]:
        lines: list[str] = []
        if c.provenance.get("fingerprint") != base.provenance.get("fingerprint"):
            lines = diff_details(base.provenance.get("fingerprint_detail"),
                                 c.provenance.get("fingerprint_detail"))
            if not lines:  # hashes differ but details agree (or one side has no probe run)
                lines = [f"fingerprint: {base.provenance.get('fingerprint')} -> "
                         f"{c.provenance.get('fingerprint')}"]
        src_a, src_b = base.subject.get("latency_source"), c.subject.get("latency_source")
        if src_a != src_b:
            lines.append(f"latency source: {src_a} -> {src_b}")
        if lines:
            comparable = False
            warnings.append(f"{c.title}: workload differs from {base.title}; probe and canary "
                            "deltas are marked not comparable")
        workload_diff.append(lines)
    deltas = []
    for spec in METRIC_SPECS:
        figs = [c.figures.get(spec.key) for c in cards]
        values = [f.value if f else None for f in figs]
        if all(v is None for v in values):
            continue
        d: list[float | None] = [None]
        rel: list[float | None] = [None]
        verdicts = ["baseline"]
        b = values[0]
        for i, v in enumerate(values[1:], start=1):
            workload_bound = any(f is not None and f.source in WORKLOAD_SOURCES
                                 for f in (figs[0], figs[i]))
            if spec.dimension == "cost" and spec.key != "gpu_usd_per_hour":
                # cost per token / image / request is price ÷ measured throughput: it inherits
                # the workload of the throughput it was divided by
                workload_bound = workload_bound or any(
                    (f := c.figures.get(k)) is not None and f.source in WORKLOAD_SOURCES
                    for c in (cards[0], cards[i]) for k in ("output_tok_s", "rps", "images_per_min"))
            if b is None or v is None:
                d.append(None)
                rel.append(None)
                verdicts.append("n/a")
                continue
            if spec.unit == "verdict":  # a category, not a quantity: same or not, no delta
                d.append(None)
                rel.append(None)
                verdicts.append("same" if v == b else "n/a")
                continue
            d.append(v - b)
            rel.append((v - b) / abs(b) if b != 0 else None)
            if workload_diff[i - 1] and workload_bound:
                verdicts.append("not comparable")
            else:
                verdicts.append(_verdict(spec.better, b, v))
        deltas.append(Delta(spec.key, values, d, rel, verdicts))
    return Comparison(
        titles=[c.title for c in cards],
        fingerprints=fps,
        comparable=comparable,
        workload_diff=workload_diff,
        config_diff=config_diff(cards),
        deltas=deltas,
        warnings=warnings,
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


def headline(cmp: Comparison, kind: str, index: int = 1) -> str:
    """One line of the deltas that matter, card `index` against the baseline: relative for
    times, rates and prices ("p50 −42 %"), absolute for memory ("peak memory +3.0 GiB")."""
    by_key = {d.key: d for d in cmp.deltas}
    parts = []
    for key, short in IMAGE_HEADLINE if kind == "image" else LLM_HEADLINE:
        d = by_key.get(key)
        delta, rel = (None, None) if d is None else (d.deltas[index], d.rel[index])
        if d is None or delta is None:
            continue
        if key == "peak_mem_bytes":
            parts.append(f"{short} {delta / (1 << 30):+.1f} GiB")
        elif rel is not None:
            parts.append(f"{short} {rel * 100:+.0f} %".replace("-", "−"))
        else:
            continue
        if d.verdicts[index] == "not comparable":
            parts[-1] += " (not comparable)"
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------
# what a page can offer to compare


def run_choices(engine: Engine, *, limit: int = 100) -> list[tuple[int, str]]:
    """(run id, label) of finished probe runs, newest first."""
    names = {s.id: s.name for s in repo.list_servers(engine, include_retired=True)}
    out = []
    for r in repo.list_probe_runs(engine, limit=limit):
        if r.status != "done" or r.id is None:
            continue
        when = fmt_ts(r.started_at or r.created_at)
        out.append((r.id, f"#{r.id} {names.get(r.server_id, r.url)} · {r.name or r.api} · "
                           f"fp {r.fingerprint[:8] or '—'} · {when}"))
    return out


def launch_choices(engine: Engine, *, limit: int = 100) -> list[tuple[int, str]]:
    """(launch id, label) of launches, newest first; a launch is named by its number among its
    server's launches ("demo launch 3", format.launch_label), never by its row id."""
    names = {s.id: s.name for s in repo.list_servers(engine, include_retired=True)}
    launches = [la for la in repo.list_launches(engine, limit=limit) if la.id is not None]
    numbers = repo.launch_numbers(engine, [la.id for la in launches if la.id is not None])
    return [(la.id, f"{launch_label(names.get(la.server_id, '?'), numbers.get(la.id))} · "
                    f"{la.profile_name or '—'} · {la.status} · {fmt_ts(la.started_at)}")
            for la in launches if la.id is not None]
