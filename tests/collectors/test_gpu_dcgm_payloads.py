"""Real dcgm-exporter payloads the GPU source must read (collectors/gpu_dcgm.py, collectors/gpu.py).

Golden payload: tests/fixtures/dcgm-exporter-4.1.1-4.0.4-h20-mig.prom, written in the form
dcgm-exporter 4.1.1-4.0.4 renders (internal/pkg/rendermetrics/render_metrics.go; the MIG labels
and the string values as posted in dcgm-exporter issues 394, 488 and 512): an H20 host whose
GPU 0 is in MIG mode (GI 1 = 3g.48gb, GI 3 = 2g.24gb: no whole-card series, the card's own fields
repeated on each instance) and whose GPU 1 is whole, plus two fields whose value is not a number
(DCGM_FI_DEV_CUDA_VISIBLE_DEVICES_STR per instance, DCGM_FI_DEV_COMPUTE_PIDS as
"ERROR - FAILED TO CONVERT TO STRING"). Figures used below (MiB, W, mJ, ratios):
- GPU 0: power 142.331 W, energy 8,472,901,234 mJ, temperature 38 °C, SM clock 1755 MHz;
  GI 1: used 40211 + free 7405 = 47616 MiB, graphics engine 0.812345; GI 3: used 20587 +
  free 3129 = 23716 MiB, idle.
- GPU 1: util 97 %, used 81234 + free 15969 + reserved 668 = 97871 MiB, power 391.874 W.
"""

from __future__ import annotations

import http.server
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_gpu_dcgm import _Exporter  # the loopback dcgm-exporter stand-in

from collectors.base import CollectorContext, ServerTarget
from collectors.gpu import reading_values
from collectors.gpu_dcgm import DcgmBackend, DcgmPromBackend, parse_exposition
from collectors.gpu_nvml import GpuReading, read_gpus
from collectors.registry import build_collectors
from simulator import dcgm as sim_dcgm
from simulator.costmodel import GPUS
from simulator.gpu_activity import Activity

GOLDEN = (Path(__file__).resolve().parents[1] / "fixtures" / "dcgm-exporter-4.1.1-4.0.4-h20-mig.prom").read_text()
MIB = 1048576
BAD_FIELDS = ("DCGM_FI_DEV_CUDA_VISIBLE_DEVICES_STR", "DCGM_FI_DEV_COMPUTE_PIDS")
#: the golden payload without its non-numeric series (the exporter after the CSV was fixed)
CLEAN = "".join(line for line in GOLDEN.splitlines(keepends=True) if not line.startswith(BAD_FIELDS))
#: dcgm-exporter 2.4.5-2.6.7's form (no pci_bus_id yet) with a counters CSV that has FB_USED only
USED_ONLY = """# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-3f0a9c1e-5d27-4b8e-9a14-7c62e0d8b5f3",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="a100-node-2"} 61440
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-3f0a9c1e-5d27-4b8e-9a14-7c62e0d8b5f3",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="a100-node-2"} 88
"""


@pytest.fixture()
def exporter() -> Iterator[tuple[str, type[_Exporter]]]:
    handler = type("Handler", (_Exporter,), {"body": GOLDEN})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/metrics", handler
    srv.shutdown()
    srv.server_close()


