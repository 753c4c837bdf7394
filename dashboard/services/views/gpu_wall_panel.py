"""The Server page's "GPU wall" panel: which wall each GPU hits, its evidence, a small chart, and
for image servers the share of denoising time per wall with the what-if per card.

Read model only (the page caches it and draws it): `wall_panel()` returns

| key | what |
|---|---|
| walls | gpu_wall.gpu_walls(): per GPU the verdict, reason, means, shares and achieved bandwidth |
| cards | per GPU entry with GPM (a card, or a MIG instance: its own verdict): {index, title, verdict, bound_by (words), reason, evidence: [(label, text, help)], shares_text} ready to print |
| series | chart frame (ts, label, value, min, max) of `gpu.<i>.gpm.dram_bw_util_ratio` and `gpu.<i>.gpm.tensor_any_ratio` (a MIG instance: `gpu.<i>.mig<GPU_I_ID>.gpm.*`), 0-1 |
| not_available | the sentence for GPUs with telemetry but no GPM ("not available on this GPU"), else None |
| verdict_since | start of the verdict's window (at most MAX_VERDICT_WINDOW_S before until) |
| rules | the verdict rules in words, from gpu_wall's thresholds |
| stage | image servers: gpu_wall_stage.stage_walls() of DenoisingStage; None for LLM servers |

Cross-check a GPU's figures: `pitwall gpu-wall --server NAME --since 15m` prints the same verdict
from the same rows; live, `nvidia-smi dmon --gpm-metrics 10,5,2` reads DRAM, tensor and SM activity.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from dashboard.services.views.image_panels import labelled_frame
from present.format import fmt_value
from scorecard.gpu_entries import GpuEntry
from scorecard.gpu_wall import (
    BANDWIDTH_MIN,
    DOMINANCE,
    HELD_CLOCK,
    LOW,
    SM_BUSY_MIN,
    STARVED_UTIL,
    STREAM_MIN,
    TENSOR_MIN,
    VERDICTS,
    gpu_walls,
)
from scorecard.gpu_wall_stage import stage_walls
from storage import repo

NOT_AVAILABLE = "not available on this GPU"
#: The verdict reads every raw GPM sample (one per poll): longer windows are judged on their last
#: six hours, so a 7-day view stays a bounded read; the chart still spans the whole window.
MAX_VERDICT_WINDOW_S = 6 * 3600.0
GPM_SERIES = {"dram_bw_util_ratio": "DRAM bandwidth", "tensor_any_ratio": "tensor activity"}


RULES = (f"per GPM sample: bandwidth when DRAM ≥ {100 * BANDWIDTH_MIN:.0f} % and above tensor, or DRAM ≥ "
         f"{100 * STREAM_MIN:.0f} % and {DOMINANCE:g}× tensor (weight streaming reaches about 60 % of the "
         f"datasheet peak); power when a power or thermal reason holds the SM clock below "
         f"{100 * HELD_CLOCK:.0f} % of its maximum on compute work; compute when tensor ≥ {100 * TENSOR_MIN:.0f} % "
         f"(or SMs ≥ {100 * SM_BUSY_MIN:.0f} %); neither (the GPU waits on the host) when no wall holds and "
         f"kernels ran under {100 * STARVED_UTIL:.0f} % of the time, or DRAM and tensor are below "
         f"{100 * LOW:.0f} % while it works; the window takes the most common")


def _pct(ratio: float | None) -> str:
    return NOT_AVAILABLE if ratio is None else fmt_value(ratio, "ratio")


def _clock_text(power: dict[str, Any] | None) -> str:
    """The held clock, short enough for a metric at 1400 px ("1.80 of 2.03 GHz, 1,099 W"); the
    reason and the share of samples are in the verdict's line and the help."""
    if not power:
        return "not held"
    clock = f"{power['sm_hz'] / 1e9:.2f}" if power.get("sm_hz") else "held"
    if power.get("sm_hz") and power.get("sm_max_hz"):
        clock += f" of {power['sm_max_hz'] / 1e9:.2f} GHz"
    return clock + (f", {power['power_w']:,.0f} W" if power.get("power_w") else "")


