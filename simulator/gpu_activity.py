"""What a simulated GPU did, second by second of model time: the record the dcgm-exporter
look-alike (simulator/dcgm.py) averages into DCGM's profiling fields.

Each forward the scheduler (or the image worker) runs is one `Segment`: its model-time span and
the FLOPs and HBM bytes the cost model (simulator/costmodel.py) says one GPU did in it. Over a
segment of `dt` seconds on a card of peak `F` FLOP/s and `B` bytes/s, with the cost model's
achievable fractions `MFU` (DIT_MFU for a DiT) and `MEM_EFF`:

- compute rate  = FLOPs / (F x MFU x dt), bandwidth rate = bytes / (B x MEM_EFF x dt), each
  capped at 1: how close the forward runs to each side of the roofline
- tensor active = ACTIVE_AT_ROOFLINE x compute rate   (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0-1)
- DRAM active   = ACTIVE_AT_ROOFLINE x bandwidth rate (DCGM_FI_PROF_DRAM_ACTIVE, 0-1);
  ACTIVE_AT_ROOFLINE = 0.9: on an H200 a bf16 matmul loop reads tensor 94 % and a device-copy
  loop DRAM 89 % (GPM measurements), not 100 %
- pressure      = max(compute rate, bandwidth rate)
- SM active     = 0.5 + 0.45 x pressure; SM occupancy = 0.15 + 0.35 x bandwidth rate
  (bandwidth-bound kernels keep many warps resident to hide memory latency; GEMMs few, large)
- power         = idle + (TDP - idle) x (0.25 + 0.75 x pressure); idle (IDLE_SHARE x TDP)
  between segments

So a prefill (compute side of the roofline) reads tensor high and DRAM low, a decode step
(bandwidth side) DRAM high and tensor near 0, a Qwen-Image denoising step at 1024² tensor high
(the roofline puts it on the compute side: ~1.8e14 FLOPs vs ~59 GB per forward; the roofline,
not a guess of bandwidth bound, is the source), and no segment (idle between
requests) reads both 0 at idle power. Window figures are time-weighted means over
[now - span, now]; energy is power integrated over model time since the recorder started
(monotonic).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from simulator.costmodel import MEM_EFF, MFU, GpuSpec, Work

IDLE_SHARE = 0.12  # idle board power / TDP (an idle H100 SXM draws ~70-90 W of 700 W)
ACTIVE_AT_ROOFLINE = 0.9  # pipe / DRAM activity of a kernel running at the achievable rate


@dataclass(frozen=True)
class Segment:
    start: float  # model seconds
    end: float
    compute_rate: float  # 0-1 of the achievable FLOP/s
    bandwidth_rate: float  # 0-1 of the achievable bytes/s
    pcie_rx_bytes: float
    pcie_tx_bytes: float

    @property
    def pressure(self) -> float:
        return max(self.compute_rate, self.bandwidth_rate)

    def overlap(self, lo: float, hi: float) -> float:
        return max(0.0, min(self.end, hi) - max(self.start, lo))


@dataclass(frozen=True)
class Window:
    """Time-weighted means over one window of model time (ratios 0-1, W, B/s)."""

    busy: float
    tensor: float
    dram: float
    sm_active: float
    sm_occupancy: float
    power_w: float
    pcie_rx_bytes_s: float
    pcie_tx_bytes_s: float


class Activity:
    """The segments of one GPU group (all GPUs of one scheduler run the same forwards)."""

    def __init__(self, gpu: GpuSpec, tdp_w: float, clock: Callable[[], float], *,
                 mfu: float = MFU, keep_s: float = 30.0) -> None:
        self.gpu = gpu
        self.mfu = mfu
        self.tdp_w = tdp_w
        self.idle_w = tdp_w * IDLE_SHARE
        self.clock = clock
        self.keep_s = keep_s
        self.segments: deque[Segment] = deque()
        self.started = clock()
        self._pruned_dyn_j = 0.0  # dynamic energy of segments dropped from the deque
        self._last_energy_j = 0.0

    def record(self, start: float, dt: float, work: Work, *, peak_flops: float | None = None,
               pcie_rx_bytes: float = 0.0, pcie_tx_bytes: float = 0.0) -> None:
        """One forward of `dt` model seconds starting at `start` (model time of this clock)."""
        if dt <= 0:
            return
        compute = min(1.0, work.flops / ((peak_flops or self.gpu.bf16_flops) * self.mfu * dt))
        bandwidth = min(1.0, work.hbm_bytes / (self.gpu.hbm_bw * MEM_EFF * dt))
        self.segments.append(Segment(start, start + dt, compute, bandwidth, pcie_rx_bytes,
                                     pcie_tx_bytes))
        self._prune(start)

    def _prune(self, now: float) -> None:
        while self.segments and self.segments[0].end < now - self.keep_s:
            seg = self.segments.popleft()
            self._pruned_dyn_j += self._dyn_w(seg) * (seg.end - seg.start)

    def _dyn_w(self, seg: Segment) -> float:
        return (self.tdp_w - self.idle_w) * (0.25 + 0.75 * seg.pressure)

    def window(self, span: float) -> Window:
        """Means over the last `span` model seconds (less right after start)."""
        now = self.clock()
        lo = max(now - span, self.started)
        width = max(now - lo, 1e-9)
        busy = tensor = dram = sm = occ = dyn = rx = tx = 0.0
        for seg in self.segments:
            o = seg.overlap(lo, now)
            if o <= 0:
                continue
            share = o / width
            busy += share
            tensor += ACTIVE_AT_ROOFLINE * seg.compute_rate * share
            dram += ACTIVE_AT_ROOFLINE * seg.bandwidth_rate * share
            sm += (0.5 + 0.45 * seg.pressure) * share
            occ += (0.15 + 0.35 * seg.bandwidth_rate) * share
            dyn += self._dyn_w(seg) * share
            span_s = seg.end - seg.start
            rx += seg.pcie_rx_bytes * o / span_s
            tx += seg.pcie_tx_bytes * o / span_s
        return Window(min(busy, 1.0), tensor, dram, sm, occ, self.idle_w + dyn, rx / width,
                      tx / width)

    def energy_j(self) -> float:
        """Joules since the recorder started: idle power throughout plus each segment's dynamic
        power over the part of it that has run (never decreases)."""
        now = self.clock()
        dyn = self._pruned_dyn_j + sum(self._dyn_w(s) * s.overlap(s.start, now)
                                       for s in self.segments)
        self._last_energy_j = max(self._last_energy_j,
                                  self.idle_w * max(0.0, now - self.started) + dyn)
        return self._last_energy_j
