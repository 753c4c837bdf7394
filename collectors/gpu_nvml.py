"""The NVML access layer: raw reads and their conversion to `GpuReading`.

Everything Pitwall knows about GPUs passes through here (a clean NVML layer that the UI never
bypasses). The layer has two halves:

- **Raw reads** (`NvmlBackend.read_raw`): one plain-JSON dict per GPU holding what each NVML call
  returned, in NVML's own units (mW, mJ, MHz, KB/s, percent), or the error it raised. Each field
  is read in its own `try`, so a field the GPU does not support (NVML_ERROR_NOT_SUPPORTED) costs
  that field only.
- **Conversion** (`raw_to_reading`, pure): raw dict -> `GpuReading` in base units (bytes, W, J,
  Hz, 0-1 ratios, bytes/s). Unsupported or failed fields are `None` and their error is kept in
  `GpuReading.errors`.

Raw dicts are plain JSON, so collectors/gpu_record.py can record them on a real GPU and replay
them through the same conversion (tests/fixtures/nvml-h200-*.json).

Cross-check a live reading with `nvidia-smi --query-gpu=index,name,uuid,utilization.gpu,
utilization.memory,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,
clocks.mem,clocks_event_reasons.active --format=csv`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from storage.errors import CollectorError

#: Raw field keys read per GPU, in NVML's units (the suffix names the unit).
RAW_FIELDS: tuple[str, ...] = (
    "name",
    "uuid",
    "utilization_pct",  # {"gpu": %, "memory": %} over the driver's last sample period
    "memory_bytes",  # {"total", "used", "free", "reserved" (v2), "api": 1 | 2}
    "power_mw",
    "power_limit_mw",  # enforced limit
    "energy_mj",  # total energy since the driver loaded (monotonic counter)
    "temperature_c",
    "sm_clock_mhz",
    "sm_clock_max_mhz",  # the SM clock's ceiling (nvmlDeviceGetMaxClockInfo): what a held clock is held below
    "mem_clock_mhz",
    "clock_event_reasons",  # bitmask, nvmlClocksEventReason*
    "ecc_corrected_volatile",
    "ecc_uncorrected_volatile",
    "pcie_tx_kb_s",
    "pcie_rx_kb_s",
    "fan_pct",
    "pstate",
    "processes",  # [{"pid", "used_bytes" | None}] compute + graphics
    "gpm",  # {"interval_s", "metrics": {GPM_METRICS key: value}, "failed": {key: error}}
    "xid_events",  # [{"xid": n, "data": n}] critical XID errors since the last read
)

#: GPU Performance Monitoring metrics read (Hopper and newer; nvml.h `NVML_GPM_METRIC_*`).
#: Key -> (pynvml constant, unit). Percentages are of the interval between two GPM samples;
#: bandwidths are MiB/s averaged over it. Unlike `utilization_pct`, which reads 100 for any
#: kernel that keeps the GPU busy, DRAM bandwidth and tensor activity tell the two walls apart.
GPM_METRICS: dict[str, tuple[str, str]] = {
    "graphics_util_pct": ("NVML_GPM_METRIC_GRAPHICS_UTIL", "%"),
    "sm_util_pct": ("NVML_GPM_METRIC_SM_UTIL", "%"),
    "sm_occupancy_pct": ("NVML_GPM_METRIC_SM_OCCUPANCY", "%"),
    "dram_bw_util_pct": ("NVML_GPM_METRIC_DRAM_BW_UTIL", "%"),
    "tensor_any_pct": ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", "%"),
    "tensor_hmma_pct": ("NVML_GPM_METRIC_HMMA_TENSOR_UTIL", "%"),  # FP16 / BF16 tensor cores
    "tensor_imma_pct": ("NVML_GPM_METRIC_IMMA_TENSOR_UTIL", "%"),  # INT8 tensor cores
    "tensor_dmma_pct": ("NVML_GPM_METRIC_DMMA_TENSOR_UTIL", "%"),  # FP64 tensor cores
    "fp16_pct": ("NVML_GPM_METRIC_FP16_UTIL", "%"),
    "fp32_pct": ("NVML_GPM_METRIC_FP32_UTIL", "%"),
    "fp64_pct": ("NVML_GPM_METRIC_FP64_UTIL", "%"),
    "pcie_tx_mib_s": ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", "MiB/s"),
    "pcie_rx_mib_s": ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", "MiB/s"),
    "nvlink_tx_mib_s": ("NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", "MiB/s"),
    "nvlink_rx_mib_s": ("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", "MiB/s"),
}
GPM_FIRST_READ = "GPM needs two samples: figures start with the next read"

class NvmlUnavailable(CollectorError):
    """NVML cannot be used on this host (no driver, no library, no permission)."""


@dataclass(slots=True)
class GpuReading:
    """One GPU at one instant, base units; `None` = the GPU/driver did not report it."""

    index: int
    name: str | None = None
    uuid: str | None = None
    util_ratio: float | None = None  # 0-1, fraction of the sample period a kernel ran
    mem_util_ratio: float | None = None  # 0-1, fraction of time memory was read/written
    mem_used_bytes: float | None = None
    mem_total_bytes: float | None = None
    mem_reserved_bytes: float | None = None  # driver reservation (NVML memory API v2 only)
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None  # monotonic since driver load
    temp_c: float | None = None
    sm_clock_hz: float | None = None
    sm_clock_max_hz: float | None = None
    mem_clock_hz: float | None = None
    clock_event_reasons: int | None = None
    ecc_corrected: float | None = None
    ecc_uncorrected: float | None = None
    pcie_tx_bytes_s: float | None = None
    pcie_rx_bytes_s: float | None = None
    fan_ratio: float | None = None
    pstate: float | None = None
    processes: list[tuple[int, float | None]] | None = None  # (pid, bytes); None = not read
    # GPM (Hopper+), base units: `*_pct` keys of GPM_METRICS become `*_ratio` (0-1), `*_mib_s`
    # become `*_bytes_s`; None = no GPM figures this read (unsupported GPU or first sample)
    gpm: dict[str, float] | None = None
    gpm_interval_s: float | None = None
    xids: list[int] | None = None  # critical XID errors reported since the last read
    errors: dict[str, str] = field(default_factory=dict)  # raw field -> NVML error text
    mig_id: int | None = None  # a MIG GPU instance (GPU_I_ID) of card `index`; None = the card
    mig_profile: str | None = None  # its profile, e.g. "3g.71gb" (dcgm-exporter's GPU_I_PROFILE)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _sub(value: Any, key: str) -> float | None:
    return _num(value.get(key)) if isinstance(value, dict) else None


def _scaled(value: Any, factor: float) -> float | None:
    n = _num(value)
    return None if n is None else n * factor


def gpm_base_units(metrics: Any) -> dict[str, float] | None:
    """GPM raw metrics (percent, MiB/s) -> 0-1 ratios and bytes/s, keys renamed to match. Pure."""
    if not isinstance(metrics, dict):
        return None
    out: dict[str, float] = {}
    for key, value in metrics.items():
        n = _num(value)
        if n is None or key not in GPM_METRICS:
            continue
        if key.endswith("_pct"):
            out[key[: -len("_pct")] + "_ratio"] = n * 0.01
        elif key.endswith("_mib_s"):
            out[key[: -len("_mib_s")] + "_bytes_s"] = n * 1048576.0
    return out


def raw_to_reading(index: int, raw: dict[str, Any]) -> GpuReading:
    """Convert one GPU's raw dict ({"fields": {...}, "errors": {...}}) to base units. Pure."""
    f = raw.get("fields") or {}
    util = f.get("utilization_pct")
    mem = f.get("memory_bytes")
    procs: list[tuple[int, float | None]] | None = (
        [] if isinstance(f.get("processes"), list) else None
    )
    for p in f.get("processes") or []:
        if procs is not None and isinstance(p, dict) and isinstance(p.get("pid"), int):
            procs.append((int(p["pid"]), _num(p.get("used_bytes"))))
    reasons = f.get("clock_event_reasons")
    name, uuid = f.get("name"), f.get("uuid")
    gpm_raw = f.get("gpm")
    gpm: dict[str, Any] = gpm_raw if isinstance(gpm_raw, dict) else {}
    xids = f.get("xid_events")
    return GpuReading(
        index=index,
        name=name if isinstance(name, str) else None,
        mig_id=raw["mig_id"] if isinstance(raw.get("mig_id"), int) else None,
        mig_profile=raw["mig_profile"] if isinstance(raw.get("mig_profile"), str) else None,
        uuid=uuid if isinstance(uuid, str) else None,
        util_ratio=_scaled(_sub(util, "gpu"), 0.01),
        mem_util_ratio=_scaled(_sub(util, "memory"), 0.01),
        mem_used_bytes=_sub(mem, "used"),
        mem_total_bytes=_sub(mem, "total"),
        mem_reserved_bytes=_sub(mem, "reserved"),
        power_w=_scaled(f.get("power_mw"), 1e-3),
        power_limit_w=_scaled(f.get("power_limit_mw"), 1e-3),
        energy_j=_scaled(f.get("energy_mj"), 1e-3),
        temp_c=_num(f.get("temperature_c")),
        sm_clock_hz=_scaled(f.get("sm_clock_mhz"), 1e6),
        sm_clock_max_hz=_scaled(f.get("sm_clock_max_mhz"), 1e6),
        mem_clock_hz=_scaled(f.get("mem_clock_mhz"), 1e6),
        clock_event_reasons=int(reasons) if isinstance(reasons, int) else None,
        ecc_corrected=_num(f.get("ecc_corrected_volatile")),
        ecc_uncorrected=_num(f.get("ecc_uncorrected_volatile")),
        # NVML reports PCIe throughput in KB/s (1 KB = 1024 B per nvml.h), over a 20 ms window
        pcie_tx_bytes_s=_scaled(f.get("pcie_tx_kb_s"), 1024.0),
        pcie_rx_bytes_s=_scaled(f.get("pcie_rx_kb_s"), 1024.0),
        fan_ratio=_scaled(f.get("fan_pct"), 0.01),
        pstate=_num(f.get("pstate")),
        processes=procs,
        gpm=gpm_base_units(gpm.get("metrics")),
        gpm_interval_s=_num(gpm.get("interval_s")),
        xids=[int(e["xid"]) for e in xids if isinstance(e, dict) and isinstance(e.get("xid"), int)]
        if isinstance(xids, list) else None,
        errors={str(k): str(v) for k, v in (raw.get("errors") or {}).items()},
    )


