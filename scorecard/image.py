"""The image-server figures of a scorecard: seconds per denoising step, steps, where a request's
time goes (encode / denoise / decode / other), peak GPU memory and headroom, timeouts.

DIFFUSION_KEYS is the one table of the Sample keys these figures read (the diffusion log parser's
and metrics collector's contract); align it here when those names change.

| figure | first source | fallback |
|---|---|---|
| image_step_s | mean `log.diffusion.step_s` (the <denoise> stage's "average time per step" line) | p50 `metrics.diffusion_stage_p50_s.<step>` (per step); else p50 `metrics.diffusion_stage_p50_s.<denoise>` / steps; else the probe's inference_time_s / steps (an upper bound: it includes encode and decode) |
| image_steps | the probe workload's steps | — (left to the server: missing) |
| stage_share_* | Σ `log.diffusion.stage_s.<Stage>` in the window | mean `metrics.diffusion_stage_p50_s.<Stage>` |
| peak_mem_bytes | max `peak_memory_mb` × 2^20 of the probe's requests | max `log.diffusion.peak_mem_gb` × 2^30 |
| mem_headroom_bytes | min `log.diffusion.remaining_mem_gb` × 2^30 (the card's own figure) | NVML `gpu.<i>.mem_total_bytes` − peak |

Stage names are the server's engine's (Engine.image_stages, collectors/base.py): <denoise> is its
denoising stage (DenoisingStage for the bundled engine), <step> the pseudo-stage its /metrics
observe per denoising step (DenoisingStep), and its `group` sorts every stage into encode /
denoise / decode / other. Shares are of the summed stage seconds, so they add up to 1; the note
names the source ("scheduler log" or "/metrics stage histogram p50").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collectors.base import ImageStages
from collectors.engines import DEFAULT_ENGINE, ENGINES
from scorecard import math as sm
from scorecard.inputs import ScorecardInputs, measured_ok, put
from scorecard.model import NOT_APPLICABLE, Figure
from storage import series_keys as sk

GIB = float(1 << 30)
MIB = float(1 << 20)
DIFFUSION_KEYS = {
    "stage_log": sk.LOG_DIFFUSION_STAGE_PREFIX,  # + StageName, seconds per request
    "step_log": sk.LOG_DIFFUSION_STEP_S,
    "request_log": sk.LOG_DIFFUSION_REQUEST_S,
    "peak_log": sk.LOG_DIFFUSION_PEAK_MEM_GB,
    "remaining_log": sk.LOG_DIFFUSION_REMAINING_MEM_GB,
    "stage_metrics_p50": sk.diffusion_stage_hist_prefix("p50"),  # + StageName
    "stage_metrics_p99": sk.diffusion_stage_hist_prefix("p99"),
    "queue": sk.METRICS_DIFFUSION_NUM_QUEUE_REQS,
    "running": sk.METRICS_DIFFUSION_NUM_RUNNING_REQS,
    "batch": sk.hist_key("diffusion_batch_size", "mean"),
}
STAGE_GROUPS = ("encode", "denoise", "decode", "other")
SHARE_KEYS = tuple(f"stage_share_{g}" for g in STAGE_GROUPS)
IMAGE_KEYS = ("image_step_s", "image_steps", *SHARE_KEYS, "peak_mem_bytes", "mem_headroom_bytes")


def image_stages(engine: str) -> ImageStages:
    """The stage names of the engine called `engine`; an unknown engine's: none."""
    known = ENGINES.get(engine)
    return known.image_stages if known is not None else ImageStages()


def stage_group(stage: str, engine: str = DEFAULT_ENGINE) -> str:
    """encode | denoise | decode | other of a stage name as the server's engine logs it."""
    return image_stages(engine).group(stage)


def stage_shares(seconds: dict[str, float], engine: str = DEFAULT_ENGINE) -> dict[str, float] | None:
    """{group: share of the total} from {stage name: seconds}; None when there is no time."""
    stages = image_stages(engine)
    # /metrics observes every denoising step as the step pseudo-stage too: per step, already
    # inside the denoising stage, so not a stage of its own
    seconds = {k: v for k, v in seconds.items() if not stages.step or k != stages.step}
    total = sum(v for v in seconds.values() if v > 0)
    if total <= 0:
        return None
    out = dict.fromkeys(STAGE_GROUPS, 0.0)
    for stage, v in seconds.items():
        if v > 0:
            out[stages.group(stage)] += v / total
    return out


def _detail_values(df: pd.DataFrame | None, key: str) -> list[float]:
    if df is None or df.empty or "detail" not in df:
        return []
    return [float(v) for d in df["detail"] if isinstance(d, dict)
            and isinstance(v := d.get(key), int | float)]