def test_golden_mig_payload_keeps_every_numeric_series_and_names_the_bad_ones() -> None:
    exp = parse_exposition(GOLDEN)
    assert sorted(exp.gpus, key=str) == [(0, 1), (0, 3), (1, None)]
    assert exp.gpus[(0, 1)]["labels"]["GPU_I_PROFILE"] == "3g.48gb"
    assert exp.gpus[(0, 1)]["values"]["DCGM_FI_DEV_FB_USED"] == 40211
    assert exp.gpus[(1, None)]["values"]["DCGM_FI_DEV_GPU_UTIL"] == 97
    assert exp.gpus[(1, None)]["values"]["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == 15530188417
    assert set(exp.bad) == set(BAD_FIELDS)
    assert exp.bad["DCGM_FI_DEV_CUDA_VISIBLE_DEVICES_STR"]["where"] == ["GPU 0 MIG 1", "GPU 0 MIG 3"]
    assert exp.bad["DCGM_FI_DEV_COMPUTE_PIDS"]["value"] == "ERROR - FAILED TO CONVERT TO STRING"


def test_mig_card_over_loopback_is_a_card_plus_one_entry_per_instance(exporter) -> None:
    """The runner's GPU collector (built as `gpu.dcgm_url` builds it) against the golden payload:
    every numeric series is written, the MIG card's own fields once under gpu.0.*, each instance
    under gpu.0.mig<GI>.*; the bad fields are ONE event naming the host, again only when a field
    turns bad anew after it read well."""
    url, handler = exporter
    [gpu], errors = build_collectors({}, names={"gpu"}, gpu={"dcgm_url": url})
    assert not errors
    servers = [ServerTarget(id=1, name="a", base_url="http://a", gpu_indices=[0]),
               ServerTarget(id=2, name="b", base_url="http://b", gpu_indices=[1])]
    state: dict[str, object] = {}
    ctx = CollectorContext(servers=servers, load_state=state.get, save_state=state.__setitem__,
                           now=lambda: 1.0)
    result = gpu.poll(ctx)
    a = {s.metric: s.value for s in result.samples if s.server_id == 1}
    b = {s.metric: s.value for s in result.samples if s.server_id == 2}
    assert a["gpu.0.power_w"] == pytest.approx(142.331) and a["gpu.0.temp_c"] == 38
    assert a["gpu.0.energy_j"] == pytest.approx(8472901.234) and a["gpu.0.sm_clock_hz"] == 1755e6
    assert a["gpu.0.mig1.mem_used_bytes"] == 40211 * MIB
    assert a["gpu.0.mig1.mem_total_bytes"] == 47616 * MIB
    assert a["gpu.0.mig1.gpm.graphics_util_ratio"] == pytest.approx(0.812345, abs=1e-4)
    assert a["gpu.0.mig3.mem_total_bytes"] == 23716 * MIB and a["gpu.0.mig3.gpm.dram_bw_util_ratio"] == 0
    # the card's fields once, not per instance; no whole-card memory or utilisation invented
    assert not any(k.startswith("gpu.0.mig") and k.endswith(("power_w", "energy_j", "temp_c")) for k in a)
    assert "gpu.0.util_ratio" not in a and "gpu.0.mem_used_bytes" not in a
    assert not any(k.startswith("gpu.1.") for k in a) and not any(k.startswith("gpu.0.") for k in b)
    assert b["gpu.1.util_ratio"] == pytest.approx(0.97) and b["gpu.1.mem_total_bytes"] == 97871 * MIB
    assert all(math.isfinite(s.value) for s in result.samples)
    [event] = result.events
    assert event.kind == "collector_error" and event.severity == "warning"
    assert url in event.message and "gpu-h20-03" in event.message
    assert all(f in event.message for f in BAD_FIELDS) and "GPU 0 MIG 1" in event.message
    info = state["gpu:info"]
    assert isinstance(info, dict)
    assert {"index": 0, "name": "NVIDIA H20", "uuid": "GPU-5b1e7c2a-93d4-4f0e-8a61-2c7d9e3f4b10",
            "mig_id": 3, "mig_profile": "2g.24gb"} in info["gpus"]

    assert gpu.poll(ctx).events == []  # the same episode: no repeat
    handler.body = CLEAN
    assert gpu.poll(ctx).events == []  # read well: the episode ends
    handler.body = GOLDEN
    [again] = gpu.poll(ctx).events  # turned bad anew: one event
    assert "DCGM_FI_DEV_COMPUTE_PIDS" in again.message


def test_a_card_entirely_in_mig_mode_is_not_dropped(exporter) -> None:
    url, handler = exporter
    handler.body = CLEAN
    readings = read_gpus(DcgmBackend(url))
    assert [(r.index, r.mig_id, r.mig_profile) for r in readings] == [
        (0, None, None), (0, 1, "3g.48gb"), (0, 3, "2g.24gb"), (1, None, None)]
    card = readings[0]
    assert card.power_w == pytest.approx(142.331) and card.xids == [] and card.mem_used_bytes is None
    assert "MIG mode" in card.errors["utilization_pct"] and "gpu.0.mig<GPU_I_ID>" in card.errors["memory_bytes"]
    assert readings[1].power_w is None and readings[1].xids is None


class _Prometheus(http.server.BaseHTTPRequestHandler):
    """Answers /api/v1/query with one matrix, in Prometheus's documented JSON shape."""

    result: list[dict[str, object]] = []

    def do_GET(self) -> None:  # noqa: N802
        data = json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                          "result": type(self).result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_through_prometheus_a_mig_card_and_a_nan_read_as_the_exporter_does() -> None:
    """The Prometheus path (`gpu.prometheus_selector`) shares the conversion: the golden payload's
    numeric series, as Prometheus stores them (plus its `instance`/`job` labels), give the same
    GPU entries; a NaN sample (Prometheus keeps NaN) is set aside and named once."""
    result = []
    for (card, _), entry in parse_exposition(CLEAN).gpus.items():
        for name, value in entry["values"].items():
            labels = {"__name__": name, **entry["labels"], "instance": "gpu-h20-03:9400", "job": "dcgm"}
            shown = "NaN" if (name, card) == ("DCGM_FI_DEV_POWER_USAGE", 1) else repr(value)
            result.append({"metric": labels, "values": [[1000.0, shown]]})
    handler = type("Handler", (_Prometheus,), {"result": result})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        backend = DcgmPromBackend(f"http://127.0.0.1:{srv.server_address[1]}", 'Hostname="gpu-h20-03"')
        readings = read_gpus(backend)
    finally:
        srv.shutdown()
        srv.server_close()
    assert [(r.index, r.mig_id) for r in readings] == [(0, None), (0, 1), (0, 3), (1, None)]
    assert readings[1].mem_used_bytes == 40211 * MIB and readings[0].power_w == pytest.approx(142.331)
    assert readings[3].power_w is None and "power_w" not in reading_values(readings[3])
    [problem] = backend.problems()
    assert "DCGM_FI_DEV_POWER_USAGE on GPU 1" in problem and "gpu-h20-03" in problem


def test_memory_used_alone_is_read_and_total_is_missing_not_zero(exporter) -> None:
    url, handler = exporter
    handler.body = USED_ONLY
    [r] = read_gpus(DcgmBackend(url))
    assert r.mem_used_bytes == 61440 * MIB and r.mem_total_bytes is None
    assert "DCGM_FI_DEV_FB_FREE" in r.errors["memory_bytes"]
    values = reading_values(r)
    assert values["mem_used_bytes"] == 61440 * MIB and "mem_total_bytes" not in values


def test_fb_total_when_exported_is_the_total() -> None:
    text = USED_ONLY.replace("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_TOTAL").replace("61440", "81920") + USED_ONLY
    backend = DcgmBackend("http://unused")
    [raw] = backend._raws(parse_exposition(text))
    assert raw["fields"]["memory_bytes"]["total"] == 81920 * MIB and "memory_bytes" not in raw["errors"]


def test_nan_and_inf_values_never_become_samples(exporter) -> None:
    """dcgm-exporter prints a double with Go's %f, so a NaN or ±Inf field reads `NaN`, `+Inf`."""
    url, handler = exporter
    handler.body = CLEAN.replace("391.874000", "NaN").replace("} 0.713552", "} +Inf")
    backend = DcgmBackend(url)
    readings = read_gpus(backend)
    gpu1 = next(r for r in readings if r.index == 1)
    values = reading_values(gpu1)
    assert "power_w" not in values and "gpm.dram_bw_util_ratio" not in values
    assert values["util_ratio"] == pytest.approx(0.97)  # the rest of the card is read
    [problem] = backend.problems()
    assert "DCGM_FI_DEV_POWER_USAGE on GPU 1 ('nan')" in problem and "DCGM_FI_PROF_DRAM_ACTIVE" in problem
    # and whatever source fed a reading (NVML too), a non-finite figure is no sample
    assert reading_values(GpuReading(index=0, power_w=math.nan, temp_c=math.inf, util_ratio=0.5)) == {"util_ratio": 0.5}


def test_simulator_serves_a_mig_card_as_the_real_exporter_writes_it() -> None:
    """SGLANG_SIM_DCGM_MIG: the look-alike's text parses as the golden one does: no whole-card
    series, the card's fields repeated per instance, GPU_UTIL absent, memory per instance."""
    now = [0.0]
    group = sim_dcgm.GpuGroup(Activity(GPUS["h200"], 700.0, lambda: now[0]), 1, lambda: 50e9)
    text = sim_dcgm.render([group], "h200", "NVIDIA H200", 0, 7, "sim-host",
                           sim_dcgm.mig_profiles({"SGLANG_SIM_DCGM_MIG": "3g.71gb,2g.35gb"}))
    exp = parse_exposition(text)
    assert sorted(exp.gpus, key=str) == [(0, 1), (0, 2)] and not exp.bad
    one, two = exp.gpus[(0, 1)], exp.gpus[(0, 2)]
    assert list(one["labels"])[5:8] == ["GPU_I_PROFILE", "GPU_I_ID", "Hostname"]
    assert one["values"]["DCGM_FI_DEV_GPU_TEMP"] == two["values"]["DCGM_FI_DEV_GPU_TEMP"]
    assert "DCGM_FI_DEV_GPU_UTIL" not in one["values"]
    assert one["values"]["DCGM_FI_DEV_FB_USED"] == round(50e9 / MIB) and two["values"]["DCGM_FI_DEV_FB_USED"] == 0
    assert two["values"]["DCGM_FI_DEV_FB_FREE"] == 35 * 1024
    with pytest.raises(ValueError, match="SGLANG_SIM_DCGM_MIG='3g'"):
        sim_dcgm.mig_profiles({"SGLANG_SIM_DCGM_MIG": "3g"})
