"""Which wall a diffusion stage hits: the GPM verdicts (gpu_wall.py) joined with the stage timings.

A `log.diffusion.stage_s.<Stage>` sample at `ts` with value `s` covers [ts − s, ts] (ts is when
the stage finished: the diffusion log parser's contract). A GPM sample at `ts` covers the poll
interval before it, [previous sample, ts] (the first one: one median interval back; a gap longer
than two intervals counts as two). Stage intervals are merged first, so requests batched
together count once. Then, pooled over the server's GPUs:

    share(verdict) = Σ overlap(GPM interval, stage intervals) of the samples with that verdict
                     / Σ overlap of every sample

`what_if_split` feeds `gpu_wall.what_if`: the same stage's per-step time on another card of
GPU_SPECS, with the assumption in words. It splits a compute- or power-bound sample's time by
its measured DRAM and tensor activity (the DRAM share is the elementwise, norm and copy work,
which scales with bandwidth), so a compute-bound DiT step is not sped up by the FLOPS ratio
alone. Cross-check a share by hand: list the
`gpu.0.gpm.dram_bw_util_ratio` samples whose ts falls inside a denoising-stage interval
(`sqlite3 pitwall.db "select ts, value from sample where metric like 'log.diffusion.stage_s.%'"`).

The stage names are the server's engine's (Engine.image_stages: its denoising stage, and the
per-step pseudo-stage of its /metrics), asked by `engine_name` (DEFAULT_ENGINE when not given).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy.engine import Engine

from collectors.engines import DEFAULT_ENGINE
from scorecard.gpu_wall import (
    GPU_SPECS,
    VERDICTS,
    GpuSamples,
    gpu_samples,
    spec_for,
    what_if,
)
from scorecard.image import DIFFUSION_KEYS, image_stages
from storage import repo

WHAT_IF_DEFAULT = "B300"  # the card the page and the scorecard compare with first


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sorted, non-overlapping [start, end] rows covering the union of the given intervals."""
    if len(starts) == 0:
        return np.empty((0, 2))
    order = np.argsort(starts)
    merged: list[list[float]] = []
    for a, b in zip(starts[order], ends[order], strict=True):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], float(b))
        else:
            merged.append([float(a), float(b)])
    return np.array(merged)


def sample_intervals(ts: np.ndarray) -> np.ndarray:
    """The start of the poll interval each GPM sample averages over (module docstring)."""
    if len(ts) == 0:
        return ts
    step = float(np.median(np.diff(ts))) if len(ts) > 1 else 1.0
    gaps = np.diff(ts, prepend=ts[0] - step)
    return ts - np.minimum(gaps, 2 * step)


def overlap_s(starts: np.ndarray, ends: np.ndarray, merged: np.ndarray) -> np.ndarray:
    """Per [start, end]: seconds inside the merged intervals."""
    out = np.zeros(len(starts))
    for a, b in merged:
        out += np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0.0, None)
    return out


