"""What a simulated GPU did, second by second of model time: the record the dcgm-exporter
look-alike (simulator/dcgm.py) averages into DCGM's profiling fields.

Each forward the scheduler (or the image worker) runs is one `Segment`: its model-time span and
the FLOPs and HBM bytes the cost model (simulator/costmodel.py) says one GPU did in it. Over a
segment of `dt` seconds on a card of peak `F` dense FLOP/s and `B` bytes/s:

- tensor active = TENSOR_ISSUE x FLOPs / (F x dt), capped at 1: achieved over peak FLOP/s; the
  pipe reads somewhat busier than that (TENSOR_ISSUE)   (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)
- DRAM active   = (bytes + FLOPs / GEMM_INTENSITY) / (B x dt), capped at 1: the cost model's
  bytes (weights, KV, activations) plus what matrix products re-read from HBM beyond them
  (DCGM_FI_PROF_DRAM_ACTIVE)
- SM active     = 0.5 + 0.45 x min(1, tensor / 0.45); SM occupancy = 0.15 + 0.35 x DRAM
- power demand  = idle + (TDP - idle) x (0.3 + 1.8 x tensor + 0.3 x DRAM); the board draws at
  most its TDP, and above it the SM clock is held at sqrt((TDP - idle) / (demand - idle)) of
  its boost clock (the clock's share of dynamic power, voltage falling with it): the power wall
- idle (IDLE_SHARE x TDP) between segments

The constants are fitted to NVML GPM recordings of real work (tests/fixtures/gpu-kernels, an
H100 and an H200, and the H200 table of the GPU-wall issue): a Qwen-Image DiT step at 1024² with CFG reads
tensor ~50 %, DRAM ~30 % (H200) to ~42 % (H100), SM ~95 %, at the 700 W cap with the clock at
1.73-1.76 of 1.98 GHz; an 8B prefill tensor ~65 %, DRAM ~30-38 %, also capped; batch-1 decode
DRAM 41-48 %, tensor ~2 %, SM ~55-65 % at about half the TDP; idle 71-76 W. Window figures are
time-weighted means over [now - span, now]; energy is power integrated over model time since the
recorder started (monotonic).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from simulator.costmodel import GpuSpec, Work

IDLE_SHARE = 0.12  # idle board power / TDP (an idle H100 SXM drew 71 W of 700 W, an H200 76 W)
TENSOR_ISSUE = 1.2  # tensor pipe activity per unit of achieved / peak FLOP/s (DiT: 0.42 -> 0.50)
GEMM_INTENSITY = 400.0  # FLOPs per byte matrix products re-read from HBM (DiT 1024²: ~350 GB a step)
SM_AT_TENSOR = 0.45  # tensor activity from which the SMs read fully busy


@dataclass(frozen=True)
class Segment:
    start: float  # model seconds
    end: float
    tensor: float  # 0-1, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE while it ran
    dram: float  # 0-1, DCGM_FI_PROF_DRAM_ACTIVE while it ran
    pcie_rx_bytes: float
    pcie_tx_bytes: float

    @property
    def load(self) -> float:
        """Dynamic power demand as a share of TDP - idle (above 1: the power cap holds the clock)."""
        return 0.3 + 1.8 * self.tensor + 0.3 * self.dram

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
    clock_ratio: float = 1.0  # the SM clock over its boost clock while busy (below 1: the power cap held it)


class Activity:
    """The segments of one GPU group (all GPUs of one scheduler run the same forwards)."""

    def __init__(self, gpu: GpuSpec, tdp_w: float, clock: Callable[[], float], *, keep_s: float = 30.0) -> None:
        self.gpu = gpu
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
        """One forward of `dt` model seconds starting at `start` (model time of this clock).
        `peak_flops`: the dense FLOP/s at the launch's weight precision (fp8 doubles it)."""
        if dt <= 0:
            return
        peak = peak_flops or self.gpu.bf16_flops
        tensor = min(1.0, TENSOR_ISSUE * work.flops / (peak * dt))
        dram = min(1.0, (work.hbm_bytes + work.flops / GEMM_INTENSITY) / (self.gpu.hbm_bw * dt))
        self.segments.append(Segment(start, start + dt, tensor, dram, pcie_rx_bytes, pcie_tx_bytes))
        self._prune(start)

    def _prune(self, now: float) -> None:
        while self.segments and self.segments[0].end < now - self.keep_s:
            seg = self.segments.popleft()
            self._pruned_dyn_j += self._dyn_w(seg) * (seg.end - seg.start)

    def _dyn_w(self, seg: Segment) -> float:
        """What the board draws above idle: the demand, held at the TDP."""
        return (self.tdp_w - self.idle_w) * min(1.0, seg.load)

    def window(self, span: float) -> Window:
        """Means over the last `span` model seconds (less right after start)."""
        now = self.clock()
        lo = max(now - span, self.started)
        width = max(now - lo, 1e-9)
        busy = tensor = dram = sm = occ = dyn = rx = tx = held = 0.0
        for seg in self.segments:
            o = seg.overlap(lo, now)
            if o <= 0:
                continue
            share = o / width
            busy += share
            tensor += seg.tensor * share
            dram += seg.dram * share
            sm += (0.5 + 0.45 * min(1.0, seg.tensor / SM_AT_TENSOR)) * share
            occ += (0.15 + 0.35 * seg.dram) * share
            dyn += self._dyn_w(seg) * share
            held += math.sqrt(1.0 / seg.load) * share if seg.load > 1.0 else share
            span_s = seg.end - seg.start
            rx += seg.pcie_rx_bytes * o / span_s
            tx += seg.pcie_tx_bytes * o / span_s
        ratio = held / busy if busy > 0 else 1.0
        return Window(min(busy, 1.0), tensor, dram, sm, occ, self.idle_w + dyn, rx / width,
                      tx / width, ratio)

    def energy_j(self) -> float:
        """Joules since the recorder started: idle power throughout plus each segment's dynamic
        power over the part of it that has run (never decreases)."""
        now = self.clock()
        dyn = self._pruned_dyn_j + sum(self._dyn_w(s) * s.overlap(s.start, now)
                                       for s in self.segments)
        self._last_energy_j = max(self._last_energy_j,
                                  self.idle_w * max(0.0, now - self.started) + dyn)
        return self._last_energy_j
