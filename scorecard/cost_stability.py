"""The cost and stability dimensions of a scorecard (pure; see compute.py for the rest).

Cost: the server's hourly price (one GPU-hour × GPU count) against the measured throughput, the
cheapest load level meeting the TTFT target, and energy from NVML counter deltas; a missing price
or kWh price reads "not configured", never 0. Stability: probe (else canary) success and errors,
event counts in the window, queue spikes, TTFT tail spread and health flaps.
"""

from __future__ import annotations

from typing import Any

from collectors.engines import display_name
from present.format import fmt_value
from scorecard import math as sm
from scorecard import slo as slo_mod
from scorecard.inputs import (
    ScorecardInputs,
    col_sum,
    hourly,
    put,
    window_s,
)
from scorecard.model import NOT_APPLICABLE, NOT_CONFIGURED, Figure


def cost_figures(inp: ScorecardInputs, figs: dict[str, Figure], levels: list[dict[str, Any]],
                 slo: slo_mod.SloSet) -> None:
    """Fill the cost figures; needs the throughput figures (rps, tok/s, images/min) first."""
    usd_h = hourly(inp)
    server = inp.subject.get("server") or "this server"
    no_price = f"not configured: set gpu_hourly_usd for {server}"
    if usd_h is None:
        put(figs, "gpu_usd_per_hour", None, "config", no_price, status=NOT_CONFIGURED)
    else:
        assumed = inp.gpu_count_note.startswith("assumed")
        put(figs, "gpu_usd_per_hour", usd_h, "config",
             f"${inp.gpu_hourly_usd:g}/GPU-h × {inp.gpu_count} GPU ({inp.gpu_count_note})",
             flagged=assumed)
    costs = sm.cost_figures(
        gpu_usd_per_hour=usd_h, rps=figs["rps"].value, output_tok_s=figs["output_tok_s"].value,
        input_tok_s=figs["input_tok_s"].value, images_per_min=figs["images_per_min"].value)
    image = inp.kind == "image"
    for key, v in costs.items():
        if (key == "usd_per_image") != image and key != "usd_per_1k_requests":
            put(figs, key, None, "config", "image server" if image else "LLM server",
                 status=NOT_APPLICABLE)
        elif usd_h is None:
            put(figs, key, None, "config", no_price, status=NOT_CONFIGURED)
        else:
            put(figs, key, v, "config", "price × GPUs ÷ measured throughput")
    target = slo.targets.get("ttft_p99_s")
    if image:
        put(figs, "usd_per_1m_output_tok_at_slo", None, "config", "image server",
             status=NOT_APPLICABLE)
    elif usd_h is None:
        put(figs, "usd_per_1m_output_tok_at_slo", None, "config", no_price,
             status=NOT_CONFIGURED)
    elif target is None:
        put(figs, "usd_per_1m_output_tok_at_slo", None, "config",
             "not configured: set the ttft_p99_s SLO target", status=NOT_CONFIGURED)
    elif not levels:
        put(figs, "usd_per_1m_output_tok_at_slo", None, "probe", "needs a probe sweep")
    else:
        cost, lv = sm.cost_at_target(levels, ttft_p99_target_s=target.target)
        if lv is None:
            note = f"no load level meets TTFT p99 ≤ {fmt_value(target.target, 's')}"
        else:
            note = (f"level {lv['level']:g}: TTFT p99 {fmt_value(lv['ttft_p99_s'], 's')} ≤ "
                    f"{fmt_value(target.target, 's')}")
        put(figs, "usd_per_1m_output_tok_at_slo", cost, "probe", note)
    # energy: counter deltas over the window against the tokens/images made in it
    df = inp.probe_requests
    if df is not None and not df.empty:
        ok = df[df["ok"].astype(bool)]
        tokens = col_sum(ok, "tokens_out") if not image else None
        images = float(len(ok) * inp.images_per_request) if image else None
    else:
        tokens, images = inp.window_output_tokens, None
    span = inp.busy_s if inp.busy_s is not None else window_s(inp)
    energy = sm.energy_figures(energy_j=inp.energy_j, window_s=span, output_tokens=tokens,
                               images=images, electricity_usd_per_kwh=inp.electricity_usd_per_kwh)
    if energy["avg_power_w"] is not None:
        put(figs, "avg_power_w", energy["avg_power_w"], "gpu", "NVML energy counter deltas" + (
            "" if inp.busy_s is None else " while decoding"))
    else:
        put(figs, "avg_power_w", inp.power_w_sum_of_means, "gpu", "mean of gpu.<i>.power_w")
    for key in ("energy_j_per_output_tok", "energy_j_per_image"):
        if (key == "energy_j_per_image") != image:
            put(figs, key, None, "gpu", "image server" if image else "LLM server",
                 status=NOT_APPLICABLE)
        else:
            put(figs, key, energy[key], "gpu",
                 "no energy counter" if inp.energy_j is None else "NVML energy counter deltas" + (
                     "" if inp.busy_s is None else f" while {display_name(inp.engine)} logged decode lines (idle time excluded)"))
    key = "electricity_usd_per_1m_output_tok"
    if image:
        put(figs, key, None, "gpu", "image server", status=NOT_APPLICABLE)
    elif inp.electricity_usd_per_kwh is None:
        put(figs, key, None, "config", "not configured: set electricity_usd_per_kwh",
             status=NOT_CONFIGURED)
    else:
        put(figs, key, energy[key], "gpu", f"at ${inp.electricity_usd_per_kwh:g}/kWh")


