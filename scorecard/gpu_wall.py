"""Which wall a GPU hits: memory bandwidth, compute, or neither — from GPM figures.

`utilization.gpu` reads ~100 % for a device copy loop and for a matmul loop alike (measured on an
H200: tests/fixtures/nvml-h200-{copy,matmul-gpm}.json). GPM (and dcgm-exporter's profiling
fields, mapped to the same `gpu.<i>.gpm.*` series) separates them: DRAM bandwidth utilisation
89 % vs 17 %, tensor activity 0 % vs 93 %.

Verdict per sample (one GPM interval), then per window by majority of the samples. The rules
were set against recordings of real work (tests/fixtures/gpu-kernels: a Qwen-Image DiT step,
weight streaming, 8B decode and prefill on an H100 and on an H200; the issue's H200 table), not only against a
copy loop and a matmul loop:

| verdict | rule (per sample) | what it means |
|---|---|---|
| `bandwidth` | DRAM bandwidth ≥ 60 % and above tensor activity; or DRAM ≥ 35 % and ≥ 4 × tensor | the step waits on HBM. Weight streaming (batch-1 decode, a GEMV over every weight) reaches only 56-60 % of the datasheet bandwidth (41-48 % for graphed decode) and a copy loop 89 %, so 60 % alone called streaming "mixed": DRAM dominating idle tensor cores is the pattern |
| `power` | a wall other than bandwidth (or SMs ≥ 50 % busy) while a power or thermal reason holds the SM clock below 97 % of its maximum | the board's power (or heat) limit holds the clock: the tensor cores wait on the clock, not on their count |
| `compute` | tensor activity ≥ 60 % and ≥ DRAM; or SM busy ≥ 80 % with DRAM < 60 % | the tensor cores (or SMs) are the limit: more FLOPS, lower precision, less work per step |
| `neither` | no wall, and the GPU ran kernels less than 90 % of the interval (utilization.gpu), or DRAM and tensor < 30 % and SMs < 50 % while requests ran or waited | the GPU waits on the host: launch overhead, CPU-side scheduling, too small a batch |
| `idle` | no kernel ran (utilization.gpu and SMs < 5 %) and no request ran or waited | nothing to do |
| `mixed` | anything else | near no single wall (or near both): the evidence says which share dominates |

Whether a GPU works is judged from the GPU itself as well as from the server's queues, so a
starved GPU (eager decode at 18 % busy) reads `neither`, never `idle`.

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

from collectors.gpu_reasons import HOLDING_REASONS, reason_names
from scorecard.gpu_entries import GpuEntry, gpu_entries, load_info
from storage import repo
from storage import series_keys as sk

BANDWIDTH_MIN = 0.60  # DRAM bandwidth utilisation from which a sample is bandwidth bound
STREAM_MIN = 0.35  # ... or from which it is, when DRAM dominates the tensor cores by DOMINANCE
DOMINANCE = 4.0  # DRAM this many times tensor activity: streaming, bandwidth bound
LEANS = 1.5  # of a `mixed` sample's two shares, one this many times the other dominates it
TENSOR_MIN = 0.60  # tensor activity from which a sample is compute bound
SM_BUSY_MIN = 0.80  # SM activity that makes a non-tensor kernel compute bound
LOW = 0.30  # below this on DRAM and tensor (and SM below 0.5) the GPU is underfed
STARVED_UTIL = 0.90  # a GPU running kernels less of the interval than this waits on the host
WORKING = 0.05  # utilization.gpu or SM activity from which the GPU is doing something
HELD_CLOCK = 0.97  # an SM clock below this share of its maximum, with a power or thermal reason: held
AT_LIMIT = 0.95  # without exported reasons: a board drawing this share of its limit is held by it
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
    tdp_w: float = 0.0  # board power limit out of the box (0: unknown)
    sm_boost_mhz: float = 0.0  # the SM clock's maximum (0: unknown)


TB, GB, TF = 1e12, 1e9, 1e12
#: Checked in order: the first spec one of whose `matches` is in the NVML name wins.
GPU_SPECS: tuple[GpuSpec, ...] = (
    GpuSpec("A100 PCIe 80GB", ("A100 80GB PCIe", "A100-PCIE-80GB"), 1.935 * TB, 80 * GB, 312 * TF,
            "NVIDIA A100 Tensor Core GPU datasheet (1,935 GB/s, 80 GB HBM2e, BF16 312 TFLOPS dense; 300 W)", 300, 1410),
    GpuSpec("A100 SXM 80GB", ("A100-SXM4-80GB", "A100 80GB"), 2.039 * TB, 80 * GB, 312 * TF,
            "NVIDIA A100 Tensor Core GPU datasheet (2,039 GB/s, 80 GB HBM2e, BF16 312 TFLOPS dense; 400 W)", 400, 1410),
    GpuSpec("A100 40GB", ("A100",), 1.555 * TB, 40 * GB, 312 * TF,
            "NVIDIA A100 Tensor Core GPU datasheet (1,555 GB/s, 40 GB HBM2)"),
    GpuSpec("H100 NVL", ("H100 NVL",), 3.9 * TB, 94 * GB, 835 * TF,
            "NVIDIA H100 datasheet, H100 NVL column (3.9 TB/s, 94 GB; BF16 1,671 TFLOPS with sparsity; 400 W)", 400, 1785),
    GpuSpec("H100 PCIe", ("H100 PCIe",), 2.0 * TB, 80 * GB, 756 * TF,
            "NVIDIA H100 datasheet, H100 PCIe column (2 TB/s, 80 GB; BF16 1,513 TFLOPS with sparsity; 350 W)", 350, 1755),
    GpuSpec("H100 SXM", ("H100",), 3.35 * TB, 80 * GB, 989 * TF,
            "NVIDIA H100 datasheet, H100 SXM column (3.35 TB/s, 80 GB HBM3; BF16 1,979 TFLOPS with sparsity; 700 W); "
            "1,980 MHz: NVML's maximum SM clock, read on an H100 SXM", 700, 1980),
    GpuSpec("H200", ("H200",), 4.8 * TB, 141 * GB, 989 * TF,
            "NVIDIA H200 datasheet (4.8 TB/s, 141 GB HBM3e; BF16 1,979 TFLOPS with sparsity; 700 W); "
            "1,980 MHz: nvidia-smi's clock after a matmul on an H200", 700, 1980),
    GpuSpec("B300", ("B300",), 8.0 * TB, 288 * GB, 2250 * TF,
            "NVIDIA HGX B300 specifications (8 TB/s, 288 GB HBM3e per GPU; BF16 4.5 PFLOPS with sparsity); "
            "1,100 W and 2,032 MHz approximate (Pitwall's simulator uses the same)", 1100, 2032),
    GpuSpec("B200", ("B200",), 8.0 * TB, 180 * GB, 2250 * TF,
            "NVIDIA HGX B200 specifications (8 TB/s, 180 GB HBM3e per GPU; BF16 4.5 PFLOPS with sparsity); "
            "1,000 W and 1,965 MHz approximate (Pitwall's simulator uses the same)", 1000, 1965),
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


def classify(dram: float, tensor: float, sm: float | None, busy: bool, *, util: float | None = None,
             held: bool = False) -> str:
    """One GPM interval's verdict (module table). Ratios 0-1; `busy`: requests ran or waited;
    `util`: utilization.gpu (None: not read); `held`: a power or thermal reason held the SM clock."""
    working = (util is not None and util >= WORKING) or (sm is not None and sm >= WORKING)
    if util is not None and util < WORKING and (sm is None or sm < WORKING) and dram < WORKING and tensor < WORKING:
        return "neither" if busy else "idle"
    if dram >= BANDWIDTH_MIN and dram > tensor or dram >= STREAM_MIN and dram >= DOMINANCE * tensor:
        return "bandwidth"
    compute = (tensor >= TENSOR_MIN and tensor >= dram) or (
        sm is not None and sm >= SM_BUSY_MIN and dram < BANDWIDTH_MIN)
    if held and (compute or (sm is not None and sm >= 0.5)):
        return "power"
    if compute:
        return "compute"
    if util is not None and util < STARVED_UTIL:
        return "neither"
    if dram < LOW and tensor < LOW and (sm is None or sm < 0.5):
        return "neither" if busy or working else "idle"
    return "mixed"


def dominance(dram: float, tensor: float | None) -> str:
    """Which of DRAM and tensor activity dominates, in words, for a `mixed` verdict."""
    if tensor is None:
        return f"DRAM {100 * dram:.0f} %, tensor activity not reported"
    pair = f"DRAM {100 * dram:.0f} % vs tensor {100 * tensor:.0f} %"
    if dram >= LEANS * tensor and dram > 0:
        return f"{pair}: DRAM dominates"
    if tensor >= LEANS * dram and tensor > 0:
        return f"{pair}: tensor dominates"
    return f"{pair}: neither dominates"


#: Every verdict, in a fixed order: a scorecard stores the verdict as its index here (unit
#: "verdict"; format.fmt_value shows VERDICT_WORDS in the same order).
VERDICTS = ("bandwidth", "compute", "neither", "idle", "mixed", "power")
REASONS = {
    "bandwidth": "bound by memory bandwidth: the step waits on HBM reads and writes",
    "compute": "bound by compute: the tensor cores (or SMs) are the limit",
    "neither": "near neither wall: the GPU waits on the host (launch overhead, CPU-side scheduling or too small a batch)",
    "idle": "idle: no requests ran",
    "mixed": "near no single wall (or near both)",
    "power": "bound by power: the board's power or thermal limit holds the SM clock below its maximum",
}


def what_if(step_s: float, bandwidth_share: float, current: GpuSpec, other: GpuSpec,
            compute_share: float = 0.0, power_share: float = 0.0) -> tuple[float, str]:
    """The same step on `other`, at the same utilisation. Returns (seconds, the assumption in words).

    step × (bandwidth share × peak bandwidth ratio + (compute + power share) × dense BF16 FLOPS
    ratio + the rest): the bandwidth-bound share scales with memory bandwidth, the compute-bound
    share with tensor throughput, the share held by the power cap as compute too (the other card,
    under its own cap, taken to reach the same fraction of its peak: the note says so), and the
    rest (launch overhead, mixed, underfed) stays as it is. Scaling only the bandwidth share would
    call a compute-bound step no faster on a B300, which is wrong.
    """
    bw = min(max(bandwidth_share, 0.0), 1.0)
    comp = min(max(compute_share, 0.0), 1.0 - bw)
    pw = min(max(power_share, 0.0), 1.0 - bw - comp)
    bw_ratio = current.mem_bw_bytes_s / other.mem_bw_bytes_s
    flops_ratio = current.bf16_dense_flops / other.bf16_dense_flops
    seconds = step_s * (bw * bw_ratio + (comp + pw) * flops_ratio + (1.0 - bw - comp - pw))
    held = (f", the {100 * pw:.0f} % held by the power cap as compute too (assumes the {other.name}, "
            "held by its own cap, reaches the same fraction of its peak)") if pw > 0 else ""
    note = (f"assumes the {100 * bw:.0f} % of the step that moves memory (bandwidth-bound samples, and the "
            "DRAM share of compute-bound ones: elementwise, norm and copy work) scales with memory "
            f"bandwidth ({current.mem_bw_bytes_s / TB:g} → {other.mem_bw_bytes_s / TB:g} TB/s), the "
            f"{100 * comp:.0f} % that is compute bound with dense BF16 tensor throughput "
            f"({current.bf16_dense_flops / TF:g} → {other.bf16_dense_flops / TF:g} TFLOPS){held}, and the "
            "rest stays as it is; precision and the software stack are taken as equal")
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
    util: np.ndarray | None = None  # utilization.gpu at each sample; NaN where absent
    clock: Clocks | None = None
    busy: np.ndarray | None = None  # requests ran or waited at each sample (the server's queues)


@dataclass(frozen=True, slots=True)
class Clocks:
    """The card's clock and power at each GPM sample (NaN where absent): what holds a clock."""

    sm_hz: np.ndarray
    sm_max_hz: np.ndarray
    power_w: np.ndarray
    power_limit_w: np.ndarray
    reasons: np.ndarray  # the clock-event reason bitmask

    spec: GpuSpec | None = None  # the card's datasheet limits, where the GPU reports none

    def top_hz(self) -> np.ndarray:
        """The SM clock's maximum: as reported, else the card's boost clock (GPU_SPECS)."""
        boost = self.spec.sm_boost_mhz * 1e6 if self.spec and self.spec.sm_boost_mhz else np.nan
        return np.where(np.isnan(self.sm_max_hz), boost, self.sm_max_hz)

    def limit_w(self) -> np.ndarray:
        """The power limit: as reported, else the card's TDP (GPU_SPECS)."""
        tdp = self.spec.tdp_w if self.spec and self.spec.tdp_w else np.nan
        return np.where(np.isnan(self.power_limit_w), tdp, self.power_limit_w)

    def held(self) -> np.ndarray:
        """Per sample: the SM clock is below HELD_CLOCK of its maximum (where that is known) and
        a power or thermal reason is active, or, where the reasons are not exported (a default
        dcgm-exporter), the board draws at least AT_LIMIT of its power limit."""
        top = self.top_hz()
        below = np.where(np.isnan(top) | np.isnan(self.sm_hz), True,
                         self.sm_hz < HELD_CLOCK * np.nan_to_num(top, nan=np.inf))
        bits = np.nan_to_num(self.reasons, nan=0.0).astype(np.int64)
        limit = self.limit_w()
        at_limit = ~np.isnan(limit) & ~np.isnan(self.power_w) & (np.nan_to_num(self.power_w) >= AT_LIMIT
                                                                 * np.nan_to_num(limit, nan=np.inf))
        cause = np.where(np.isnan(self.reasons), at_limit & ~np.isnan(top), (bits & HOLDING_REASONS) != 0)
        return cause & below


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
        util = _aligned(engine, server_id, e.key("util_ratio"), ts, since, until)
        card = sk.gpu_prefix(e.index, None)  # clocks and power are the whole card's, MIG or not
        sm_hz, sm_max_hz, power_w, limit_w, reasons = (
            _aligned(engine, server_id, card + f, ts, since, until)
            for f in ("sm_clock_hz", "sm_clock_max_hz", "power_w", "power_limit_w", "clock_event_reasons"))
        clock = Clocks(sm_hz, sm_max_hz, power_w, limit_w, reasons, spec=spec_for(gpu_names.get(e.index)))
        busy, held = _busy_at(ts, queue), clock.held()
        verdicts = tuple(
            classify(float(d), float(t), None if np.isnan(s) else float(s), bool(b),
                     util=None if np.isnan(u) else float(u), held=bool(h))
            for d, t, s, b, u, h in zip(dram, np.nan_to_num(tensor), sm, busy, util, held, strict=True))
        out.append(GpuSamples(e.index, gpu_names.get(e.index), ts, dram, tensor, sm, verdicts, e.mig_id,
                              e.label, util, clock, busy))
    return out, missing


