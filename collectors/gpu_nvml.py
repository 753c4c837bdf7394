"""The NVML access layer: raw reads, their conversion to `GpuReading`, a recorder and a replay.

Everything Pitwall knows about GPUs passes through here (STYLE.md: nvitop's clean NVML layer that
the UI never bypasses). The layer has two halves:

- **Raw reads** (`NvmlBackend.read_raw`): one plain-JSON dict per GPU holding what each NVML call
  returned, in NVML's own units (mW, mJ, MHz, KB/s, percent), or the error it raised. Each field
  is read in its own `try`, so a field the GPU does not support (NVML_ERROR_NOT_SUPPORTED) costs
  that field only.
- **Conversion** (`raw_to_reading`, pure): raw dict -> `GpuReading` in base units (bytes, W, J,
  Hz, 0-1 ratios, bytes/s). Unsupported or failed fields are `None` and their error is kept in
  `GpuReading.errors`.

`ReplayBackend` feeds recorded raw frames back, so tests run a real H200's readings through the
same conversion the live collector uses. `record()` / `python -m collectors.gpu_nvml record`
writes such a recording:

    {"format": "pitwall-nvml-recording/1", "meta": {driver, nvml, cuda_driver, gpu_count,
     pynvml}, "frames": [{"t": <s since start>, "read_s": <wall s of the read>, "cpu_s": <CPU s>,
     "gpus": [<raw dict>, ...]}, ...]}

Cross-check a live reading with `nvidia-smi --query-gpu=index,name,uuid,utilization.gpu,
utilization.memory,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,
clocks.mem,clocks_event_reasons.active --format=csv`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

RECORDING_FORMAT = "pitwall-nvml-recording/1"

#: Raw field keys read per GPU, in NVML's units (the suffix names the unit).
RAW_FIELDS: tuple[str, ...] = (
    "name",
    "uuid",
    "utilization_pct",  # {"gpu": %, "memory": %} over the driver's last sample period
    "memory_bytes",  # {"total", "used", "free"}
    "power_mw",
    "power_limit_mw",  # enforced limit
    "energy_mj",  # total energy since the driver loaded (monotonic counter)
    "temperature_c",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "clock_event_reasons",  # bitmask, nvmlClocksEventReason*
    "ecc_corrected_volatile",
    "ecc_uncorrected_volatile",
    "pcie_tx_kb_s",
    "pcie_rx_kb_s",
    "fan_pct",
    "pstate",
    "processes",  # [{"pid", "used_bytes" | None}] compute + graphics
)

#: Clock-event (throttle) reason bits (nvml.h `nvmlClocksEventReason*`), grouped for display.
REASON_GPU_IDLE = 0x1
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8
REASON_SW_THERMAL = 0x20
REASON_HW_THERMAL = 0x40
REASON_HW_POWER_BRAKE = 0x80
POWER_REASONS = REASON_SW_POWER_CAP | REASON_HW_POWER_BRAKE
THERMAL_REASONS = REASON_SW_THERMAL | REASON_HW_THERMAL | REASON_HW_SLOWDOWN


class NvmlUnavailable(Exception):
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
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None  # monotonic since driver load
    temp_c: float | None = None
    sm_clock_hz: float | None = None
    mem_clock_hz: float | None = None
    clock_event_reasons: int | None = None
    ecc_corrected: float | None = None
    ecc_uncorrected: float | None = None
    pcie_tx_bytes_s: float | None = None
    pcie_rx_bytes_s: float | None = None
    fan_ratio: float | None = None
    pstate: float | None = None
    processes: list[tuple[int, float | None]] = field(default_factory=list)  # (pid, bytes)
    errors: dict[str, str] = field(default_factory=dict)  # raw field -> NVML error text


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _sub(value: Any, key: str) -> float | None:
    return _num(value.get(key)) if isinstance(value, dict) else None


def _scaled(value: Any, factor: float) -> float | None:
    n = _num(value)
    return None if n is None else n * factor


def raw_to_reading(index: int, raw: dict[str, Any]) -> GpuReading:
    """Convert one GPU's raw dict ({"fields": {...}, "errors": {...}}) to base units. Pure."""
    f = raw.get("fields") or {}
    util = f.get("utilization_pct")
    mem = f.get("memory_bytes")
    procs: list[tuple[int, float | None]] = []
    for p in f.get("processes") or []:
        if isinstance(p, dict) and isinstance(p.get("pid"), int):
            procs.append((int(p["pid"]), _num(p.get("used_bytes"))))
    reasons = f.get("clock_event_reasons")
    name, uuid = f.get("name"), f.get("uuid")
    return GpuReading(
        index=index,
        name=name if isinstance(name, str) else None,
        uuid=uuid if isinstance(uuid, str) else None,
        util_ratio=_scaled(_sub(util, "gpu"), 0.01),
        mem_util_ratio=_scaled(_sub(util, "memory"), 0.01),
        mem_used_bytes=_sub(mem, "used"),
        mem_total_bytes=_sub(mem, "total"),
        power_w=_scaled(f.get("power_mw"), 1e-3),
        power_limit_w=_scaled(f.get("power_limit_mw"), 1e-3),
        energy_j=_scaled(f.get("energy_mj"), 1e-3),
        temp_c=_num(f.get("temperature_c")),
        sm_clock_hz=_scaled(f.get("sm_clock_mhz"), 1e6),
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
        errors={str(k): str(v) for k, v in (raw.get("errors") or {}).items()},
    )