def gpu_card(gpu: dict[str, Any]) -> dict[str, Any]:
    """One GPU's verdict and evidence as printable text (gpu_walls' per-GPU dict in)."""
    peak = gpu.get("peak_bw_bytes_s")
    achieved = gpu.get("achieved_bw_bytes_s")
    if achieved is not None and peak:
        bw_text = f"{fmt_value(achieved, 'bytes_s')} of {fmt_value(peak, 'bytes_s')}"
    elif gpu.get("mig_id") is not None:
        bw_text = "not known (MIG)"  # an instance's share of the card's peak is not read
    else:
        bw_text = "unknown card: peak not in GPU_SPECS"
    label = gpu.get("label") or f"GPU {gpu['index']}"
    shares = sorted(gpu["shares"].items(), key=lambda kv: VERDICTS.index(kv[0]))
    return {
        "index": gpu["index"],
        "mig_id": gpu.get("mig_id"),
        "title": label + (f" ({gpu['name']})" if gpu.get("name") else ""),
        "verdict": gpu["verdict"],
        "bound_by": fmt_value(VERDICTS.index(gpu["verdict"]), "verdict"),
        "reason": gpu["reason"],
        "evidence": [
            ("DRAM bandwidth", _pct(gpu["dram_ratio"]), "mean GPM DRAM bandwidth utilisation"),
            ("Tensor activity", _pct(gpu["tensor_ratio"]), "mean GPM tensor-core activity (any precision)"),
            ("SM activity", _pct(gpu["sm_ratio"]), "mean GPM SM utilisation"),
            ("Achieved bandwidth", bw_text, "DRAM utilisation × the card's peak (GPU_SPECS)"),
            ("GPU busy", _pct(gpu.get("util_ratio")), "mean utilization.gpu: the share of time a kernel ran"),
            ("Clock and power", _clock_text(gpu.get("power")),
             "the SM clock and board power while a power or thermal limit held the clock: "
             + (gpu["power"]["text"] if gpu.get("power") else "no sample was held")),
        ],
        "shares_text": ", ".join(f"{v} {fmt_value(s, 'ratio')}" for v, s in shares)
                       + f" of {gpu['samples']} GPM samples",
    }


def wall_panel(engine: Engine, *, server_id: int, kind: str, since: float, until: float,
               max_points: int = 200) -> dict[str, Any]:
    """The panel's read model over [since, until) (module table); `verdict_since` is where the
    verdict's window starts (since, or MAX_VERDICT_WINDOW_S before until)."""
    verdict_since = max(since, until - MAX_VERDICT_WINDOW_S)
    walls = gpu_walls(engine, server_id=server_id, since=verdict_since, until=until)
    labels = {GpuEntry(g["index"], g.get("mig_id")).key(f"gpm.{key}"): f"{g['label']} {label}"
              for g in walls["gpus"] for key, label in GPM_SERIES.items()}
    df = repo.bucketed_series(engine, server_id=server_id, metrics=list(labels), since=since,
                              until=until, max_points=max_points) if labels else pd.DataFrame()
    missing = walls.get("missing") or []
    return {
        "walls": walls,
        "cards": [gpu_card(g) for g in walls["gpus"]],
        "series": labelled_frame(df, labels),
        "not_available": (f"{', '.join(map(str, missing))}: DRAM bandwidth, tensor and SM "
                          f"activity {NOT_AVAILABLE} (GPM needs Hopper or newer; on a container host "
                          "point gpu.dcgm_url at a dcgm-exporter with profiling fields)")
                         if missing else None,
        "stage": stage_walls(engine, server_id=server_id, since=verdict_since, until=until)
                 if kind == "image" else None,
        "verdict_since": verdict_since,
        "rules": RULES,
    }