def _nanmean(a: np.ndarray) -> float | None:
    return None if np.all(np.isnan(a)) else float(np.nanmean(a))


def gpu_walls(engine: Engine, *, server_id: int, since: float, until: float) -> dict[str, Any]:
    """The verdict per GPU entry of a server over [since, until), with its evidence.

    Returns {"available": bool, "why_not": str | None, "gpus": [{index, mig_id, label, name,
    spec, samples, dram_ratio, tensor_ratio, sm_ratio, util_ratio, achieved_bw_bytes_s,
    peak_bw_bytes_s, shares: {verdict: 0-1}, verdict, reason, power (_power_evidence: None when
    no reason held the clock), neither_queued_share (samples `neither` while requests ran or
    waited)}], "missing": [label of each GPU entry without GPM],
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
        reason = REASONS[verdict]
        power = _power_evidence(g)
        if verdict == "power" and power:
            reason = f"bound by power: {power['text']}"
        elif verdict == "mixed":
            reason += f"; {dominance(dram_mean, _nanmean(g.tensor))}"
        util = _nanmean(g.util) if g.util is not None else None
        if verdict == "neither" and util is not None:
            reason += f"; it ran kernels {100 * util:.0f} % of the time"
        out.append({
            "index": g.index, "mig_id": g.mig_id, "label": g.label or f"GPU {g.index}", "name": g.name,
            "spec": spec.name if spec else None,
            "samples": len(g.ts), "dram_ratio": dram_mean, "tensor_ratio": _nanmean(g.tensor),
            "sm_ratio": _nanmean(g.sm), "util_ratio": util,
            "achieved_bw_bytes_s": dram_mean * peak if peak else None,
            "peak_bw_bytes_s": peak,
            "shares": {k: v / len(g.verdicts) for k, v in counts.items()},
            "verdict": verdict, "reason": reason, "power": power,
            # the starved samples while requests ran or waited: what the doctor's underfed rule reads
            "neither_queued_share": float(np.mean((np.asarray(g.verdicts) == "neither") & g.busy))
            if g.busy is not None else counts.get("neither", 0) / len(g.verdicts),
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


def _power_evidence(g: GpuSamples) -> dict[str, Any] | None:
    """The clock and power while a reason held the clock ({held_share, sm_hz, sm_max_hz, power_w,
    power_limit_w, reasons, text}); None when no sample was held or none was read."""
    if g.clock is None:
        return None
    held = g.clock.held()
    if not held.any():
        return None
    c = g.clock
    sm, top = _nanmean(c.sm_hz[held]), _nanmean(c.top_hz()[held])
    watts, limit = _nanmean(c.power_w[held]), _nanmean(c.limit_w()[held])
    bits = 0
    for b in np.nan_to_num(c.reasons[held], nan=0.0).astype(np.int64):
        bits |= int(b) & HOLDING_REASONS
    names = reason_names(bits) or ["at the power limit; the clock-event reasons are not exported"]
    clock = (f"clocks held at {sm / 1e9:.2f}" + (f" of {top / 1e9:.2f} GHz" if top else " GHz (maximum not reported)")
             if sm else "clocks held")
    at = f" at {watts:.0f} of {limit:.0f} W" if watts and limit else f" at {watts:.0f} W" if watts else ""
    share = float(held.mean())
    tensor = _nanmean(g.tensor)
    text = (f"{clock}{at} ({', '.join(names)}; {100 * share:.0f} % of the samples); tensor "
            + (f"{100 * tensor:.0f} %" if tensor is not None else "not reported")
            + f", DRAM {100 * float(np.mean(g.dram)):.0f} %")
    return {"held_share": share, "sm_hz": sm, "sm_max_hz": top, "power_w": watts, "power_limit_w": limit,
            "reasons": names, "text": text}


def _aligned(engine: Engine, server_id: int, metric: str, ts: np.ndarray, since: float, until: float) -> np.ndarray:
    """`metric`'s values at the GPM timestamps `ts` (same poll, same ts); NaN where absent."""
    t2, v2 = repo.sample_points(engine, server_id=server_id, metric=metric, since=since, until=until)
    out = np.full(len(ts), np.nan)
    if len(t2):
        idx = np.searchsorted(t2, ts)
        ok = (idx < len(t2)) & (t2[np.minimum(idx, len(t2) - 1)] == ts)
        out[ok] = v2[idx[ok]]
    return out