class Backend(Protocol):
    def read_raw(self) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


def read_gpus(backend: Backend) -> list[GpuReading]:
    """Every GPU the backend sees, converted; the one entry point collectors use."""
    return [raw_to_reading(i, raw) for i, raw in enumerate(backend.read_raw())]


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

    def _readers(self, h: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
        nv = self._nv

        def util() -> dict[str, int]:
            u = nv.nvmlDeviceGetUtilizationRates(h)
            return {"gpu": int(u.gpu), "memory": int(u.memory)}

        def mem() -> dict[str, int]:
            m = nv.nvmlDeviceGetMemoryInfo(h)
            return {"total": int(m.total), "used": int(m.used), "free": int(m.free)}

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

    def read_raw(self) -> list[dict[str, Any]]:
        out = []
        for h in self._handles:
            fields: dict[str, Any] = {}
            errors: dict[str, str] = {}
            for key, read in self._readers(h):
                try:  # each field on its own: an unsupported one costs only itself
                    fields[key] = read()
                except Exception as exc:
                    errors[key] = _err_text(exc)
            out.append({"fields": fields, "errors": errors})
        return out

    def close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except Exception:
            pass


class ReplayBackend:
    """Feeds recorded raw frames back, one per `read_raw()` call; the last one repeats."""

    def __init__(self, frames: Sequence[list[dict[str, Any]]]) -> None:
        if not frames:
            raise ValueError(
                "A replay needs at least one recorded frame; record one with `record`."
            )
        self._frames = list(frames)
        self._next = 0

    @classmethod
    def from_recording(cls, recording: dict[str, Any]) -> ReplayBackend:
        if recording.get("format") != RECORDING_FORMAT:
            raise ValueError(f"Not a Pitwall NVML recording (format != {RECORDING_FORMAT!r}).")
        return cls([frame["gpus"] for frame in recording["frames"]])

    def read_raw(self) -> list[dict[str, Any]]:
        frame = self._frames[min(self._next, len(self._frames) - 1)]
        self._next += 1
        return frame

    def close(self) -> None:
        pass


def load_recording(path: str | Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def record(
    backend: NvmlBackend,
    *,
    seconds: float,
    interval_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Read every GPU each `interval_s` for `seconds`; returns the recording dict (see module doc)."""
    frames: list[dict[str, Any]] = []
    start = clock()
    while True:
        t0, c0 = clock(), time.process_time()
        gpus = backend.read_raw()
        read_s, cpu_s = clock() - t0, time.process_time() - c0
        frames.append(
            {
                "t": round(t0 - start, 3),
                "read_s": round(read_s, 6),
                "cpu_s": round(cpu_s, 6),
                "gpus": gpus,
            }
        )
        if t0 - start >= seconds:
            break
        sleep(max(0.0, interval_s - (clock() - t0)))
    return {"format": RECORDING_FORMAT, "meta": backend.meta(), "frames": frames}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.gpu_nvml", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="record raw NVML reads to JSON")
    rec.add_argument("--seconds", type=float, default=60.0)
    rec.add_argument("--interval", type=float, default=1.0)
    rec.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        backend = NvmlBackend()
    except NvmlUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        data = record(backend, seconds=args.seconds, interval_s=args.interval)
    finally:
        backend.close()
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(
        f"wrote {len(data['frames'])} frames of {data['meta'].get('gpu_count')} GPU(s) to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
