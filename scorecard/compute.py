"""ScorecardInputs -> Scorecard: every figure of METRIC_SPECS, graded against the SLO targets.

Pure (no storage): build.py gathers the inputs from storage, tests build them by hand.

Probe scorecards take client-side figures from the *headline level* of the run (by default the
level with the highest successful requests/s; ties go to the lower level) and stability figures
(success rate, errors) from every measured request of the run. Server-side figures (gen
throughput, batch, radix hit rate, energy, events, queue) come from the window, which for a probe
run is the run's own start -> finish. Without probes, latency comes from the canary (labelled
"canary only"; ITL/TPOT are then missing) and throughput from the server's own counters.

Each probe level also carries `spread`: figure key -> [lo, hi], the measured spread of that
figure (collectors/probe/stats.py: the level's measured requests in start order cut into
consecutive repeats, latency percentiles of each repeat by the same `level_figures`, throughput of
each repeat by stats.repeat_throughput, the probe report's own rule, widened to the whole level's
figure). A key is absent when the level has too few requests to repeat. Compare reads it
to call a difference inside the spread a tie.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collectors.probe import stats as probe_stats
from present.format import fmt_value
from scorecard import math as sm
from scorecard import slo as slo_mod
from scorecard.cost_stability import cost_figures, stability_figures
from scorecard.image import image_figures
from scorecard.inputs import (
    ScorecardInputs,
    col_sum,
    hourly,
    measured_ok,
    put,
)
from scorecard.metric_specs import (
    CACHE_TIERS,
    DIMENSIONS,
    METRIC_SPECS,
    SERVER_SERIES,
    SPECS_BY_KEY,
)
from scorecard.model import (
    MISSING,
    NOT_APPLICABLE,
    NOT_CONFIGURED,
    DimensionGrade,
    Figure,
    Scorecard,
)
from scorecard.walls import wall_figures
from storage import series_keys as sk

__all__ = ["ScorecardInputs", "compute_scorecard", "grade_figures", "headline", "level_name",
           "probe_levels"]

LATENCY_STATS = ("ttft", "itl", "tpot", "e2e")
#: level figures that get a measured spread (latency percentiles, throughput, cost per unit)
SPREAD_KEYS = tuple(f"{n}_p{p}_s" for n in (*LATENCY_STATS, "image") for p in sm.PCTS) + (
    "rps", "output_tok_s", "input_tok_s", "images_per_min", "usd_per_1m_output_tok",
    "usd_per_1m_total_tok", "usd_per_image", "usd_per_1k_requests")
SERVER_HIST = ("ttft", "itl", "e2e")


# ---------------------------------------------------------------------------------------------
# probe levels


def _itl_values(rows: pd.DataFrame) -> list[float]:
    out: list[float] = []
    for v in rows["itl_s"]:
        if isinstance(v, list | tuple | np.ndarray):
            out.extend(float(x) for x in v if x is not None)
    return out


def level_figures(rows: pd.DataFrame, *, kind: str, images_per_request: int,
                  gpu_usd_per_hour: float | None, warm_ends: list[float] | None = None,
                  closed_loop: bool = True) -> dict[str, Any]:
    """Figures of one load level from its measured rows (warm-up already removed; `warm_ends`:
    when the level's warm-up requests ended). Throughput is the probe report's (Benchmarks):
    steady_window's requests over its seconds."""
    ok = rows[rows["ok"].astype(bool)]
    out: dict[str, Any] = {"requests": int(len(rows)), "ok": int(len(ok))}
    lat: dict[str, list[float]] = {
        "ttft": pd.to_numeric(ok["ttft_s"], errors="coerce").dropna().tolist(),
        "itl": _itl_values(ok),
        "tpot": pd.to_numeric(ok["tpot_s"], errors="coerce").dropna().tolist(),
        "e2e": pd.to_numeric(ok["e2e_s"], errors="coerce").dropna().tolist(),
    }
    if kind == "image":
        lat["image"] = [v / max(images_per_request, 1) for v in lat["e2e"]]
    for name, values in lat.items():
        for p, v in sm.percentiles(values).items():
            out[f"{name}_p{p}_s"] = v
    starts = rows["start_ts"].astype(float).to_numpy()
    ends = starts + pd.to_numeric(rows["e2e_s"], errors="coerce").fillna(0.0).to_numpy()
    window = sm.request_window_s(starts, ends)
    mask, span = probe_stats.steady_window(starts.tolist(), ends.tolist(), rows["ok"].astype(bool).tolist(),
                               list(warm_ends or []), closed_loop)
    counted = rows[np.asarray(mask, dtype=bool)] if len(mask) else ok
    images = float(len(counted) * images_per_request) if kind == "image" else None
    out.update(sm.probe_throughput(
        n_ok=len(counted),
        tokens_in=col_sum(counted, "tokens_in") if kind != "image" else None,
        tokens_out=col_sum(counted, "tokens_out") if kind != "image" else None,
        images=images,
        window_s=span if span > 0 else None,
    ))
    out["window_s"] = window
    out.update(sm.cost_figures(gpu_usd_per_hour=gpu_usd_per_hour, rps=out["rps"],
                               output_tok_s=out["output_tok_s"], input_tok_s=out["input_tok_s"],
                               images_per_min=out["images_per_min"]))
    out["success_rate"] = sm.safe_div(float(len(ok)), float(len(rows)))
    return out


def _in_flight(rows: pd.DataFrame, figs: dict[str, Any], workers: float) -> float:
    """The requests in flight a closed-loop level's own rps implies (stats.level_in_flight:
    rps × Σ e2e ÷ successes), `workers` without an rps; the probe report's figure alike."""
    return probe_stats.level_in_flight(
        figs.get("rps"), pd.to_numeric(rows["e2e_s"], errors="coerce").dropna().tolist(),
        rows["ok"].astype(bool).tolist(), workers)


def _column(rows: pd.DataFrame, col: str) -> list[float | None]:
    return [None if pd.isna(v) else float(v) for v in pd.to_numeric(rows[col], errors="coerce")]


def _repeat_throughput(ordered: pd.DataFrame, in_flight: float | None, *, kind: str,
                       images_per_request: int) -> dict[str, list[float | None]]:
    """Per repeat of a level (rows in start order): rps, output and input tok/s, images/min by
    stats.repeat_throughput, the rule the probe report's spread uses (closed loop: Little's law at
    `in_flight`; open loop, `in_flight` None: completions inside each repeat's own window)."""
    starts = ordered["start_ts"].astype(float).tolist()
    e2e = _column(ordered, "e2e_s")
    ends = [t + (d or 0.0) for t, d in zip(starts, e2e, strict=True)]
    ok = ordered["ok"].astype(bool).tolist()

    def rate(amounts: list[float | None]) -> list[float | None]:
        return probe_stats.repeat_throughput(starts, ends, ok, e2e, amounts, in_flight=in_flight)

    none: list[float | None] = [None] * len(probe_stats.slices(starts))
    image = kind == "image"
    return {
        "rps": rate([1.0] * len(starts)),
        # images a minute: 60 × images per request, summed, over the seconds (the level's order)
        "images_per_min": rate([float(images_per_request * 60)] * len(starts)) if image else none,
        "output_tok_s": none if image else rate(_column(ordered, "tokens_out")),
        "input_tok_s": none if image else rate(_column(ordered, "tokens_in")),
    }


def level_spread(rows: pd.DataFrame, whole: dict[str, Any], concurrency: float | None = None,
                 **kwargs: Any) -> dict[str, list[float]]:
    """SPREAD_KEYS -> [lo, hi] of one level (collectors/probe/stats.py): its measured rows in
    start order, cut into repeats, each repeat's latency percentiles by level_figures(**kwargs),
    its throughput (and the cost that divides by it) by _repeat_throughput (`concurrency`: the
    in flight a closed loop's rps implies, _in_flight; None for an open loop); a key without a
    spread (too few requests, or no value in two repeats) is left out."""
    ordered = rows.sort_values("start_ts", kind="stable")
    parts = probe_stats.slices(list(range(len(ordered))))
    tput = _repeat_throughput(ordered, concurrency, kind=kwargs["kind"],
                              images_per_request=kwargs["images_per_request"])
    repeats: list[dict[str, Any]] = []
    for k, part in enumerate(parts):
        figs = level_figures(ordered.iloc[part[0]:part[-1] + 1], **kwargs)
        figs.update({key: values[k] for key, values in tput.items()})
        figs.update(sm.cost_figures(gpu_usd_per_hour=kwargs["gpu_usd_per_hour"], rps=figs["rps"],
                                    output_tok_s=figs["output_tok_s"], input_tok_s=figs["input_tok_s"],
                                    images_per_min=figs["images_per_min"]))
        repeats.append(figs)
    out: dict[str, list[float]] = {}
    for key in SPREAD_KEYS:
        values = [None if (v := figs.get(key)) is None else float(v) for figs in repeats]
        got = probe_stats.widen(probe_stats.from_values(values), whole.get(key))
        if got is not None:
            out[key] = got.as_list()
    return out


def probe_levels(inp: ScorecardInputs) -> list[dict[str, Any]]:
    df = inp.probe_requests
    if df is None or df.empty:
        return []
    warm = df[df["warmup"].astype(bool)]
    measured = df[~df["warmup"].astype(bool)]
    out = []
    for level, rows in measured.groupby("level", sort=True):
        w = warm[warm["level"] == level]
        w_ends = (w["start_ts"].astype(float) + pd.to_numeric(w["e2e_s"], errors="coerce").fillna(0.0)).tolist()
        kwargs: dict[str, Any] = {
            "kind": inp.kind, "images_per_request": inp.images_per_request,
            "gpu_usd_per_hour": hourly(inp), "warm_ends": w_ends,
            "closed_loop": inp.probe_mode == "concurrency"}
        figs = level_figures(rows, **kwargs)
        out.append({"level": float(level), "mode": inp.probe_mode, **figs,
                    "spread": level_spread(rows, figs, _in_flight(rows, figs, float(level))
                                           if kwargs["closed_loop"] else None, **kwargs)})
    return out


def level_name(mode: str | None, value: float) -> str:
    """A load level in words: "concurrency 16", "rate 4 req/s"."""
    return f"rate {value:g} req/s" if mode == "rate" else f"concurrency {value:g}"


def headline(levels: list[dict[str, Any]], wanted: float | None) -> dict[str, Any] | None:
    if not levels:
        return None
    if wanted is not None:
        for lv in levels:
            if lv["level"] == wanted:
                return lv
        raise ValueError(
            f"the probe run has no level {wanted:g}; its levels are "
            + ", ".join(f"{lv['level']:g}" for lv in levels)
        )
    return max(levels, key=lambda lv: (lv["rps"] or 0.0, -lv["level"]))


# ---------------------------------------------------------------------------------------------
# figures


def _first_mean(inp: ScorecardInputs, *keys: str) -> tuple[float | None, str]:
    for k in keys:
        v = inp.means.get(k)
        if v is not None:
            return v, k
    return None, ""


def _latency(inp: ScorecardInputs, figs: dict[str, Figure], lv: dict[str, Any] | None,
             run_label: str) -> str:
    """Fill latency figures; return the latency source label."""
    image = inp.kind == "image"
    if lv is not None:
        level_note = f"{run_label}, level {lv['level']:g}"
        for name in LATENCY_STATS:
            for p in sm.PCTS:
                key = f"{name}_p{p}_s"
                if image and name in ("ttft", "itl", "tpot"):
                    put(figs, key, None, "probe", "image server", status=NOT_APPLICABLE)
                else:
                    put(figs, key, lv.get(key), "probe", level_note)
        source = "probe"
    else:
        canary = sm.percentiles(inp.canary_ttft_s), sm.percentiles(inp.canary_e2e_s)
        has = inp.canary_ttft_s.size > 0 or inp.canary_e2e_s.size > 0
        for name in LATENCY_STATS:
            for p in sm.PCTS:
                key = f"{name}_p{p}_s"
                if name == "ttft" and not image:
                    put(figs, key, canary[0][p], "canary", "canary only")
                elif name == "e2e":
                    put(figs, key, canary[1][p], "canary", "canary only")
                else:
                    put(figs, key, None, "canary",
                         "canary only: run a probe for this figure" if has else "no probe run")
        source = "canary only" if has else "none"
    for p in sm.PCTS:
        key = f"image_p{p}_s"
        if not image:
            put(figs, key, None, "probe", "LLM server", status=NOT_APPLICABLE)
        elif lv is not None:
            put(figs, key, lv.get(key), "probe", f"{run_label}, level {lv['level']:g}")
        else:
            vals = inp.canary_e2e_s / max(inp.images_per_request, 1)
            put(figs, key, sm.percentiles(vals)[p], "canary", "canary only")
    for name in SERVER_HIST:
        clamped = bool(inp.server_clamped.get(name))
        for p in sm.PCTS:
            value = sm.mean_or_none(inp.server_hist.get(f"{name}_p{p}", np.empty(0)))
            flag = clamped and value is not None
            note = "histogram estimate" if value is not None else "no /metrics samples"
            if flag:
                note += "; clamped at the last finite bucket: the true value is higher"
            put(figs, f"server_{name}_p{p}_s", value, "server", note, flagged=flag)
    return source


def _throughput(inp: ScorecardInputs, figs: dict[str, Figure], lv: dict[str, Any] | None,
                run_label: str) -> None:
    image = inp.kind == "image"
    if lv is not None:
        note = f"{run_label}, level {lv['level']:g}"
        put(figs, "rps", lv["rps"], "probe", note)
        for key in ("output_tok_s", "input_tok_s"):
            if image:
                put(figs, key, None, "probe", "image server", status=NOT_APPLICABLE)
            else:
                put(figs, key, lv[key], "probe", note)
        if image:
            put(figs, "images_per_min", lv["images_per_min"], "probe", note)
    else:
        put(figs, "rps", _first_mean(inp, *SERVER_SERIES["rps"])[0], "server",
             "server counters (no probe run)")
        v, k = _first_mean(inp, *SERVER_SERIES["output_tok_s"])
        put(figs, "output_tok_s", v, "server", f"mean of {k}" if k else "no probe run")
        v, k = _first_mean(inp, *SERVER_SERIES["input_tok_s"])
        put(figs, "input_tok_s", v, "server", f"mean of {k}" if k else "no probe run")
        if image:
            put(figs, "images_per_min", None, "server", "no probe run")
    if not image:
        put(figs, "images_per_min", None, "probe", "LLM server", status=NOT_APPLICABLE)
    v, k = _first_mean(inp, *SERVER_SERIES["server_gen_tok_s"])
    put(figs, "server_gen_tok_s", v, "server", f"mean of {k}" if k else "")
    v, k = _first_mean(inp, *SERVER_SERIES["avg_running_batch"])
    put(figs, "avg_running_batch", v, "server", f"mean of {k}" if k else "")
    rate = sm.radix_hit_rate(inp.prefill_cached_tokens, inp.prefill_new_tokens)
    # /metrics counter rates sampled at a fixed interval: the ratio of their means is
    # Σcached / Σprompt over the window (prompt tokens include the cached ones)
    counters = sm.safe_div(inp.means.get(sk.METRICS_CACHED_TOKENS_PER_S),
                           inp.means.get(sk.METRICS_PROMPT_TOKENS_PER_S))
    for tier in CACHE_TIERS:
        share = inp.cache_tier_shares.get(tier)
        if share is None:
            put(figs, f"radix_hit_rate_{tier}", None, "server", "no hit split by tier, or no prompt tokens",
                status=NOT_APPLICABLE)
        else:
            put(figs, f"radix_hit_rate_{tier}", share, "server", "token-weighted, /metrics counters")
    if rate is not None:
        put(figs, "radix_hit_rate", rate, "server", "token-weighted, scheduler log")
    elif counters is not None:
        put(figs, "radix_hit_rate", counters, "server", "token-weighted, /metrics counters")
    else:
        df = measured_ok(inp)
        cached = col_sum(df, "tokens_cached") if df is not None else None
        total_in = col_sum(df, "tokens_in") if df is not None else None
        put(figs, "radix_hit_rate", sm.safe_div(cached, total_in), "probe",
             "token-weighted, client-reported cached tokens")


def _structured_figures(inp: ScorecardInputs, figs: dict[str, Figure], run_label: str) -> None:
    """valid rate and cold-grammar TTFT of a structured-output run (ProbeRequest.detail
    "structured" verdicts); not applicable to runs without them."""
    df = inp.probe_requests
    verdicts = None
    if df is not None and not df.empty and "detail" in df:
        verdicts = df["detail"].map(lambda d: (d or {}).get("structured") if isinstance(d, dict) else None)
    if df is None or verdicts is None or not verdicts.notna().any():
        for key in ("structured_valid_rate", "cold_grammar_ttft_s"):
            put(figs, key, None, "probe", "no structured-output run", status=NOT_APPLICABLE)
        return
    measured = ~df["warmup"].astype(bool) & df["ok"].astype(bool)
    checked = [v for v in verdicts[measured] if isinstance(v, dict) and v.get("valid") is not None]
    valid = sum(1 for v in checked if v["valid"])
    put(figs, "structured_valid_rate", valid / len(checked) if checked else None, "probe",
        f"{run_label}: {valid} of {len(checked)} outputs valid")
    first = df.sort_values("id").iloc[0]
    cold = float(first["ttft_s"]) if bool(first["ok"]) and pd.notna(first["ttft_s"]) else None
    warm = df[measured & (df["level"] == first["level"]) & (df["id"] != first["id"])]["ttft_s"]
    warm_p50 = float(np.percentile(warm.dropna(), 50)) if warm.notna().any() else None
    note = f"{run_label}: first request" + (f"; warm p50 {warm_p50 * 1000:.1f} ms" if warm_p50 else "")
    put(figs, "cold_grammar_ttft_s", cold, "probe", note)


# ---------------------------------------------------------------------------------------------


def grade_figures(figs: dict[str, Figure], slo: slo_mod.SloSet) -> dict[str, DimensionGrade]:
    """Grade every figure that has a target; each dimension says why it got its grade."""
    dims = {d: DimensionGrade() for d in DIMENSIONS}
    for spec in METRIC_SPECS:
        fig = figs.get(spec.key)
        target = slo.targets.get(spec.key)
        if fig is None:
            continue
        if target is not None:
            fig.target, fig.warn = target.target, target.warn
        fig.grade = slo_mod.grade(spec.key, fig.value, target)
        dim = dims[spec.dimension]
        if target is None:
            continue
        want = "≥" if spec.better == "higher" else "≤"
        shown = fmt_value(target.target, spec.unit)
        if fig.value is None:
            dim.reasons.append(f"{spec.label}: no value ({fig.note or fig.status}); "
                               f"target {want} {shown} not checked")
            continue
        dim.reasons.append(f"{spec.label} {fmt_value(fig.value, spec.unit)} "
                           f"(target {want} {shown}): {fig.grade}")
        dim.grade = slo_mod.worst([dim.grade, fig.grade])
    for d, dim in dims.items():
        if not dim.reasons:
            dim.no_target = True
            dim.reasons.append(f"no {d} targets set: set them in Compare → SLO targets, or under "
                               "[slo] in pitwall.toml")
        # the worst first: that is what the reader came for
        dim.reasons.sort(key=lambda r: -slo_mod.GRADE_ORDER.get(r.rsplit(": ", 1)[-1], 0))
    for key in ("gpu_usd_per_hour", "electricity_usd_per_1m_output_tok"):
        fig = figs.get(key)
        if fig is not None and fig.status == NOT_CONFIGURED:
            dims["cost"].reasons.append(f"{SPECS_BY_KEY[key].label}: {fig.note}")
    return dims


def compute_scorecard(inp: ScorecardInputs, slo: slo_mod.SloSet) -> Scorecard:
    levels = probe_levels(inp)
    lv = headline(levels, inp.level)
    run_label = f"probe run #{inp.subject.get('run_id')}"
    figs: dict[str, Figure] = {}
    source = _latency(inp, figs, lv, run_label)
    _throughput(inp, figs, lv, run_label)
    cost_figures(inp, figs, levels, slo)
    errors = stability_figures(inp, figs, slo)
    _structured_figures(inp, figs, run_label)
    for key, why in inp.unavailable.items():  # say why, rather than "no samples"
        fig = figs.get(key)
        if fig is not None and fig.status == MISSING:
            fig.note = why
    image_figures(inp, figs)
    wall_figures(inp, figs)
    missing = [s.key for s in METRIC_SPECS if s.key not in figs]
    if missing:  # pragma: no cover - a programming error caught by the tests
        raise RuntimeError(f"scorecard misses figures: {missing}")
    dims = grade_figures(figs, slo)
    subject = dict(inp.subject)
    subject["latency_source"] = source
    subject["level"] = None if lv is None else lv["level"]
    subject["level_mode"] = None if lv is None else inp.probe_mode
    notes = []
    if subject.get("no_server"):
        notes.append("This probe run is attached to no server, so the server-side figures "
                     "(scheduler log, /metrics, GPU, events) are absent: only what the client "
                     "measured is scored. Probe a configured server to get them.")
    if source == "canary only":
        notes.append("No probe run in this window: latency is from the canary only (one request "
                     "at a time), throughput from the server's counters.")
    elif source == "none":
        notes.append("No probe run and no canary samples in this window: latency is missing.")
    if lv is not None and len(levels) > 1:
        notes.append(f"Headline figures are from {level_name(inp.probe_mode, lv['level'])} "
                     f"(the highest requests/s of the {len(levels)} levels); every level is in "
                     "the levels table, and Compare sets levels against the same level.")
    resolution = str(inp.subject.get("resolution") or "raw")
    if resolution != "raw":
        gone = sorted(k for k, f in figs.items() if k in inp.unavailable and f.status == MISSING)
        notes.append(f"Part of this window is older than the raw samples kept (retention."
                     f"samples_days): server series were read at {resolution} resolution. Averages, "
                     "sums, minima and maxima are exact; "
                     + (f"not available from rollups: {', '.join(gone)}." if gone
                        else "no figure needed more than rollups keep."))
    check = inp.provenance.get("self_check") or {}
    if check.get("trusted") is False:
        notes.append(check.get("note") or "Some levels are not trusted: the probe client's own "
                     "delay was a visible share of the latencies it measured.")
    return Scorecard(subject=subject, provenance=dict(inp.provenance), figures=figs,
                     dimensions=dims, errors_by_kind=errors, levels=levels,
                     series=list(inp.series), events=list(inp.events), notes=notes, engine=inp.engine)