class Backend(Protocol):
    def read_raw(self) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


def read_gpus(backend: Backend) -> list[GpuReading]:
    """Every GPU the backend sees, converted; the one entry point collectors use.

    A raw dict may carry its GPU's `index` (a dcgm-exporter that sees GPUs 2 and 3 only);
    otherwise GPUs are numbered in the order the backend lists them, as NVML does.
    """
    out = []
    for i, raw in enumerate(backend.read_raw()):
        index = raw.get("index")
        out.append(raw_to_reading(index if isinstance(index, int) else i, raw))
    return out


def _err_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return (
        text
        if text.startswith("NVML") or "NVML" in type(exc).__name__
        else f"{type(exc).__name__}: {text}"
    )


class NvmlBackend:
    """Live reads through nvidia-ml-py (`pynvml`). Raises NvmlUnavailable when NVML won't start."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as exc:  # nvidia-ml-py not installed
            raise NvmlUnavailable(
                "NVML is unavailable (the nvidia-ml-py package is not installed): "
                "no GPU telemetry on this host."
            ) from exc
        self._nv: Any = pynvml
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, NoPermission...
            raise NvmlUnavailable(
                f"NVML is unavailable ({_err_text(exc)}): no GPU telemetry on this host; "
                "install the NVIDIA driver or run where it is loaded."
            ) from exc
        self._handles: list[Any] = []
        self._gpm_prev: dict[int, tuple[Any, float]] = {}  # GPU index -> (GPM sample, monotonic s)
        self._gpm_ok: dict[int, bool] = {}
        self._xid_set: Any = None
        self._xid_error: str | None = None
        try:
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self.close()
            raise NvmlUnavailable(
                f"NVML started but listing GPUs failed ({_err_text(exc)}): no GPU telemetry."
            ) from exc

    def meta(self) -> dict[str, Any]:
        nv = self._nv
        out: dict[str, Any] = {"gpu_count": len(self._handles)}
        for key, fn in (
            ("driver", "nvmlSystemGetDriverVersion"),
            ("nvml", "nvmlSystemGetNVMLVersion"),
            ("cuda_driver", "nvmlSystemGetCudaDriverVersion"),
        ):
            try:
                value = getattr(nv, fn)()
                out[key] = value.decode() if isinstance(value, bytes) else value
            except Exception as exc:
                out[key] = None
                out[f"{key}_error"] = _err_text(exc)
        try:
            from importlib.metadata import version

            out["pynvml"] = version("nvidia-ml-py")
        except Exception:
            out["pynvml"] = None
        return out

    def _readers(self, index: int, h: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
        nv = self._nv

        def util() -> dict[str, int]:
            u = nv.nvmlDeviceGetUtilizationRates(h)
            return {"gpu": int(u.gpu), "memory": int(u.memory)}

        def mem() -> dict[str, int]:
            # v2 splits driver-reserved memory out of "used", as nvidia-smi reports it; v1
            # (older drivers) counts the reservation as used
            try:
                m = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
                return {
                    "total": int(m.total),
                    "used": int(m.used),
                    "free": int(m.free),
                    "reserved": int(m.reserved),
                    "api": 2,
                }
            except Exception:
                m = nv.nvmlDeviceGetMemoryInfo(h)
                return {"total": int(m.total), "used": int(m.used), "free": int(m.free), "api": 1}

        def reasons() -> int:
            # renamed "clock event reasons" in newer drivers; the old name is kept as fallback
            fn = (
                getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or nv.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            return int(fn(h))

        def procs() -> list[dict[str, Any]]:
            seen: dict[int, dict[str, Any]] = {}
            for getter in (
                "nvmlDeviceGetComputeRunningProcesses",
                "nvmlDeviceGetGraphicsRunningProcesses",
            ):
                try:
                    plist = getattr(nv, getter)(h)
                except Exception:
                    if getter.endswith("ComputeRunningProcesses"):
                        raise
                    continue
                for p in plist:
                    used = getattr(p, "usedGpuMemory", None)
                    seen.setdefault(
                        int(p.pid), {"pid": int(p.pid), "used_bytes": int(used) if used else None}
                    )
            return list(seen.values())

        def text(fn: str) -> Callable[[], str]:
            def read() -> str:
                v = getattr(nv, fn)(h)
                return v.decode() if isinstance(v, bytes) else str(v)

            return read

        yield "name", text("nvmlDeviceGetName")
        yield "uuid", text("nvmlDeviceGetUUID")
        yield "utilization_pct", util
        yield "memory_bytes", mem
        yield "power_mw", lambda: int(nv.nvmlDeviceGetPowerUsage(h))
        yield "power_limit_mw", lambda: int(nv.nvmlDeviceGetEnforcedPowerLimit(h))
        yield "energy_mj", lambda: int(nv.nvmlDeviceGetTotalEnergyConsumption(h))
        yield "temperature_c", lambda: int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        yield "sm_clock_mhz", lambda: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        yield "sm_clock_max_mhz", lambda: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))
        yield "mem_clock_mhz", lambda: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))
        yield "clock_event_reasons", reasons
        yield (
            "ecc_corrected_volatile",
            lambda: int(
                nv.nvmlDeviceGetTotalEccErrors(
                    h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC
                )
            ),
        )
        yield (
            "ecc_uncorrected_volatile",
            lambda: int(
                nv.nvmlDeviceGetTotalEccErrors(
                    h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
                )
            ),
        )
        yield (
            "pcie_tx_kb_s",
            lambda: int(nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES)),
        )
        yield (
            "pcie_rx_kb_s",
            lambda: int(nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES)),
        )
        yield "fan_pct", lambda: int(nv.nvmlDeviceGetFanSpeed(h))
        yield "pstate", lambda: int(nv.nvmlDeviceGetPerformanceState(h))
        yield "processes", procs
        yield "gpm", lambda: self._read_gpm(index, h)

    def _read_gpm(self, index: int, h: Any) -> dict[str, Any]:
        """GPM figures over the interval since this GPU's previous GPM sample.

        Raises on a GPU without GPM ("Not Supported"), and on the first read (no interval yet),
        so the field carries an error instead of zeros.
        """
        nv = self._nv
        if index not in self._gpm_ok:
            self._gpm_ok[index] = bool(nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)
        if not self._gpm_ok[index]:
            raise RuntimeError("Not Supported (GPM needs a Hopper or newer GPU and driver)")
        sample = nv.nvmlGpmSampleAlloc()
        try:
            nv.nvmlGpmSampleGet(h, sample)
        except Exception:
            nv.nvmlGpmSampleFree(sample)
            raise
        now = time.monotonic()
        prev = self._gpm_prev.get(index)
        self._gpm_prev[index] = (sample, now)
        if prev is None:
            raise RuntimeError(GPM_FIRST_READ)
        try:
            req = nv.c_nvmlGpmMetricsGet_t()
            req.version = nv.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = len(GPM_METRICS)
            req.sample1, req.sample2 = prev[0], sample
            keys = list(GPM_METRICS)
            for i, key in enumerate(keys):
                req.metrics[i].metricId = getattr(nv, GPM_METRICS[key][0])
            nv.nvmlGpmMetricsGet(req)
        finally:
            nv.nvmlGpmSampleFree(prev[0])
        metrics: dict[str, float] = {}
        failed: dict[str, str] = {}
        for i, key in enumerate(keys):
            m = req.metrics[i]
            if int(m.nvmlReturn) == 0:
                metrics[key] = round(float(m.value), 4)
            else:
                failed[key] = _err_text(nv.NVMLError(int(m.nvmlReturn)))
        return {"interval_s": round(now - prev[1], 4), "metrics": metrics, "failed": failed}

    def _read_xids(self) -> dict[int, list[dict[str, int]]]:
        """Critical XID events waiting in the event set, per GPU index (registered on first use)."""
        nv = self._nv
        if self._xid_error is not None:  # registration failed once: it will not start working
            raise RuntimeError(self._xid_error)
        if self._xid_set is None:
            try:
                self._xid_set = nv.nvmlEventSetCreate()
                for h in self._handles:
                    nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self._xid_set)
            except Exception as exc:
                self._xid_error = _err_text(exc)
                raise
        out: dict[int, list[dict[str, int]]] = {}
        uuids = {self._uuid(h): i for i, h in enumerate(self._handles)}
        for _ in range(64):  # bounded: a storm of XIDs is reported 64 a read, the rest next read
            try:
                ev = nv.nvmlEventSetWait_v2(self._xid_set, 0)
            except Exception as exc:
                if "Timeout" in type(exc).__name__ or "Timeout" in str(exc):
                    break
                raise
            index = uuids.get(self._uuid(ev.device), 0)
            out.setdefault(index, []).append({"xid": int(ev.eventData)})
        return out

    def _uuid(self, h: Any) -> str:
        v = self._nv.nvmlDeviceGetUUID(h)
        return v.decode() if isinstance(v, bytes) else str(v)

    def read_raw(self) -> list[dict[str, Any]]:
        out = []
        xid_error: str | None = None
        try:
            xids = self._read_xids()
        except Exception as exc:  # not supported in this container, or no permission
            xids, xid_error = {}, _err_text(exc)
        for index, h in enumerate(self._handles):
            fields: dict[str, Any] = {}
            errors: dict[str, str] = {}
            if xid_error is None:
                fields["xid_events"] = xids.get(index, [])
            else:
                errors["xid_events"] = xid_error
            for key, read in self._readers(index, h):
                try:  # each field on its own: an unsupported one costs only itself
                    fields[key] = read()
                except Exception as exc:
                    errors[key] = _err_text(exc)
            out.append({"fields": fields, "errors": errors})
        return out

    def close(self) -> None:
        for sample, _ in self._gpm_prev.values():
            try:
                self._nv.nvmlGpmSampleFree(sample)
            except Exception:
                pass
        self._gpm_prev.clear()
        if self._xid_set is not None:
            try:
                self._nv.nvmlEventSetFree(self._xid_set)
            except Exception:
                pass
            self._xid_set = None
        try:
            self._nv.nvmlShutdown()
        except Exception:
            pass
