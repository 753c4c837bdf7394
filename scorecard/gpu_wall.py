"""Which wall a GPU hits: memory bandwidth, compute, or neither — from GPM figures.

`utilization.gpu` reads ~100 % for a device copy loop and for a matmul loop alike (measured on an
H200: tests/fixtures/nvml-h200-{copy,matmul-gpm}.json). GPM (and dcgm-exporter's profiling
fields, mapped to the same `gpu.<i>.gpm.*` series) separates them: DRAM bandwidth utilisation
89 % vs 17 %, tensor activity 0 % vs 93 %.

Verdict per sample (one GPM interval), then per window by majority of the samples:

| verdict | rule (per sample) | what it means |
|---|---|---|
| `bandwidth` | DRAM bandwidth ≥ 60 % and above tensor activity | the step waits on HBM: a card with more bandwidth, fewer bytes per step (quantised weights, smaller KV) or bigger batches help |
| `compute` | tensor activity ≥ 60 % and ≥ DRAM bandwidth, or SM busy ≥ 80 % with DRAM < 60 % | the tensor cores are the limit: more FLOPS, lower precision, less work per step |
| `neither` | DRAM and tensor both < 30 % and SMs < 50 % while requests are running or waiting | the GPU is underfed: launch overhead, CPU-side scheduling, too small a batch |
| `idle` | as `neither`, but no request ran or waited | nothing to do |
| `mixed` | anything else | near no wall, or near both |

A MIG GPU instance (`gpu.<i>.mig<GPU_I_ID>.gpm.*`, scorecard/gpu_entries.py) gets a verdict of its
own, judged on its own activity; its achieved bandwidth is not given (the instance's share of the
card's peak is not known here), its ratios are. Thresholds are this module's constants; the evidence (means, shares, window) goes with every
verdict so an operator can judge it. Achieved bandwidth = DRAM utilisation × the card's peak
(`GPU_SPECS`, vendor figures with their sources).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine

from scorecard.gpu_entries import GpuEntry, gpu_entries, load_info
from storage import repo
from storage import series_keys as sk

BANDWIDTH_MIN = 0.60  # DRAM bandwidth utilisation from which a sample is bandwidth bound
TENSOR_MIN = 0.60  # tensor activity from which a sample is compute bound
SM_BUSY_MIN = 0.80  # SM activity that makes a non-tensor kernel compute bound
LOW = 0.30  # below this on DRAM and tensor (and SM below 0.5) the GPU is underfed
QUEUE_KEYS = (sk.METRICS_NUM_QUEUE_REQS, sk.METRICS_NUM_RUNNING_REQS, sk.LOG_QUEUE_REQ, sk.LOG_RUNNING_REQ,
              sk.METRICS_DIFFUSION_NUM_QUEUE_REQS, sk.METRICS_DIFFUSION_NUM_RUNNING_REQS)


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """A card's peak figures, from its vendor's datasheet (dense, no sparsity)."""

    name: str
    matches: tuple[str, ...]  # substrings of NVML's device name, most specific first
    mem_bw_bytes_s: float
    mem_bytes: float
    bf16_dense_flops: float
    source: str


TB, GB, TF = 1e12, 1e9, 1e12
#: Checked in order: the first spec one of whose `matches` is in the NVML name wins.
GPU_SPECS: tuple[GpuSpec, ...] = (
    GpuSpec("A100 PCIe 80GB", ("A100 80GB PCIe", "A100-PCIE-80GB"), 1.935 * TB, 80 * GB, 312 * TF,
            "NVIDIA A100 Tensor Core GPU datasheet (1,935 GB/s, 80 GB HBM2e, BF16 312 TFLOPS dense)"),
    GpuSpec("A100 SXM 80GB", ("A100-SXM4-80GB", "A100 80GB"), 2.039 * TB, 80 * GB, 312 * TF,
            "NVIDIA A100 Tensor Core GPU datasheet (2,039 GB/s, 80 GB HBM2e, BF16 312 TFLOPS dense)"),
    GpuSpec("A100 40GB", ("A100",), 1.555 * TB, 40 * GB, 312 * TF,
            "NVIDIA A100 Tensor Core GPU datasheet (1,555 GB/s, 40 GB HBM2)"),
    GpuSpec("H100 NVL", ("H100 NVL",), 3.9 * TB, 94 * GB, 835 * TF,
            "NVIDIA H100 datasheet, H100 NVL column (3.9 TB/s, 94 GB; BF16 1,671 TFLOPS with sparsity)"),
    GpuSpec("H100 PCIe", ("H100 PCIe",), 2.0 * TB, 80 * GB, 756 * TF,
            "NVIDIA H100 datasheet, H100 PCIe column (2 TB/s, 80 GB; BF16 1,513 TFLOPS with sparsity)"),
    GpuSpec("H100 SXM", ("H100",), 3.35 * TB, 80 * GB, 989 * TF,
            "NVIDIA H100 datasheet, H100 SXM column (3.35 TB/s, 80 GB HBM3; BF16 1,979 TFLOPS with sparsity)"),
    GpuSpec("H200", ("H200",), 4.8 * TB, 141 * GB, 989 * TF,
            "NVIDIA H200 datasheet (4.8 TB/s, 141 GB HBM3e; BF16 1,979 TFLOPS with sparsity)"),
    GpuSpec("B300", ("B300",), 8.0 * TB, 288 * GB, 2250 * TF,
            "NVIDIA HGX B300 specifications (8 TB/s, 288 GB HBM3e per GPU; BF16 4.5 PFLOPS with sparsity)"),
    GpuSpec("B200", ("B200",), 8.0 * TB, 180 * GB, 2250 * TF,
            "NVIDIA HGX B200 specifications (8 TB/s, 180 GB HBM3e per GPU; BF16 4.5 PFLOPS with sparsity)"),
)


def spec_for(name: str | None) -> GpuSpec | None:
    """The spec of an NVML device name ("NVIDIA H200", "NVIDIA A100-SXM4-80GB"), or None."""
    if not name:
        return None
    for spec in GPU_SPECS:
        if any(m in name for m in spec.matches):
            return spec
    return None


def spec_by_short_name(short: str) -> GpuSpec | None:
    """A spec by its short name ("H200", "B300"), for what-ifs."""
    return next((s for s in GPU_SPECS if s.name.lower() == short.lower()), None)


def classify(dram: float, tensor: float, sm: float | None, busy: bool) -> str:
    """One GPM interval's verdict (module table). Ratios 0-1; `busy`: requests ran or waited."""
    if dram >= BANDWIDTH_MIN and dram > tensor:
        return "bandwidth"
    if tensor >= TENSOR_MIN and tensor >= dram:
        return "compute"
    if sm is not None and sm >= SM_BUSY_MIN and dram < BANDWIDTH_MIN:
        return "compute"
    if dram < LOW and tensor < LOW and (sm is None or sm < 0.5):
        return "neither" if busy else "idle"
    return "mixed"