def image_figures(inp: ScorecardInputs, figs: dict[str, Figure]) -> None:
    """Fill IMAGE_KEYS (not applicable on LLM servers) and the timeout count."""
    _timeouts(inp, figs)
    if inp.kind != "image":
        for key in IMAGE_KEYS:
            put(figs, key, None, "server", "LLM server", status=NOT_APPLICABLE)
        return
    d = inp.diffusion
    st = image_stages(inp.engine)
    steps = inp.image_steps
    put(figs, "image_steps", float(steps) if steps else None, "probe",
        "the probe workload's num_inference_steps" if steps else
        "steps left to the server's default: set them in the sweep to compare runs")
    ok = measured_ok(inp)
    infer = _detail_values(ok, "inference_time_s")
    denoise_p50 = d.get("stage_p50", {}).get(st.denoise) if st.denoise else None
    step_p50 = d.get("stage_p50", {}).get(st.step) if st.step else None
    if d.get("step_s") is not None:
        put(figs, "image_step_s", d["step_s"], "server",
            f"mean of the {st.denoise or 'denoising stage'} 'average time per step' log lines")
    elif step_p50 is not None:
        put(figs, "image_step_s", step_p50, "server", f"/metrics {st.step} p50 (per-step histogram)")
    elif denoise_p50 is not None and steps:
        put(figs, "image_step_s", denoise_p50 / steps, "server",
            f"/metrics {st.denoise} p50 ÷ steps")
    elif infer and steps:
        put(figs, "image_step_s", float(np.median(infer)) / steps, "probe",
            "upper bound: the server's inference_time_s p50 ÷ steps (includes encode and decode)")
    else:
        put(figs, "image_step_s", None, "server", "no step timing: needs the diffusion log, "
            "/metrics stage histograms, or the probe's inference_time_s with steps set")
    shares, note = None, "no stage timings: needs the diffusion log or /metrics stage histograms"
    if d.get("stage_sum"):
        shares, note = stage_shares(d["stage_sum"], inp.engine), "Σ stage seconds, scheduler log"
    if shares is None and d.get("stage_p50"):
        shares, note = stage_shares(d["stage_p50"], inp.engine), "stage p50 seconds, /metrics stage histogram"
    for group, key in zip(STAGE_GROUPS, SHARE_KEYS, strict=True):
        put(figs, key, None if shares is None else shares[group], "server", note)
    peak_probe = _detail_values(ok, "peak_memory_mb")
    if peak_probe:
        peak: float | None = max(peak_probe) * MIB
        put(figs, "peak_mem_bytes", peak, "probe", "max peak_memory_mb of the probe's requests")
    elif d.get("peak_gb") is not None:
        peak = d["peak_gb"] * GIB
        put(figs, "peak_mem_bytes", peak, "server", "max 'Peak GPU memory' log line")
    else:
        peak = None
        put(figs, "peak_mem_bytes", None, "server", "no peak memory reported")
    if d.get("remaining_gb") is not None:
        put(figs, "mem_headroom_bytes", d["remaining_gb"] * GIB, "server",
            "min 'Remaining GPU memory at peak' log line (the card's own figure)")
    elif peak is not None and inp.gpu_mem_total_bytes:
        put(figs, "mem_headroom_bytes", inp.gpu_mem_total_bytes - peak, "gpu",
            "NVML memory total − peak")
    else:
        put(figs, "mem_headroom_bytes", None, "gpu",
            "the card's memory is unknown: needs NVML samples or the diffusion log's memory line")


def _timeouts(inp: ScorecardInputs, figs: dict[str, Figure]) -> None:
    df = inp.probe_requests
    if df is None or df.empty:
        put(figs, "timeout_count", None, "probe", "no probe run")
        return
    measured = df[~df["warmup"].astype(bool)]
    n = int((measured["error_kind"] == "timeout").sum())
    put(figs, "timeout_count", float(n), "probe", "measured requests past the per-request timeout")


def diffusion_inputs(values: Any, names: list[str]) -> dict[str, Any]:
    """The `diffusion` inputs from a window's samples: `values(metric) -> ndarray`, `names` the
    server's stored metric keys (build.py passes repo reads)."""
    out: dict[str, Any] = {}
    step = values(DIFFUSION_KEYS["step_log"])
    out["step_s"] = sm.mean_or_none(step)
    out["stage_sum"] = {}
    out["stage_p50"] = {}
    for name in names:
        for prefix, field in ((DIFFUSION_KEYS["stage_log"], "stage_sum"),
                              (DIFFUSION_KEYS["stage_metrics_p50"], "stage_p50")):
            if name.startswith(prefix):
                v = values(name)
                if v.size:
                    out[field][name[len(prefix):]] = float(v.sum() if field == "stage_sum"
                                                           else v.mean())
    peak = values(DIFFUSION_KEYS["peak_log"])
    rem = values(DIFFUSION_KEYS["remaining_log"])
    out["peak_gb"] = float(peak.max()) if peak.size else None
    out["remaining_gb"] = float(rem.min()) if rem.size else None
    return out
