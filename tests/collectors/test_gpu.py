"""Tests of collectors/gpu.py and collectors/gpu_nvml.py.

tests/fixtures/nvml-h200-matmul.json was recorded on an NVIDIA H200 (driver 580.159.04) with
`python -m collectors.gpu_record record --seconds 70 --interval 1`: ~8 s idle, ~50 s of a bf16
8192^3 matmul loop in a PyTorch process, then idle again. It replays through the same
`read_gpus` -> `readings_to_samples` path the live collector uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext, ServerTarget
from collectors.gpu import GpuCollector, pid_owner_map, readings_to_samples
from collectors.gpu_nvml import NvmlBackend, NvmlUnavailable, read_gpus
from collectors.gpu_record import ReplayBackend, load_recording, record

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "nvml-h200-matmul.json"


@pytest.fixture(scope="module")
def recording() -> dict[str, Any]:
    return load_recording(H200)


def _ctx(servers: list[ServerTarget]) -> CollectorContext:
    return CollectorContext(servers=servers, load_state=lambda k: None, save_state=lambda k, v: None, now=lambda: 50.0)


def test_h200_recording_replays_through_the_collector(recording):
    frames = recording["frames"]
    backend = ReplayBackend.from_recording(recording)
    collector = GpuCollector(backend_factory=lambda: backend)
    server = ServerTarget(id=1, name="h200", base_url="http://127.0.0.1:1")
    per_frame = [{s.metric: s.value for s in collector.poll(_ctx([server])).samples} for _ in frames]
    assert recording["meta"]["gpu_count"] == 1
    first = read_gpus(ReplayBackend([frames[0]["gpus"]]))[0]
    assert first.name == "NVIDIA H200" and first.uuid and first.uuid.startswith("GPU-")
    # the H200 SXM has no fan: unsupported -> None and no sample, never 0
    assert "fan_pct" in first.errors and first.fan_ratio is None
    assert not any("fan_ratio" in k for v in per_frame for k in v)
    loaded = [v for v in per_frame if v["gpu.0.util_ratio"] >= 0.9]
    idle = [v for v in per_frame if v["gpu.0.util_ratio"] == 0.0]
    assert len(loaded) >= 40 and len(idle) >= 5
    for v in loaded[2:-2]:  # steady state (edges ramp); a bf16 matmul loop pins the 700 W cap: SwPowerCap (0x4) is the reason
        assert v["gpu.0.power_w"] > 0.9 * v["gpu.0.power_limit_w"]
        assert v["gpu.0.throttle_power"] == 1.0 and v["gpu.0.throttle_thermal"] == 0.0
        assert v["gpu.0.procs"] == 1.0
    assert all(int(v["gpu.0.clock_event_reasons"]) & 0x1 for v in idle[:3])  # GpuIdle
    assert all(v["gpu.0.mem_total_bytes"] > 140e9 for v in per_frame)  # 141 GB of HBM3e


def test_h200_memory_uses_the_v2_split_like_nvidia_smi(recording):
    # during the recording nvidia-smi said memory.used 1139 MiB, memory.reserved 616 MiB (NVML: 615.06) and the
    # matmul process held 1130 MiB: NVML v2 "used" excludes the driver reservation, as smi does
    frame = recording["frames"][35]
    (r,) = read_gpus(ReplayBackend([frame["gpus"]]))
    assert frame["gpus"][0]["fields"]["memory_bytes"]["api"] == 2
    assert r.mem_used_bytes is not None and r.mem_reserved_bytes is not None
    assert round(r.mem_used_bytes / 2**20) == 1139 and round(r.mem_reserved_bytes / 2**20) == 615
    assert r.processes and round(r.processes[0][1] / 2**20) == 1130


def test_h200_energy_counter_agrees_with_power_draw(recording):
    # Δenergy / Δt over the loaded stretch must match the mean of the instantaneous power readings
    readings = [(f["t"], read_gpus(ReplayBackend([f["gpus"]]))[0]) for f in recording["frames"]]
    loaded = [(t, r) for t, r in readings if r.util_ratio is not None and r.util_ratio >= 0.9]
    (t0, a), (t1, b) = loaded[1], loaded[-2]
    assert a.energy_j is not None and b.energy_j is not None
    mean_from_energy = (b.energy_j - a.energy_j) / (t1 - t0)
    powers = [r.power_w for t, r in loaded[1:-1] if r.power_w is not None]
    assert mean_from_energy == pytest.approx(sum(powers) / len(powers), rel=0.03)


def test_process_memory_is_attributed_to_the_owning_server(recording):
    frame = next(f for f in recording["frames"] if f["gpus"][0]["fields"].get("processes"))
    proc = frame["gpus"][0]["fields"]["processes"][0]
    readings = read_gpus(ReplayBackend([frame["gpus"]]))
    owner = ServerTarget(id=4, name="mine", base_url="", gpu_indices=[1], pids=[proc["pid"]], launch_id=8)
    other = ServerTarget(id=5, name="other", base_url="", gpu_indices=[0])
    rows = readings_to_samples(readings, [owner, other], 1.0, pid_owner_map([owner], children=lambda pid: []))
    mine = [r for r in rows if r.server_id == 4]
    # server 4 claims GPU 1 only, but its process holds memory on GPU 0: that one row is its
    assert [(r.metric, r.value, r.launch_id) for r in mine] == [("gpu.0.server_mem_bytes", proc["used_bytes"], 8)]
    assert {r.server_id for r in rows if r.metric == "gpu.0.power_w"} == {5}


def test_children_of_a_managed_pid_count_as_the_server():
    owner = ServerTarget(id=2, name="s", base_url="", pids=[100])
    assert pid_owner_map([owner], children=lambda pid: [101, 102]) == {100: 2, 101: 2, 102: 2}


def test_without_servers_samples_go_to_the_host():
    raw = {"fields": {"power_mw": 80000, "memory_bytes": {"total": 10, "used": 4, "free": 6}}, "errors": {}}
    rows = readings_to_samples(read_gpus(ReplayBackend([[raw]])), [], 1.0)
    assert {(r.server_id, r.metric, r.value) for r in rows} == {
        (0, "gpu.0.power_w", 80.0), (0, "gpu.0.mem_total_bytes", 10.0), (0, "gpu.0.mem_used_bytes", 4.0),
    }  # fmt: skip


def test_units_are_converted_to_base_units():
    raw = {
        "fields": {
            "utilization_pct": {"gpu": 97, "memory": 40},
            "energy_mj": 2_500_000,
            "sm_clock_mhz": 1980,
            "pcie_tx_kb_s": 1000,
            "processes": [{"pid": 1, "used_bytes": None}],
        },
        "errors": {"temperature_c": "Not Supported"},
    }
    (r,) = read_gpus(ReplayBackend([[raw]]))
    assert (r.util_ratio, r.mem_util_ratio) == (0.97, 0.40)
    assert r.energy_j == 2500.0 and r.sm_clock_hz == 1.98e9 and r.pcie_tx_bytes_s == 1_024_000.0
    assert r.temp_c is None and r.errors == {"temperature_c": "Not Supported"}
    values = {s.metric for s in readings_to_samples([r], [], 0.0)}
    assert "gpu.0.procs" in values and "gpu.0.procs_mem_bytes" not in values  # unknown usage


def test_no_driver_reports_once_then_idles():
    def broken() -> NvmlBackend:
        raise NvmlUnavailable("NVML is unavailable (NVML Shared Library Not Found): no GPU telemetry on this host.")

    collector = GpuCollector(backend_factory=broken)
    first = collector.poll(_ctx([]))
    assert [e.kind for e in first.events] == ["collector_error"]
    assert "no GPU telemetry on this host" in first.events[0].message
    assert collector.poll(_ctx([])).events == [] and collector.unavailable_reason


def test_live_nvml_on_this_host_or_a_clear_error():
    try:
        backend = NvmlBackend()
    except NvmlUnavailable as exc:
        assert "no GPU telemetry on this host" in str(exc)
        return
    try:
        assert len(backend.read_raw()) == backend.meta()["gpu_count"]
    finally:
        backend.close()


def test_recorder_round_trip(tmp_path, recording):
    class Fake(ReplayBackend):
        def meta(self) -> dict[str, Any]:
            return {"gpu_count": 1, "driver": "test"}

    frames = [f["gpus"] for f in recording["frames"][:5]]
    ticks = iter([float(i) * 0.5 for i in range(100)])
    data = record(Fake(frames), seconds=2.0, interval_s=1.0, clock=lambda: next(ticks), sleep=lambda s: None)  # type: ignore[arg-type]
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(data))
    again = ReplayBackend.from_recording(load_recording(path))
    assert [read_gpus(again) for _ in data["frames"]] == [read_gpus(ReplayBackend([f])) for f in frames[: len(data["frames"])]]
    assert data["frames"][-1]["t"] >= 2.0
    with pytest.raises(ValueError, match="Not a Pitwall NVML recording"):
        ReplayBackend.from_recording({"format": "other"})


def test_gpu_model_and_driver_are_kept_for_provenance():
    """The H200 recording's model and driver land in state `gpu:info` (read by scorecards)."""
    import json
    from pathlib import Path

    from collectors.base import CollectorContext, ServerTarget
    from collectors.gpu import GpuCollector
    from collectors.gpu_record import ReplayBackend

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "nvml-h200-matmul.json"
    saved: dict = {}
    ctx = CollectorContext(
        servers=[ServerTarget(id=1, name="a", base_url="http://127.0.0.1:1", gpu_indices=[0])],
        load_state=lambda k: saved.get(k),
        save_state=lambda k, v: saved.__setitem__(k, v),
    )
    col = GpuCollector(backend_factory=lambda: ReplayBackend.from_recording(json.loads(fixture.read_text())))
    col.poll(ctx)
    info = saved["gpu:info"]
    assert info["gpus"][0]["name"] == "NVIDIA H200"
    assert info["driver"] == json.loads(fixture.read_text())["meta"]["driver"]