def stability_figures(inp: ScorecardInputs, figs: dict[str, Figure], slo: slo_mod.SloSet
                      ) -> dict[str, int]:
    """Fill the stability figures (needs the latency figures); returns {error kind: count}."""
    df = inp.probe_requests
    errors: dict[str, int] = {}
    if df is not None and not df.empty:
        measured = df[~df["warmup"].astype(bool)]
        failed = measured[~measured["ok"].astype(bool)]
        for kind, n in failed["error_kind"].fillna("unknown").value_counts().items():
            errors[str(kind)] = int(n)
        put(figs, "success_rate", sm.safe_div(float(len(measured) - len(failed)),
                                               float(len(measured))), "probe", "every level")
        put(figs, "error_count", float(len(failed)), "probe", "every level")
    elif inp.canary_ok.size:
        put(figs, "success_rate", float(inp.canary_ok.mean()), "canary", "canary only")
        put(figs, "error_count", float((inp.canary_ok < 0.5).sum()), "canary", "canary only")
    elif inp.canary_ok_sum is not None:  # from rollups: canary.ok is 0 or 1, so Σ is the successes
        ok, n = inp.canary_ok_sum
        put(figs, "success_rate", ok / n, "canary", "canary only, from rollups")
        put(figs, "error_count", float(round(n - ok)), "canary", "canary only, from rollups")
    else:
        put(figs, "success_rate", None, "probe", "no probe run or canary")
        put(figs, "error_count", None, "probe", "no probe run or canary")
    ev = inp.event_counts
    counts = {
        "oom_count": ev.get("oom", 0) + ev.get("prefill_oom", 0),
        "retraction_count": ev.get("decode_retract", 0),
        "crash_count": ev.get("crash", 0),
        "restart_count": ev.get("server_exit", 0),
        "nccl_timeout_count": ev.get("nccl_timeout", 0),
    }
    for key, n in counts.items():
        put(figs, key, float(n), "events", "events in the window")
    if inp.queue_values.size:
        put(figs, "queue_max", float(inp.queue_values.max()), "server", "")
        above = sm.time_above(inp.queue_ts, inp.queue_values, slo.queue_threshold,
                              inp.subject.get("until"))
        put(figs, "queue_above_threshold_s", above, "server",
             f"queue > {slo.queue_threshold:g}")
    elif inp.queue_max is not None:  # from rollups: the max survives, time above does not
        put(figs, "queue_max", inp.queue_max, "server", "from rollups")
        put(figs, "queue_above_threshold_s", None, "server", f"queue > {slo.queue_threshold:g}")
    else:
        put(figs, "queue_max", None, "server", "no queue samples")
        put(figs, "queue_above_threshold_s", None, "server", "no queue samples")
    ratio = sm.tail_ratio(figs["ttft_p99_s"].value, figs["ttft_p50_s"].value)
    put(figs, "ttft_p99_p50_ratio", ratio, figs["ttft_p99_s"].source, figs["ttft_p99_s"].note)
    downs = ev.get("health_down", 0)
    if inp.health_values.size:
        # events and samples see the same flaps; take whichever saw more (a collector may lag)
        flaps = max(downs, sm.down_transitions(inp.health_values))
        put(figs, "health_flaps", float(flaps), "server",
             "health_down events / 1 -> 0 transitions of api.health_ok")
    elif downs:
        put(figs, "health_flaps", float(downs), "events", "health_down events")
    else:
        put(figs, "health_flaps", None, "server", "no health samples")
    return errors