#: Every verdict, in a fixed order: a scorecard stores the verdict as its index here (unit
#: "verdict"; format.fmt_value shows VERDICT_WORDS in the same order).
VERDICTS = ("bandwidth", "compute", "neither", "idle", "mixed")
REASONS = {
    "bandwidth": "bound by memory bandwidth: the step waits on HBM reads and writes",
    "compute": "bound by compute: the tensor cores (or SMs) are the limit",
    "neither": "near neither wall while requests wait: launch overhead, CPU-side scheduling or too small a batch",
    "idle": "idle: no requests ran",
    "mixed": "near no single wall (or near both)",
}


def what_if(step_s: float, bandwidth_share: float, current: GpuSpec, other: GpuSpec,
            compute_share: float = 0.0) -> tuple[float, str]:
    """The same step on `other`, at the same utilisation. Returns (seconds, the assumption in words).

    step × (bandwidth share × peak bandwidth ratio + compute share × dense BF16 FLOPS ratio + the
    rest): the bandwidth-bound share scales with memory bandwidth, the compute-bound share with
    tensor throughput, the rest (launch overhead, mixed, underfed) stays as it is. Scaling only
    the bandwidth share would call a compute-bound step (Qwen-Image 1024² per the simulator's
    roofline) no faster on a B300, which is wrong; scaling both keeps each wall with its own figure.
    """
    bw = min(max(bandwidth_share, 0.0), 1.0)
    comp = min(max(compute_share, 0.0), 1.0 - bw)
    bw_ratio = current.mem_bw_bytes_s / other.mem_bw_bytes_s
    flops_ratio = current.bf16_dense_flops / other.bf16_dense_flops
    seconds = step_s * (bw * bw_ratio + comp * flops_ratio + (1.0 - bw - comp))
    note = (f"assumes the {100 * bw:.0f} % of the step that is bandwidth bound scales with memory "
            f"bandwidth ({current.mem_bw_bytes_s / TB:g} → {other.mem_bw_bytes_s / TB:g} TB/s), the "
            f"{100 * comp:.0f} % that is compute bound with dense BF16 tensor throughput "
            f"({current.bf16_dense_flops / TF:g} → {other.bf16_dense_flops / TF:g} TFLOPS), and the "
            "rest stays as it is; clocks, precision and the software stack are taken as equal")
    return seconds, note


