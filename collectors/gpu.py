"""GPU collector: NVML readings (collectors/gpu_nvml.py) -> `gpu.<index>.*` samples.

Owns which server a GPU's samples belong to and the per-process memory attribution. Every value
comes from `read_gpus()`; a field the GPU does not support is `None` there and has no sample here
(missing is never 0). With no NVIDIA driver the first poll returns one `collector_error` event
("NVML is unavailable ... no GPU telemetry on this host") and later polls return nothing.

Attribution: a GPU's samples go to every server whose `gpu_indices` lists it, and to every server
with no `gpu_indices` (one server on one host needs no configuration); with no servers at all they
go to server_id 0 (the host). `gpu.<i>.server_mem_bytes` goes to the server owning the processes
(its `pids` and their descendants), whether or not it claims the GPU.

MIG (dcgm-exporter only; collectors/gpu_dcgm.py): each GPU instance of a card in MIG mode is a GPU
entry of its own, keyed `gpu.<i>.mig<GPU_I_ID>.` + the suffixes below (`gpu.0.mig3.mem_used_bytes`):
`<i>` stays the card's index, so a card counts once wherever GPUs are counted, and GPU_I_ID is the
driver's instance ID (`nvidia-smi mig -lgi`), stable while the MIG layout stays. An instance has
its memory and profiling figures (`gpm.*`; DCGM reports no `util_ratio` for it); the card's power,
energy, temperature, clocks and XIDs stay under `gpu.<i>.*`, read once. A server's `gpu_indices`
names cards: listing card 0 claims card 0 and each of its MIG instances.

| key (`gpu.<i>.` + ) | unit | meaning | cross-check |
|---|---|---|---|
| util_ratio | 0-1 | fraction of the last sample period a kernel ran | `nvidia-smi --query-gpu=utilization.gpu` |
| mem_util_ratio | 0-1 | fraction of time device memory was read/written | `utilization.memory` |
| mem_used_bytes, mem_total_bytes | bytes | device memory in use / installed | `memory.used`, `memory.total` (MiB) |
| mem_reserved_bytes | bytes | driver-reserved memory (NVML v2; v1 drivers count it in used) | `memory.reserved` |
| power_w, power_limit_w | W | board power draw / enforced limit | `power.draw`, `power.limit` |
| energy_j | J | energy since the driver loaded (counter; Δ/Δt = mean W) | `nvidia-smi -q -d POWER` |
| temp_c | °C | GPU core temperature | `temperature.gpu` |
| sm_clock_hz, mem_clock_hz | Hz | current SM / memory clock | `clocks.sm`, `clocks.mem` (MHz) |
| sm_clock_max_hz | Hz | the SM clock's maximum | `clocks.max.sm` (MHz) |
| clock_event_reasons | bitmask | nvmlClocksEventReason* bits active now | `clocks_event_reasons.active` |
| throttle_power, throttle_thermal | 1/0 | power-cap/brake, thermal/HW-slowdown bits set | `nvidia-smi -q -d PERFORMANCE` |
| ecc_corrected, ecc_uncorrected | count | volatile ECC errors since driver load | `ecc.errors.*.volatile.total` |
| pcie_tx_bytes_s, pcie_rx_bytes_s | B/s | PCIe throughput over NVML's 20 ms window | `nvidia-smi dmon -s t` |
| fan_ratio | 0-1 | fan speed (absent on passively cooled SXM parts) | `fan.speed` |
| pstate | 0-15 | performance state (0 = max) | `pstate` |
| procs, procs_mem_bytes | count, bytes | processes on the GPU and their memory | `--query-compute-apps=pid,used_memory` |
| server_mem_bytes | bytes | memory held by this server's processes | same, filtered by PID |
| gpm.dram_bw_util_ratio | 0-1 | DRAM bandwidth used vs the card's peak, over the poll interval (GPM, Hopper+) | `nvidia-smi dmon --gpm-metrics 10` |
| gpm.sm_util_ratio, gpm.sm_occupancy_ratio | 0-1 | SMs busy; warps resident vs the maximum (GPM) | `--gpm-metrics 2,3` |
| gpm.tensor_any_ratio, gpm.tensor_hmma_ratio, gpm.tensor_imma_ratio, gpm.tensor_dmma_ratio | 0-1 | tensor-core activity: any, FP16/BF16, INT8, FP64 (GPM) | `--gpm-metrics 5,7,9,8` |
| gpm.graphics_util_ratio, gpm.fp16_ratio, gpm.fp32_ratio, gpm.fp64_ratio | 0-1 | engine active; non-tensor FP pipes (GPM) | `--gpm-metrics 1,13,12,11` |
| gpm.pcie_tx_bytes_s, gpm.pcie_rx_bytes_s, gpm.nvlink_tx_bytes_s, gpm.nvlink_rx_bytes_s | B/s | PCIe and NVLink traffic averaged over the interval (GPM) | `--gpm-metrics 20,21,61,60` |

On a GPU or driver without GPM the `gpm.*` keys are absent ("not available on this GPU", kept in
the reading's errors), never 0; the first read after start has no interval yet and no `gpm.*`.
A critical XID (NVML event set) becomes one `gpu_xid` event per claiming server. With several
dcgm-exporters (collectors/gpu_dcgm.DcgmFleet), each exporter that fails while others answer is
one `collector_error` event when it starts failing, and the others' samples are written; an
exporter's series whose value is not a number (or NaN/±Inf) is left out, every other one is
written, and each field that turns bad is one `collector_error` event naming the exporter's
host and the field (collectors/gpu_dcgm.py, bad values).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from collectors.base import CollectorContext, EventRow, PollResult, SampleRow, ServerTarget
from collectors.gpu_nvml import (
    Backend,
    GpuReading,
    NvmlBackend,
    NvmlUnavailable,
    read_gpus,
)
from collectors.gpu_reasons import POWER_REASONS, THERMAL_REASONS
from storage import series_keys as sk

SOURCE = "gpu"
HOST_SERVER_ID = 0

#: GpuReading attribute -> metric suffix (units already in the attribute name).
_SCALAR_FIELDS: tuple[tuple[str, str], ...] = (
    ("util_ratio", "util_ratio"),
    ("mem_util_ratio", "mem_util_ratio"),
    ("mem_used_bytes", "mem_used_bytes"),
    ("mem_total_bytes", "mem_total_bytes"),
    ("mem_reserved_bytes", "mem_reserved_bytes"),
    ("power_w", "power_w"),
    ("power_limit_w", "power_limit_w"),
    ("energy_j", "energy_j"),
    ("temp_c", "temp_c"),
    ("sm_clock_hz", "sm_clock_hz"),
    ("sm_clock_max_hz", "sm_clock_max_hz"),
    ("mem_clock_hz", "mem_clock_hz"),
    ("ecc_corrected", "ecc_corrected"),
    ("ecc_uncorrected", "ecc_uncorrected"),
    ("pcie_tx_bytes_s", "pcie_tx_bytes_s"),
    ("pcie_rx_bytes_s", "pcie_rx_bytes_s"),
    ("fan_ratio", "fan_ratio"),
    ("pstate", "pstate"),
)


def reading_values(r: GpuReading) -> dict[str, float]:
    """The per-GPU metric suffixes with a value (unsupported fields, and NaN or ±Inf, are left
    out). Pure."""
    out: dict[str, float] = {}
    for attr, suffix in _SCALAR_FIELDS:
        v = getattr(r, attr)
        if v is not None:
            out[suffix] = float(v)
    if r.clock_event_reasons is not None:
        out["clock_event_reasons"] = float(r.clock_event_reasons)
        out["throttle_power"] = 1.0 if r.clock_event_reasons & POWER_REASONS else 0.0
        out["throttle_thermal"] = 1.0 if r.clock_event_reasons & THERMAL_REASONS else 0.0
    for key, value in (r.gpm or {}).items():  # GPM (Hopper+): gpu.<i>.gpm.<key>
        out[f"gpm.{key}"] = value
    if r.processes is not None:
        out["procs"] = float(len(r.processes))
        known = [b for _, b in r.processes if b is not None]
        if len(known) == len(r.processes):  # a partial sum would under-report
            out["procs_mem_bytes"] = float(sum(known))
    return {k: v for k, v in out.items() if math.isfinite(v)}


def key_prefix(r: GpuReading) -> str:
    """`gpu.<i>.` for a card, `gpu.<i>.mig<GPU_I_ID>.` for one of its MIG instances (module doc)."""
    return sk.gpu_prefix(r.index, r.mig_id)


def owners_for(gpu_index: int, servers: Sequence[ServerTarget]) -> list[ServerTarget]:
    """Servers that claim this GPU (listed in gpu_indices, or no gpu_indices configured)."""
    return [s for s in servers if not s.gpu_indices or gpu_index in s.gpu_indices]


def readings_to_samples(
    readings: Sequence[GpuReading],
    servers: Sequence[ServerTarget],
    ts: float,
    pid_owner: dict[int, int] | None = None,
) -> list[SampleRow]:
    """`gpu.<i>.*` SampleRows for each claiming server (module doc); pid_owner maps pid -> server id."""
    by_id = {s.id: s for s in servers}
    rows: list[SampleRow] = []
    for r in readings:
        values = reading_values(r)
        prefix = key_prefix(r)
        owners = owners_for(r.index, servers)
        targets: list[tuple[int, int | None]] = (
            [(s.id, s.launch_id) for s in owners] if servers else [(HOST_SERVER_ID, None)]
        )
        for server_id, launch_id in targets:
            for suffix, value in values.items():
                rows.append(
                    SampleRow(ts, server_id, prefix + suffix, value, SOURCE, launch_id)
                )
        per_server: dict[int, float] = {}
        for pid, used in r.processes or []:
            sid = (pid_owner or {}).get(pid)
            if sid is not None and used is not None and math.isfinite(used):
                per_server[sid] = per_server.get(sid, 0.0) + used
        for sid, used_total in per_server.items():
            target = by_id.get(sid)
            launch = target.launch_id if target else None
            rows.append(
                SampleRow(ts, sid, prefix + "server_mem_bytes", used_total, SOURCE, launch)
            )
    return rows


def xid_events(readings: Sequence[GpuReading], servers: Sequence[ServerTarget], ts: float) -> list[EventRow]:
    """One `gpu_xid` event per critical XID, for each server that claims the GPU (or the host)."""
    rows: list[EventRow] = []
    for r in readings:
        owners: list[ServerTarget | None] = list(owners_for(r.index, servers)) or [None]
        for xid in r.xids or []:
            message = (f"GPU {r.index} ({r.name or 'unknown'}) reported critical XID {xid}; "
                       "see NVIDIA's XID catalogue for its cause (e.g. 79: fell off the bus, "
                       "48/94/95: uncorrectable ECC) and check `nvidia-smi -q` and the kernel log.")
            for s in owners:
                rows.append(EventRow(ts, s.id if s else None, "gpu_xid", message,
                                     launch_id=s.launch_id if s else None))
    return rows


def pid_owner_map(
    servers: Sequence[ServerTarget], children: Callable[[int], list[int]] | None = None
) -> dict[int, int]:
    """pid -> server id for every managed server's pids and their descendants.

    An inference server's scheduler and detokenizer are child processes of the launched pid,
    and the scheduler is what holds GPU memory, so descendants must count.
    """
    children = children or _descendants
    out: dict[int, int] = {}
    for s in servers:
        for pid in s.pids:
            out[pid] = s.id
            for child in children(pid):
                out.setdefault(child, s.id)
    return out


def _descendants(pid: int) -> list[int]:
    try:
        import psutil

        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except Exception:  # gone, no permission, or psutil missing: attribute the root pid only
        return []


class GpuCollector:
    """Polls NVML every `interval_s`; idles after reporting once that NVML is unavailable."""

    name = "gpu"

    def __init__(
        self, interval_s: float = 2.0, backend_factory: Callable[[], Backend] = NvmlBackend
    ) -> None:
        self.interval_s = interval_s
        self._factory = backend_factory
        self._backend: Backend | None = None
        self._unavailable: str | None = None
        self._info: dict[str, Any] | None = None
        self._meta: dict[str, Any] | None = None  # driver versions: read once per backend

    def poll(self, ctx: CollectorContext) -> PollResult:
        result = PollResult()
        if self._unavailable is not None:
            return result  # reported once already; don't spam the event log
        if self._backend is None:
            try:
                self._backend = self._factory()
            except NvmlUnavailable as exc:
                self._unavailable = str(exc)
                result.events.append(EventRow(ctx.now(), None, "collector_error", self._unavailable))
                return result
        readings = read_gpus(self._backend)
        problems = getattr(self._backend, "problems", None)  # DcgmFleet: a failing exporter
        for message in problems() if callable(problems) else []:
            result.events.append(EventRow(ctx.now(), None, "collector_error", message))
        self._save_info(ctx, readings)
        needs_pids = any(s.pids for s in ctx.servers)
        owners = pid_owner_map(ctx.servers) if needs_pids else {}
        result.samples.extend(readings_to_samples(readings, ctx.servers, ctx.now(), owners))
        result.events.extend(xid_events(readings, ctx.servers, ctx.now()))
        return result

    def _save_info(self, ctx: CollectorContext, readings: list[GpuReading]) -> None:
        """Keep GPU model and driver under state `gpu:info` for provenance (scorecards, exports)."""
        if self._meta is None and readings:  # an exporter still starting has no driver to tell yet
            meta_fn = getattr(self._backend, "meta", None)
            self._meta = meta_fn() if callable(meta_fn) else {}
        meta = self._meta or {}
        info = {
            "driver": meta.get("driver"),
            "cuda_driver": meta.get("cuda_driver"),  # e.g. 12080 = CUDA 12.8 (preflight)
            "gpus": [{"index": r.index, "name": r.name, "uuid": r.uuid}
                     | ({"mig_id": r.mig_id, "mig_profile": r.mig_profile} if r.mig_id is not None else {})
                     for r in readings],
        }
        if info != self._info:
            self._info = info
            ctx.save_state("gpu:info", info)

    @property
    def unavailable_reason(self) -> str | None:
        """The sentence shown as "no GPU telemetry on this host", or None when NVML works."""
        return self._unavailable

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None
