"""ScorecardInputs -> Scorecard: every figure of METRIC_SPECS, graded against the SLO targets.

Pure (no storage): scorecard.py gathers the inputs from storage, tests build them by hand.

Probe scorecards take client-side figures from the *headline level* of the run (by default the
level with the highest successful requests/s; ties go to the lower level) and stability figures
(success rate, errors) from every measured request of the run. Server-side figures (gen
throughput, batch, radix hit rate, energy, events, queue) come from the window, which for a probe
run is the run's own start -> finish. Without probes, latency comes from the canary (labelled
"canary only"; ITL/TPOT are then missing) and throughput from the server's own counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dashboard.components.format import fmt_value
from dashboard.services import scorecard_math as sm
from dashboard.services import slo as slo_mod
from dashboard.services.metric_specs import DIMENSIONS, METRIC_SPECS, SPECS_BY_KEY
from dashboard.services.scorecard_model import (
    MISSING,
    NOT_APPLICABLE,
    NOT_CONFIGURED,
    OK,
    DimensionGrade,
    Figure,
    Scorecard,
)

LATENCY_STATS = ("ttft", "itl", "tpot", "e2e")
SERVER_HIST = ("ttft", "itl", "e2e")


@dataclass
class ScorecardInputs:
    subject: dict[str, Any]
    provenance: dict[str, Any]
    kind: str = "llm"  # llm | image
    gpu_hourly_usd: float | None = None
    gpu_count: int = 1
    gpu_count_note: str = ""
    electricity_usd_per_kwh: float | None = None
    probe_requests: pd.DataFrame | None = None  # every ProbeRequest row of the run
    probe_mode: str = "concurrency"
    images_per_request: int = 1
    level: float | None = None  # headline level; None = highest rps
    canary_ttft_s: np.ndarray = field(default_factory=lambda: np.empty(0))
    canary_e2e_s: np.ndarray = field(default_factory=lambda: np.empty(0))
    canary_ok: np.ndarray = field(default_factory=lambda: np.empty(0))
    server_hist: dict[str, np.ndarray] = field(default_factory=dict)  # "ttft_p99" -> values
    server_clamped: dict[str, bool | None] = field(default_factory=dict)  # "ttft" -> any clamp
    means: dict[str, float | None] = field(default_factory=dict)  # Sample key -> window mean
    prefill_cached_tokens: float | None = None  # Σ log.prefill_cached_token (None: no samples)
    prefill_new_tokens: float | None = None
    queue_ts: np.ndarray = field(default_factory=lambda: np.empty(0))
    queue_values: np.ndarray = field(default_factory=lambda: np.empty(0))
    health_values: np.ndarray = field(default_factory=lambda: np.empty(0))
    energy_j: float | None = None  # Σ over GPUs of counter deltas over the window
    power_w_sum_of_means: float | None = None  # fallback when there is no energy counter
    window_output_tokens: float | None = None  # server-side tokens in the window (no probes)
    event_counts: dict[str, int] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# probe levels


def _itl_values(rows: pd.DataFrame) -> list[float]:
    out: list[float] = []
    for v in rows["itl_s"]:
        if isinstance(v, list | tuple | np.ndarray):
            out.extend(float(x) for x in v if x is not None)
    return out


def _col_sum(rows: pd.DataFrame, col: str) -> float | None:
    vals = pd.to_numeric(rows[col], errors="coerce").dropna()
    return float(vals.sum()) if len(vals) else None


def level_figures(rows: pd.DataFrame, *, kind: str, images_per_request: int,
                  gpu_usd_per_hour: float | None) -> dict[str, Any]:
    """Figures of one load level from its measured rows (warm-up already removed)."""
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
    images = float(len(ok) * images_per_request) if kind == "image" else None
    out.update(sm.probe_throughput(
        n_ok=len(ok),
        tokens_in=_col_sum(ok, "tokens_in") if kind != "image" else None,
        tokens_out=_col_sum(ok, "tokens_out") if kind != "image" else None,
        images=images,
        window_s=window,
    ))
    out["window_s"] = window
    out.update(sm.cost_figures(gpu_usd_per_hour=gpu_usd_per_hour, rps=out["rps"],
                               output_tok_s=out["output_tok_s"], input_tok_s=out["input_tok_s"],
                               images_per_min=out["images_per_min"]))
    out["success_rate"] = sm.safe_div(float(len(ok)), float(len(rows)))
    return out


def probe_levels(inp: ScorecardInputs) -> list[dict[str, Any]]:
    df = inp.probe_requests
    if df is None or df.empty:
        return []
    measured = df[~df["warmup"].astype(bool)]
    out = []
    for level, rows in measured.groupby("level", sort=True):
        figs = level_figures(rows, kind=inp.kind, images_per_request=inp.images_per_request,
                             gpu_usd_per_hour=_hourly(inp))
        out.append({"level": float(level), "mode": inp.probe_mode, **figs})
    return out


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


def _hourly(inp: ScorecardInputs) -> float | None:
    return None if inp.gpu_hourly_usd is None else inp.gpu_hourly_usd * inp.gpu_count


# ---------------------------------------------------------------------------------------------
# figures


def _fig(figs: dict[str, Figure], key: str, value: float | None, source: str, note: str = "",
         *, status: str | None = None, flagged: bool = False) -> None:
    st = status or (OK if value is not None else MISSING)
    figs[key] = Figure(key=key, value=value if st == OK else None, status=st, source=source,
                       note=note, flagged=flagged)


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
                    _fig(figs, key, None, "probe", "image server", status=NOT_APPLICABLE)
                else:
                    _fig(figs, key, lv.get(key), "probe", level_note)
        source = "probe"
    else:
        canary = sm.percentiles(inp.canary_ttft_s), sm.percentiles(inp.canary_e2e_s)
        has = inp.canary_ttft_s.size > 0 or inp.canary_e2e_s.size > 0
        for name in LATENCY_STATS:
            for p in sm.PCTS:
                key = f"{name}_p{p}_s"
                if name == "ttft" and not image:
                    _fig(figs, key, canary[0][p], "canary", "canary only")
                elif name == "e2e":
                    _fig(figs, key, canary[1][p], "canary", "canary only")
                else:
                    _fig(figs, key, None, "canary",
                         "canary only: run a probe for this figure" if has else "no probe run")
        source = "canary only" if has else "none"
    for p in sm.PCTS:
        key = f"image_p{p}_s"
        if not image:
            _fig(figs, key, None, "probe", "LLM server", status=NOT_APPLICABLE)
        elif lv is not None:
            _fig(figs, key, lv.get(key), "probe", f"{run_label}, level {lv['level']:g}")
        else:
            vals = inp.canary_e2e_s / max(inp.images_per_request, 1)
            _fig(figs, key, sm.percentiles(vals)[p], "canary", "canary only")
    for name in SERVER_HIST:
        clamped = bool(inp.server_clamped.get(name))
        for p in sm.PCTS:
            value = sm.mean_or_none(inp.server_hist.get(f"{name}_p{p}", np.empty(0)))
            flag = clamped and value is not None
            note = "histogram estimate" if value is not None else "no /metrics samples"
            if flag:
                note += "; clamped at the last finite bucket: the true value is higher"
            _fig(figs, f"server_{name}_p{p}_s", value, "server", note, flagged=flag)
    return source


def _throughput(inp: ScorecardInputs, figs: dict[str, Figure], lv: dict[str, Any] | None,
                run_label: str) -> None:
    image = inp.kind == "image"
    if lv is not None:
        note = f"{run_label}, level {lv['level']:g}"
        _fig(figs, "rps", lv["rps"], "probe", note)
        for key in ("output_tok_s", "input_tok_s"):
            if image:
                _fig(figs, key, None, "probe", "image server", status=NOT_APPLICABLE)
            else:
                _fig(figs, key, lv[key], "probe", note)
        if image:
            _fig(figs, "images_per_min", lv["images_per_min"], "probe", note)
    else:
        _fig(figs, "rps", inp.means.get("metrics.requests_per_s"), "server",
             "server counters (no probe run)")
        v, k = _first_mean(inp, "metrics.generation_tokens_per_s", "log.gen_throughput_tok_s")
        _fig(figs, "output_tok_s", v, "server", f"mean of {k}" if k else "no probe run")
        v, k = _first_mean(inp, "metrics.prompt_tokens_per_s", "log.input_throughput_tok_s")
        _fig(figs, "input_tok_s", v, "server", f"mean of {k}" if k else "no probe run")
        if image:
            _fig(figs, "images_per_min", None, "server", "no probe run")
    if not image:
        _fig(figs, "images_per_min", None, "probe", "LLM server", status=NOT_APPLICABLE)
    v, k = _first_mean(inp, "log.gen_throughput_tok_s", "metrics.gen_throughput_tok_s")
    _fig(figs, "server_gen_tok_s", v, "server", f"mean of {k}" if k else "")
    v, k = _first_mean(inp, "log.running_req", "metrics.num_running_reqs")
    _fig(figs, "avg_running_batch", v, "server", f"mean of {k}" if k else "")
    rate = sm.radix_hit_rate(inp.prefill_cached_tokens, inp.prefill_new_tokens)
    if rate is not None:
        _fig(figs, "radix_hit_rate", rate, "server", "token-weighted, scheduler log")
    else:
        df = _measured_ok(inp)
        cached = _col_sum(df, "tokens_cached") if df is not None else None
        total_in = _col_sum(df, "tokens_in") if df is not None else None
        _fig(figs, "radix_hit_rate", sm.safe_div(cached, total_in), "probe",
             "token-weighted, client-reported cached tokens")


def _measured_ok(inp: ScorecardInputs) -> pd.DataFrame | None:
    df = inp.probe_requests
    if df is None or df.empty:
        return None
    return df[(~df["warmup"].astype(bool)) & df["ok"].astype(bool)]


def _cost(inp: ScorecardInputs, figs: dict[str, Figure], levels: list[dict[str, Any]],
          slo: slo_mod.SloSet) -> None:
    hourly = _hourly(inp)
    server = inp.subject.get("server") or "this server"
    no_price = f"not configured: set gpu_hourly_usd for {server}"
    if hourly is None:
        _fig(figs, "gpu_usd_per_hour", None, "config", no_price, status=NOT_CONFIGURED)
    else:
        assumed = inp.gpu_count_note.startswith("assumed")
        _fig(figs, "gpu_usd_per_hour", hourly, "config",
             f"${inp.gpu_hourly_usd:g}/GPU-h × {inp.gpu_count} GPU ({inp.gpu_count_note})",
             flagged=assumed)
    costs = sm.cost_figures(
        gpu_usd_per_hour=hourly, rps=figs["rps"].value, output_tok_s=figs["output_tok_s"].value,
        input_tok_s=figs["input_tok_s"].value, images_per_min=figs["images_per_min"].value)
    image = inp.kind == "image"
    for key, v in costs.items():
        if (key == "usd_per_image") != image and key != "usd_per_1k_requests":
            _fig(figs, key, None, "config", "image server" if image else "LLM server",
                 status=NOT_APPLICABLE)
        elif hourly is None:
            _fig(figs, key, None, "config", no_price, status=NOT_CONFIGURED)
        else:
            _fig(figs, key, v, "config", "price × GPUs ÷ measured throughput")
    target = slo.targets.get("ttft_p99_s")
    if image:
        _fig(figs, "usd_per_1m_output_tok_at_slo", None, "config", "image server",
             status=NOT_APPLICABLE)
    elif hourly is None:
        _fig(figs, "usd_per_1m_output_tok_at_slo", None, "config", no_price,
             status=NOT_CONFIGURED)
    elif target is None:
        _fig(figs, "usd_per_1m_output_tok_at_slo", None, "config",
             "not configured: set the ttft_p99_s SLO target", status=NOT_CONFIGURED)
    elif not levels:
        _fig(figs, "usd_per_1m_output_tok_at_slo", None, "probe", "needs a probe sweep")
    else:
        cost, lv = sm.cost_at_target(levels, ttft_p99_target_s=target.target)
        if lv is None:
            note = f"no load level meets TTFT p99 ≤ {fmt_value(target.target, 's')}"
        else:
            note = (f"level {lv['level']:g}: TTFT p99 {fmt_value(lv['ttft_p99_s'], 's')} ≤ "
                    f"{fmt_value(target.target, 's')}")
        _fig(figs, "usd_per_1m_output_tok_at_slo", cost, "probe", note)
    # energy: counter deltas over the window against the tokens/images made in it
    df = inp.probe_requests
    if df is not None and not df.empty:
        ok = df[df["ok"].astype(bool)]
        tokens = _col_sum(ok, "tokens_out") if not image else None
        images = float(len(ok) * inp.images_per_request) if image else None
    else:
        tokens, images = inp.window_output_tokens, None
    window_s = _window_s(inp)
    energy = sm.energy_figures(energy_j=inp.energy_j, window_s=window_s, output_tokens=tokens,
                               images=images, electricity_usd_per_kwh=inp.electricity_usd_per_kwh)
    if energy["avg_power_w"] is not None:
        _fig(figs, "avg_power_w", energy["avg_power_w"], "gpu", "NVML energy counter deltas")
    else:
        _fig(figs, "avg_power_w", inp.power_w_sum_of_means, "gpu", "mean of gpu.<i>.power_w")
    for key in ("energy_j_per_output_tok", "energy_j_per_image"):
        if (key == "energy_j_per_image") != image:
            _fig(figs, key, None, "gpu", "image server" if image else "LLM server",
                 status=NOT_APPLICABLE)
        else:
            _fig(figs, key, energy[key], "gpu",
                 "NVML energy counter deltas" if inp.energy_j is not None else "no energy counter")
    key = "electricity_usd_per_1m_output_tok"
    if image:
        _fig(figs, key, None, "gpu", "image server", status=NOT_APPLICABLE)
    elif inp.electricity_usd_per_kwh is None:
        _fig(figs, key, None, "config", "not configured: set electricity_usd_per_kwh",
             status=NOT_CONFIGURED)
    else:
        _fig(figs, key, energy[key], "gpu", f"at ${inp.electricity_usd_per_kwh:g}/kWh")


def _window_s(inp: ScorecardInputs) -> float | None:
    since, until = inp.subject.get("since"), inp.subject.get("until")
    if since is None or until is None:
        return None
    return sm.safe_div(float(until) - float(since), 1.0)


def _stability(inp: ScorecardInputs, figs: dict[str, Figure], slo: slo_mod.SloSet
               ) -> dict[str, int]:
    df = inp.probe_requests
    errors: dict[str, int] = {}
    if df is not None and not df.empty:
        measured = df[~df["warmup"].astype(bool)]
        failed = measured[~measured["ok"].astype(bool)]
        for kind, n in failed["error_kind"].fillna("unknown").value_counts().items():
            errors[str(kind)] = int(n)
        _fig(figs, "success_rate", sm.safe_div(float(len(measured) - len(failed)),
                                               float(len(measured))), "probe", "every level")
        _fig(figs, "error_count", float(len(failed)), "probe", "every level")
    elif inp.canary_ok.size:
        _fig(figs, "success_rate", float(inp.canary_ok.mean()), "canary", "canary only")
        _fig(figs, "error_count", float((inp.canary_ok < 0.5).sum()), "canary", "canary only")
    else:
        _fig(figs, "success_rate", None, "probe", "no probe run or canary")
        _fig(figs, "error_count", None, "probe", "no probe run or canary")
    ev = inp.event_counts
    counts = {
        "oom_count": ev.get("oom", 0) + ev.get("prefill_oom", 0),
        "retraction_count": ev.get("decode_retract", 0),
        "crash_count": ev.get("crash", 0),
        "restart_count": ev.get("server_exit", 0),
        "nccl_timeout_count": ev.get("nccl_timeout", 0),
    }
    for key, n in counts.items():
        _fig(figs, key, float(n), "events", "events in the window")
    if inp.queue_values.size:
        _fig(figs, "queue_max", float(inp.queue_values.max()), "server", "")
        above = sm.time_above(inp.queue_ts, inp.queue_values, slo.queue_threshold,
                              inp.subject.get("until"))
        _fig(figs, "queue_above_threshold_s", above, "server",
             f"queue > {slo.queue_threshold:g}")
    else:
        _fig(figs, "queue_max", None, "server", "no queue samples")
        _fig(figs, "queue_above_threshold_s", None, "server", "no queue samples")
    ratio = sm.tail_ratio(figs["ttft_p99_s"].value, figs["ttft_p50_s"].value)
    _fig(figs, "ttft_p99_p50_ratio", ratio, figs["ttft_p99_s"].source, figs["ttft_p99_s"].note)
    downs = ev.get("health_down", 0)
    if inp.health_values.size:
        # events and samples see the same flaps; take whichever saw more (a collector may lag)
        flaps = max(downs, sm.down_transitions(inp.health_values))
        _fig(figs, "health_flaps", float(flaps), "server",
             "health_down events / 1 -> 0 transitions of api.health_ok")
    elif downs:
        _fig(figs, "health_flaps", float(downs), "events", "health_down events")
    else:
        _fig(figs, "health_flaps", None, "server", "no health samples")
    return errors


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
            dim.reasons.append(f"no {d} targets set: add them under [slo] or in the UI")
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
    _cost(inp, figs, levels, slo)
    errors = _stability(inp, figs, slo)
    missing = [s.key for s in METRIC_SPECS if s.key not in figs]
    if missing:  # pragma: no cover - a programming error caught by the tests
        raise RuntimeError(f"scorecard misses figures: {missing}")
    dims = grade_figures(figs, slo)
    subject = dict(inp.subject)
    subject["latency_source"] = source
    subject["level"] = None if lv is None else lv["level"]
    subject["level_mode"] = None if lv is None else inp.probe_mode
    notes = []
    if source == "canary only":
        notes.append("No probe run in this window: latency is from the canary only (one request "
                     "at a time), throughput from the server's counters.")
    elif source == "none":
        notes.append("No probe run and no canary samples in this window: latency is missing.")
    if lv is not None and len(levels) > 1:
        notes.append(f"Headline figures are from load level {lv['level']:g} of {len(levels)} "
                     "(the highest requests/s); every level is in the levels table.")
    trusted = (inp.provenance.get("self_check") or {}).get("trusted")
    if trusted is False:
        notes.append("The probe client's self-check failed: its latencies include client-side "
                     "queueing (see provenance.self_check).")
    return Scorecard(subject=subject, provenance=dict(inp.provenance), figures=figs,
                     dimensions=dims, errors_by_kind=errors, levels=levels,
                     series=list(inp.series), events=list(inp.events), notes=notes)
