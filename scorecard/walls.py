"""The "bound by" figures of a scorecard: which wall the GPUs hit, achieved bandwidth, and for
image servers the share of denoising time per wall with the per-step what-if on a B300.

Inputs are gpu_wall.gpu_walls() and gpu_wall_stage.stage_walls() of the scorecard's window
(build.py reads them); every figure is informational (better = none, never graded). Without GPM
figures they are missing with the reason ("not available on this GPU"), never 0.

| figure | from |
|---|---|
| gpu_bound_by | the most common per-sample verdict pooled over GPUs; value = index in VERDICTS, note = the verdict, its share and the evidence |
| gpu_bandwidth_bound_share, gpu_compute_bound_share, gpu_power_bound_share | pooled per-sample verdict counts / samples |
| gpu_achieved_bw_bytes_s | mean over GPUs of achieved bandwidth (DRAM utilisation × peak) |
| denoise_bandwidth_share, denoise_compute_share | stage_walls() of DenoisingStage |
| image_step_s_what_if | stage_walls()'s what-if on WHAT_IF_DEFAULT (B300) |
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from present.format import fmt_value
from scorecard.gpu_wall import REASONS, VERDICTS
from scorecard.gpu_wall_stage import WHAT_IF_DEFAULT
from scorecard.inputs import ScorecardInputs, put
from scorecard.model import NOT_APPLICABLE, Figure

GPU_KEYS = ("gpu_bound_by", "gpu_bandwidth_bound_share", "gpu_compute_bound_share", "gpu_power_bound_share",
            "gpu_achieved_bw_bytes_s")
STAGE_KEYS = ("denoise_bandwidth_share", "denoise_compute_share", "image_step_s_what_if")


def pooled_counts(gpus: list[dict[str, Any]]) -> Counter[str]:
    """Per-sample verdict counts over every GPU (gpu_walls' shares × samples)."""
    counts: Counter[str] = Counter()
    for g in gpus:
        for verdict, share in g["shares"].items():
            counts[verdict] += round(share * g["samples"])
    return counts


def _evidence(gpus: list[dict[str, Any]]) -> str:
    parts = []
    for g in gpus:
        part = (f"{g.get('label') or 'GPU ' + str(g['index'])}: {g['verdict']}, DRAM {fmt_value(g['dram_ratio'], 'ratio')}, "
                f"tensor {fmt_value(g['tensor_ratio'], 'ratio')}")
        if g.get("achieved_bw_bytes_s") is not None and g.get("peak_bw_bytes_s"):
            part += (f", {fmt_value(g['achieved_bw_bytes_s'], 'bytes_s')} of "
                     f"{fmt_value(g['peak_bw_bytes_s'], 'bytes_s')}")
        parts.append(part)
    return "; ".join(parts)


def gpu_figures(walls: dict[str, Any], figs: dict[str, Figure]) -> None:
    """GPU_KEYS from gpu_walls() of the window (empty dict: not read)."""
    gpus = walls.get("gpus") or []
    if not gpus:
        why = walls.get("why_not") or "no GPM samples in the window"
        for key in GPU_KEYS:
            put(figs, key, None, "gpu", why)
        return
    counts = pooled_counts(gpus)
    total = sum(counts.values())
    verdict, n = counts.most_common(1)[0]
    put(figs, "gpu_bound_by", float(VERDICTS.index(verdict)), "gpu",
        f"{verdict} ({fmt_value(n / total, 'ratio')} of {total} GPM samples): "
        f"{next((g['reason'] for g in gpus if g['verdict'] == verdict), REASONS[verdict])}. "
        + _evidence(gpus))
    for key, v in (("gpu_bandwidth_bound_share", "bandwidth"), ("gpu_compute_bound_share", "compute"),
                   ("gpu_power_bound_share", "power")):
        put(figs, key, counts.get(v, 0) / total, "gpu", f"of {total} GPM samples over {len(gpus)} GPU(s)")
    known = [g for g in gpus if g.get("achieved_bw_bytes_s") is not None]
    if known:
        bw = sum(g["achieved_bw_bytes_s"] for g in known) / len(known)
        peak = sum(g["peak_bw_bytes_s"] for g in known) / len(known)
        put(figs, "gpu_achieved_bw_bytes_s", bw, "gpu",
            f"{fmt_value(bw / peak, 'ratio')} of the {known[0]['spec']}'s {fmt_value(peak, 'bytes_s')} peak")
    else:
        put(figs, "gpu_achieved_bw_bytes_s", None, "gpu",
            "the card is not in GPU_SPECS: its peak bandwidth is unknown")


def stage_figures(stage: dict[str, Any], figs: dict[str, Figure]) -> None:
    """STAGE_KEYS from stage_walls() of DenoisingStage (empty dict: not read)."""
    if not stage.get("available"):
        why = stage.get("why_not") or "no DenoisingStage timings in the window"
        for key in STAGE_KEYS:
            put(figs, key, None, "gpu", why)
        return
    note = (f"of {stage['covered_s']:.1f} s of DenoisingStage with GPM samples "
            f"({stage['stage_s']:.1f} s in the window)")
    put(figs, "denoise_bandwidth_share", stage["bandwidth_share"], "gpu", note)
    put(figs, "denoise_compute_share", stage["compute_share"], "gpu", note)
    row = next((r for r in stage["what_if"] if r["card"] == WHAT_IF_DEFAULT), None)
    if stage["spec"] == WHAT_IF_DEFAULT:
        put(figs, "image_step_s_what_if", None, "gpu", f"this server runs on a {WHAT_IF_DEFAULT}",
            status=NOT_APPLICABLE)
    elif row is None:
        put(figs, "image_step_s_what_if", None, "gpu",
            "no per-step timing in the window" if stage["step_s"] is None
            else "this card is not in GPU_SPECS: no what-if")
    else:
        put(figs, "image_step_s_what_if", row["step_s"], "gpu",
            f"now {fmt_value(stage['step_s'], 's')} per step; {row['note']}")


def wall_figures(inp: ScorecardInputs, figs: dict[str, Figure]) -> None:
    """Fill GPU_KEYS, and STAGE_KEYS on image servers (not applicable on LLM servers)."""
    gpu_figures(inp.gpu_walls, figs)
    if inp.kind != "image":
        for key in STAGE_KEYS:
            put(figs, key, None, "gpu", "LLM server", status=NOT_APPLICABLE)
        return
    stage_figures(inp.stage_walls, figs)