def _weights(gpus: list[GpuSamples], merged: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
    """Σ overlap seconds per verdict over every GPU, and the same seconds by what they scale with
    on another card: a bandwidth-bound sample's with memory bandwidth; a compute- or power-bound
    sample's split by its measured DRAM and tensor activity (the DRAM share, dram / (dram +
    tensor), is the elementwise, norm and copy work between the matrix products, which scales
    with bandwidth, not FLOPS); the rest (neither, idle, mixed) stays."""
    by: dict[str, float] = dict.fromkeys(VERDICTS, 0.0)
    split = dict.fromkeys(("bandwidth", "compute", "power", "rest"), 0.0)
    for g in gpus:
        w = overlap_s(sample_intervals(g.ts), g.ts, merged)
        for verdict, sec, d, t in zip(g.verdicts, w, g.dram, np.nan_to_num(g.tensor), strict=True):
            sec = float(sec)
            by[verdict] += sec
            if verdict == "bandwidth":
                split["bandwidth"] += sec
            elif verdict in ("compute", "power"):
                memory = float(d / (d + t)) if d + t > 0 else 0.0
                split["bandwidth"] += sec * memory
                split[verdict] += sec * (1.0 - memory)
            else:
                split["rest"] += sec
    return by, split


def step_seconds(engine: Engine, *, server_id: int, since: float, until: float,
                 engine_name: str = DEFAULT_ENGINE) -> tuple[float | None, str]:
    """(mean seconds per denoising step in the window, where it comes from)."""
    stages = image_stages(engine_name)
    sources = [(DIFFUSION_KEYS["step_log"],
                f"mean of the {stages.denoise or 'denoising stage'} 'average time per step' lines")]
    if stages.step:
        sources.append((DIFFUSION_KEYS["stage_metrics_p50"] + stages.step, f"/metrics {stages.step} p50"))
    for key, label in sources:
        _, v = repo.sample_points(engine, server_id=server_id, metric=key, since=since, until=until)
        if len(v):
            return float(np.mean(v)), label
    return None, ""


def stage_walls(engine: Engine, *, server_id: int, since: float, until: float,
                stage: str | None = None, engine_name: str = DEFAULT_ENGINE) -> dict[str, Any]:
    """The share of `stage`'s time (None: the engine's denoising stage) per verdict in
    [since, until), and the what-if per card.

    Returns {"stage", "available", "why_not", "stage_s" (merged seconds of the stage),
    "covered_s" (of those, seconds with a GPM sample), "shares": {verdict: 0-1},
    "bandwidth_share", "compute_share", "power_share" (time shares by verdict), "what_if_split"
    (what each share of the time scales with: _weights), "step_s", "step_source", "spec" (this server's card),
    "what_if": [{"card", "step_s", "speedup", "note"}], "window"}.
    """
    stage = stage or image_stages(engine_name).denoise
    out: dict[str, Any] = {"stage": stage, "available": False, "why_not": None, "stage_s": 0.0,
                           "covered_s": 0.0, "shares": {}, "bandwidth_share": None,
                           "compute_share": None, "power_share": None, "step_s": None, "step_source": "", "spec": None,
                           "what_if": [], "window": [since, until]}
    if not stage:
        out["why_not"] = "the server's engine names no denoising stage, so no stage timings are read"
        return out
    ts, secs = repo.sample_points(engine, server_id=server_id,
                                  metric=DIFFUSION_KEYS["stage_log"] + stage, since=since, until=until)
    if len(ts) == 0:
        out["why_not"] = f"no {stage} timings in the window (they come from the server's log)"
        return out
    merged = merge_intervals(ts - secs, ts)
    out["stage_s"] = float(np.sum(merged[:, 1] - merged[:, 0]))
    gpus, missing = gpu_samples(engine, server_id=server_id, since=since - float(secs.max()), until=until)
    by, split_s = _weights(gpus, merged)
    covered = sum(by.values())
    if covered <= 0:
        out["why_not"] = ("DRAM bandwidth and tensor activity not available on this GPU (GPM needs "
                          "Hopper or newer, or a dcgm-exporter with profiling fields)" if missing
                          else f"no GPM samples inside the {stage} intervals")
        return out
    shares = {k: v / covered for k, v in by.items() if v > 0}
    out.update(available=True, covered_s=covered / max(len(gpus), 1), shares=shares,
               bandwidth_share=shares.get("bandwidth", 0.0), compute_share=shares.get("compute", 0.0),
               power_share=shares.get("power", 0.0))
    out["step_s"], out["step_source"] = step_seconds(engine, server_id=server_id, since=since, until=until,
                                                     engine_name=engine_name)
    current = next((s for g in gpus if (s := spec_for(g.name)) is not None), None)
    out["spec"] = current.name if current else None
    split = {k: v / covered for k, v in split_s.items()}
    out["what_if_split"] = split
    if out["step_s"] is not None and current is not None:
        out["what_if"] = what_ifs(out["step_s"], split["bandwidth"], split["compute"], current.name,
                                  power_share=split["power"])
    return out


def what_ifs(step_s: float, bandwidth_share: float, compute_share: float, current: str, *,
             power_share: float = 0.0) -> list[dict[str, Any]]:
    """The step on every other card of GPU_SPECS (WHAT_IF_DEFAULT first, else the H200), with
    the assumption."""
    here = next(s for s in GPU_SPECS if s.name == current)
    # the default card first; on that card itself, the H200 it is usually weighed against
    others = sorted((s for s in GPU_SPECS if s.name != current),
                    key=lambda s: (s.name != WHAT_IF_DEFAULT, s.name != "H200"))
    rows = []
    for other in others:
        seconds, note = what_if(step_s, bandwidth_share, here, other, compute_share, power_share)
        speedup = step_s / seconds if seconds else None
        rows.append({"card": other.name, "step_s": seconds, "speedup": speedup, "speed": speed_words(speedup),
                     "direction": speed_direction(speedup), "note": f"from {here.name} to {other.name}: {note}"})
    return rows


#: Within this factor of 1 the what-if reads "about the same speed" (a 1 % change of a step is
#: below what the model behind it can tell apart).
SAME_SPEED = 0.01


def speed_direction(speedup: float | None) -> str:
    """"up" for a faster card, "down" for a slower one, "off" for about the same or unknown:
    never an up arrow for a slowdown."""
    if speedup is None or abs(speedup - 1) < SAME_SPEED:
        return "off"
    return "up" if speedup > 1 else "down"


def speed_words(speedup: float | None) -> str | None:
    """The what-if's speed in words, always as a factor ≥ 1: a speedup of 2.03 reads "2.03× faster",
    one of 0.49 reads "2.04× slower" (1 / 0.49), and within 1 % "about the same speed"."""
    if speedup is None or speedup <= 0:
        return None
    direction = speed_direction(speedup)
    if direction == "off":
        return "about the same speed"
    if direction == "up":
        return f"{speedup:.2f}× faster"
    return f"{1 / speedup:.2f}× slower"
