"""GPM (GPU Performance Monitoring) and XID reads of collectors/gpu_nvml.py, replayed from an H200.

tests/fixtures/nvml-h200-{idle,copy,matmul-gpm}.json were recorded on an NVIDIA H200 (driver
580.159.04) with `python3 scripts/gpu_walls.py --out DIR --seconds 12`: 12 s idle, 12 s of a
4 GiB device-to-device copy loop, 12 s of a bf16 8192^3 matmul loop, each a fresh NVML session.
The script printed: idle 0 % utilization; copy 100 % utilization with 89 % DRAM bandwidth and 0 %
tensor activity; matmul 99 % utilization with 17 % DRAM bandwidth and 93 % tensor activity.
`utilization.gpu` cannot tell the two walls apart; GPM can.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext, ServerTarget
from collectors.gpu import GpuCollector, readings_to_samples
from collectors.gpu_nvml import GPM_FIRST_READ, GPM_METRICS, NvmlBackend, read_gpus
from collectors.gpu_record import ReplayBackend, load_recording

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _replay(name: str) -> list[dict[str, float]]:
    """Per frame, the `gpu.0.*` samples the collector stores for one server claiming the GPU."""
    rec = load_recording(FIXTURES / name)
    backend = ReplayBackend.from_recording(rec)
    collector = GpuCollector(backend_factory=lambda: backend)
    server = ServerTarget(id=1, name="h200", base_url="http://127.0.0.1:1")
    ctx = CollectorContext(servers=[server], load_state=lambda k: None, save_state=lambda k, v: None,
                           now=lambda: 1.0)
    return [{s.metric: s.value for s in collector.poll(ctx).samples} for _ in rec["frames"]]


def _steady(frames: list[dict[str, float]]) -> list[dict[str, float]]:
    return [f for f in frames[2:] if "gpu.0.gpm.dram_bw_util_ratio" in f]


def test_copy_loop_reads_as_bandwidth_and_matmul_as_tensor_work():
    copy, matmul = _steady(_replay("nvml-h200-copy.json")), _steady(_replay("nvml-h200-matmul-gpm.json"))
    assert len(copy) >= 8 and len(matmul) >= 8
    # utilization.gpu says the same for both ...
    assert all(f["gpu.0.util_ratio"] >= 0.95 for f in copy + matmul)
    # ... GPM does not
    assert all(f["gpu.0.gpm.dram_bw_util_ratio"] > 0.8 and f["gpu.0.gpm.tensor_any_ratio"] < 0.05 for f in copy)
    assert all(f["gpu.0.gpm.tensor_any_ratio"] > 0.8 and f["gpu.0.gpm.dram_bw_util_ratio"] < 0.3 for f in matmul)
    # bf16 products run on the HMMA (FP16/BF16) tensor pipe, not the INT8 or FP64 ones
    assert all(f["gpu.0.gpm.tensor_hmma_ratio"] > 0.8 and f["gpu.0.gpm.tensor_imma_ratio"] == 0.0 for f in matmul)


def test_idle_gpu_has_gpm_figures_near_zero_not_missing():
    idle = _steady(_replay("nvml-h200-idle.json"))
    assert idle and all(f["gpu.0.gpm.sm_util_ratio"] < 0.05 and f["gpu.0.gpm.dram_bw_util_ratio"] < 0.05
                        for f in idle)


def test_first_read_has_no_gpm_interval_and_says_why():
    rec = load_recording(FIXTURES / "nvml-h200-copy.json")
    first = read_gpus(ReplayBackend([rec["frames"][0]["gpus"]]))[0]
    second = read_gpus(ReplayBackend([rec["frames"][1]["gpus"]]))[0]
    assert first.gpm is None and GPM_FIRST_READ in first.errors["gpm"]
    assert second.gpm and second.gpm_interval_s and 0.5 < second.gpm_interval_s < 2.0
    samples = readings_to_samples([first], [], ts=1.0)
    assert not any(".gpm." in s.metric for s in samples)


def test_gpu_without_gpm_shows_nothing_rather_than_zero():
    # the earlier H200 recording predates GPM reads, like a driver or GPU without GPM
    old = _replay("nvml-h200-matmul.json")
    assert old and not any(".gpm." in k for f in old for k in f)
    raw = {"fields": {"name": "NVIDIA A10"}, "errors": {"gpm": "Not Supported (GPM needs a Hopper or newer GPU and driver)"}}
    [reading] = read_gpus(ReplayBackend([[raw]]))
    assert reading.gpm is None and "Not Supported" in reading.errors["gpm"]


def test_units_gpm_percent_to_ratio_and_mib_to_bytes():
    raw = {"fields": {"gpm": {"interval_s": 2.0, "metrics": {"dram_bw_util_pct": 50.0, "nvlink_rx_mib_s": 2.0,
                                                             "not_a_metric": 7.0}, "failed": {}}}}
    [r] = read_gpus(ReplayBackend([[raw]]))
    assert r.gpm == {"dram_bw_util_ratio": 0.5, "nvlink_rx_bytes_s": 2 * 1048576.0}
    assert r.gpm_interval_s == 2.0


def test_critical_xid_becomes_one_event_per_claiming_server():
    raw = {"fields": {"name": "NVIDIA H200", "xid_events": [{"xid": 79}]}, "errors": {}}
    backend = ReplayBackend([[raw], [{"fields": {"name": "NVIDIA H200", "xid_events": []}, "errors": {}}]])
    collector = GpuCollector(backend_factory=lambda: backend)
    servers = [ServerTarget(id=1, name="a", base_url="http://x", gpu_indices=[0]),
               ServerTarget(id=2, name="b", base_url="http://y", gpu_indices=[1])]
    ctx = CollectorContext(servers=servers, load_state=lambda k: None, save_state=lambda k, v: None,
                           now=lambda: 5.0)
    first, second = collector.poll(ctx), collector.poll(ctx)
    [ev] = first.events
    assert ev.kind == "gpu_xid" and ev.severity == "critical" and ev.server_id == 1 and "XID 79" in ev.message
    assert second.events == []


class _FakeNvml(types.SimpleNamespace):
    """The pynvml calls the GPM read makes, with NVML's struct layout, for a GPU with GPM."""