def _busy_at(ts: np.ndarray, queue: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per GPM sample: did a request run or wait (the newest queue/running reading at or before)?"""
    busy = np.zeros(len(ts), dtype=bool)
    for q_ts, q_val in queue:
        if len(q_ts) == 0:
            continue
        idx = np.searchsorted(q_ts, ts, side="right") - 1
        ok = idx >= 0
        busy[ok] |= q_val[idx[ok]] > 0
    return busy


@dataclass(frozen=True, slots=True)
class GpuSamples:
    """One GPU entry's GPM samples in a window: timestamps, ratios and the verdict of each sample
    (a card, or a MIG instance `mig_id` of card `index`; `label` names either)."""

    index: int
    name: str | None
    ts: np.ndarray
    dram: np.ndarray
    tensor: np.ndarray  # NaN where the GPU reported no tensor activity
    sm: np.ndarray  # NaN where absent
    verdicts: tuple[str, ...]
    mig_id: int | None = None
    label: str = ""


def gpu_samples(engine: Engine, *, server_id: int, since: float,
                until: float) -> tuple[list[GpuSamples], list[GpuEntry]]:
    """(GPU entries with GPM samples in [since, until), entries with telemetry but no GPM). A
    card in MIG mode is judged per instance: the card itself has no GPM figures, and is not missing."""
    entries = gpu_entries(engine, server_id=server_id)
    info = load_info(engine, server_id)
    gpu_names = {g.get("index"): g.get("name") for g in info.get("gpus", []) if isinstance(g, dict)}
    queue = [repo.sample_points(engine, server_id=server_id, metric=k, since=since - 60, until=until)
             for k in QUEUE_KEYS]
    out: list[GpuSamples] = []
    missing: list[GpuEntry] = []
    for e in entries:
        ts, dram = repo.sample_points(engine, server_id=server_id, metric=e.key("gpm.dram_bw_util_ratio"),
                                      since=since, until=until)
        if len(ts) == 0:
            if any(repo.sample_sum(engine, server_id=server_id, metric=e.key(f), since=since, until=until)[1]
                   for f in ("util_ratio", "mem_used_bytes")):
                missing.append(e)  # telemetry, but no GPM figures: not available on this GPU
            continue
        tensor = _aligned(engine, server_id, e.key("gpm.tensor_any_ratio"), ts, since, until)
        sm = _aligned(engine, server_id, e.key("gpm.sm_util_ratio"), ts, since, until)
        busy = _busy_at(ts, queue)
        verdicts = tuple(classify(float(d), float(t), None if np.isnan(s) else float(s), bool(b))
                         for d, t, s, b in zip(dram, np.nan_to_num(tensor), sm, busy, strict=True))
        out.append(GpuSamples(e.index, gpu_names.get(e.index), ts, dram, tensor, sm, verdicts, e.mig_id,
                              e.label))
    return out, missing


def _nanmean(a: np.ndarray) -> float | None:
    return None if np.all(np.isnan(a)) else float(np.nanmean(a))


def gpu_walls(engine: Engine, *, server_id: int, since: float, until: float) -> dict[str, Any]:
    """The verdict per GPU entry of a server over [since, until), with its evidence.

    Returns {"available": bool, "why_not": str | None, "gpus": [{index, mig_id, label, name,
    spec, samples, dram_ratio, tensor_ratio, sm_ratio, achieved_bw_bytes_s, peak_bw_bytes_s,
    shares: {verdict: 0-1}, verdict, reason}], "missing": [label of each GPU entry without GPM],
    "window": [since, until]}. GPUs without GPM figures are named in `why_not`. A MIG instance
    (`mig_id` set) has no achieved or peak bandwidth (module doc).
    """
    gpus, missing = gpu_samples(engine, server_id=server_id, since=since, until=until)
    out: list[dict[str, Any]] = []
    for g in gpus:
        counts = Counter(g.verdicts)
        verdict = counts.most_common(1)[0][0]
        spec = spec_for(g.name)
        peak = spec.mem_bw_bytes_s if spec and g.mig_id is None else None
        dram_mean = float(np.mean(g.dram))
        out.append({
            "index": g.index, "mig_id": g.mig_id, "label": g.label or f"GPU {g.index}", "name": g.name,
            "spec": spec.name if spec else None,
            "samples": len(g.ts), "dram_ratio": dram_mean, "tensor_ratio": _nanmean(g.tensor),
            "sm_ratio": _nanmean(g.sm),
            "achieved_bw_bytes_s": dram_mean * peak if peak else None,
            "peak_bw_bytes_s": peak,
            "shares": {k: v / len(g.verdicts) for k, v in counts.items()},
            "verdict": verdict, "reason": REASONS[verdict],
        })
    why_not = None
    if not out and not missing:
        why_not = "no GPU telemetry for this server in the window"
    elif missing:
        why_not = (f"{', '.join(e.label for e in missing)}: DRAM bandwidth and tensor activity not available "
                   "on this GPU (GPM needs Hopper or newer; or point gpu.dcgm_url at a dcgm-exporter "
                   "with profiling fields)")
    return {"available": bool(out), "why_not": why_not, "gpus": out, "missing": [e.label for e in missing],
            "window": [since, until]}


def _aligned(engine: Engine, server_id: int, metric: str, ts: np.ndarray, since: float, until: float) -> np.ndarray:
    """`metric`'s values at the GPM timestamps `ts` (same poll, same ts); NaN where absent."""
    t2, v2 = repo.sample_points(engine, server_id=server_id, metric=metric, since=since, until=until)
    out = np.full(len(ts), np.nan)
    if len(t2):
        idx = np.searchsorted(t2, ts)
        ok = (idx < len(t2)) & (t2[np.minimum(idx, len(t2) - 1)] == ts)
        out[ok] = v2[idx[ok]]
    return out