def _fake_nvml(supported: bool) -> Any:
    freed: list[int] = []
    counter = iter(range(1, 1000))

    class Metric:
        def __init__(self) -> None:
            self.metricId, self.nvmlReturn, self.value = 0, 0, 0.0

    class Req:
        def __init__(self) -> None:
            self.metrics = [Metric() for _ in range(len(GPM_METRICS))]

    def metrics_get(req: Any) -> Any:
        for m in req.metrics:  # value = metric id, so the test can check the mapping
            m.value = float(m.metricId)
            m.nvmlReturn = 3 if m.metricId == 61 else 0  # one metric not supported (NVLink TX)
        return req

    nv = _FakeNvml(
        nvmlGpmQueryDeviceSupport=lambda h: types.SimpleNamespace(isSupportedDevice=int(supported)),
        nvmlGpmSampleAlloc=lambda: next(counter),
        nvmlGpmSampleGet=lambda h, s: s,
        nvmlGpmSampleFree=freed.append,
        c_nvmlGpmMetricsGet_t=Req,
        NVML_GPM_METRICS_GET_VERSION=1,
        nvmlGpmMetricsGet=metrics_get,
        NVMLError=lambda code: RuntimeError(f"NVML error {code}"),
        freed=freed,
    )
    import pynvml

    for const, _unit in GPM_METRICS.values():
        setattr(nv, const, getattr(pynvml, const))
    return nv


@pytest.mark.parametrize("supported", [True, False])
def test_backend_gpm_read_pairs_samples_and_frees_them(supported):
    backend = NvmlBackend.__new__(NvmlBackend)  # no driver here: drive the GPM read alone
    backend._nv = _fake_nvml(supported)
    backend._gpm_prev, backend._gpm_ok, backend._handles = {}, {}, ["h"]
    if not supported:
        with pytest.raises(RuntimeError, match="Not Supported"):
            backend._read_gpm(0, "h")
        return
    with pytest.raises(RuntimeError, match="two samples"):
        backend._read_gpm(0, "h")
    out = backend._read_gpm(0, "h")
    assert out["metrics"]["dram_bw_util_pct"] == 10.0 and out["metrics"]["sm_util_pct"] == 2.0
    assert "nvlink_tx_mib_s" not in out["metrics"] and "nvlink_tx_mib_s" in out["failed"]
    assert backend._nv.freed == [1]  # the older sample is freed once paired; the newer is kept
    backend._read_gpm(0, "h")
    assert backend._nv.freed == [1, 2]
