"""The dcgm-exporter GPU source (collectors/gpu_dcgm.py) against its real text format, served over
loopback HTTP, and its agreement with NVML for the same readings.

The payload is written in the format of dcgm-exporter's renderer (internal/pkg/rendermetrics/
render_metrics.go: `FIELD{gpu="0",UUID="…",pci_bus_id="…",device="nvidia0",modelName="…",
Hostname="…",DCGM_FI_DRIVER_VERSION="…"} value`) with the HELP/TYPE lines of its counters CSV;
its values are those of one frame of the H200 copy-loop recording (tests/fixtures/
nvml-h200-copy.json), so the two sources can be compared figure by figure.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prom_rig import PromRig, needs_prometheus
from pwtest import wait_for

from collectors.base import CollectorContext, CollectorError, ServerTarget
from collectors.gpu import GpuCollector, reading_values
from collectors.gpu_dcgm import DcgmBackend, DcgmPromBackend, parse_exposition
from collectors.gpu_nvml import read_gpus
from collectors.gpu_record import ReplayBackend, load_recording
from collectors.registry import build_collectors

FRAME = load_recording(Path(__file__).resolve().parents[1] / "fixtures" / "nvml-h200-copy.json")["frames"][5]
MIB = 1048576

HELP = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEM_CLOCK": ("gauge", "Memory clock frequency (in MHz)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("counter", "Total energy consumption since boot (in mJ)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "Framebuffer memory reserved (in MiB)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gauge", "Ratio of cycles the device memory interface is active sending or receiving data."),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("gauge", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second."),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gauge", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second."),
}


def exposition(xid: int = 0, *, with_prof: bool = True, mixed: bool = False) -> str:
    """The copy-loop frame as dcgm-exporter would render it; `mixed`: plus a MIG instance's series
    of the same card (the exporter run with `-d g` and `-i`)."""
    f = FRAME["gpus"][0]["fields"]
    gpm = f["gpm"]["metrics"]
    mem = f["memory_bytes"]
    values = {
        "DCGM_FI_DEV_SM_CLOCK": f["sm_clock_mhz"], "DCGM_FI_DEV_MEM_CLOCK": f["mem_clock_mhz"],
        "DCGM_FI_DEV_GPU_TEMP": f["temperature_c"], "DCGM_FI_DEV_POWER_USAGE": f["power_mw"] / 1000,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": f["energy_mj"],
        "DCGM_FI_DEV_GPU_UTIL": f["utilization_pct"]["gpu"], "DCGM_FI_DEV_MEM_COPY_UTIL": f["utilization_pct"]["memory"],
        "DCGM_FI_DEV_XID_ERRORS": xid,
        "DCGM_FI_DEV_FB_FREE": mem["free"] / MIB, "DCGM_FI_DEV_FB_USED": mem["used"] / MIB,
        "DCGM_FI_DEV_FB_RESERVED": mem["reserved"] / MIB,
    }
    if with_prof:
        values.update({
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": gpm["graphics_util_pct"] / 100,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": gpm["tensor_any_pct"] / 100,
            "DCGM_FI_PROF_DRAM_ACTIVE": gpm["dram_bw_util_pct"] / 100,
            "DCGM_FI_PROF_PCIE_TX_BYTES": gpm["pcie_tx_mib_s"] * MIB,
            "DCGM_FI_PROF_PCIE_RX_BYTES": gpm["pcie_rx_mib_s"] * MIB,
        })
    labels = (f'gpu="0",UUID="{f["uuid"]}",pci_bus_id="00000000:19:00.0",device="nvidia0",'
              f'modelName="{f["name"]}",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="580.159.04"')
    lines = []
    for name, value in values.items():
        kind, text = HELP[name]
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {value}"]
        if mixed and name == "DCGM_FI_DEV_FB_USED":  # a MIG instance of the same GPU
            lines.append(f'{name}{{gpu="0",UUID="{f["uuid"]}",device="nvidia0",modelName="{f["name"]}",'
                         f'GPU_I_PROFILE="1g.18gb",GPU_I_ID="3"}} 7')  # MiB
    return "\n".join(lines) + "\n"


class _Exporter(http.server.BaseHTTPRequestHandler):
    body = ""
    status = 200

    def do_GET(self) -> None:  # noqa: N802
        data = type(self).body.encode()
        self.send_response(type(self).status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def exporter() -> Iterator[tuple[str, type[_Exporter]]]:
    handler = type("Handler", (_Exporter,), {"body": exposition()})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/metrics", handler
    srv.shutdown()
    srv.server_close()


def test_dcgm_gives_the_same_series_as_nvml_for_the_same_reading(exporter):
    url, _ = exporter
    [dcgm] = read_gpus(DcgmBackend(url))
    [nvml] = read_gpus(ReplayBackend([FRAME["gpus"]]))
    from_dcgm, from_nvml = reading_values(dcgm), reading_values(nvml)
    shared = set(from_dcgm) & set(from_nvml)
    for key in ("util_ratio", "mem_used_bytes", "mem_total_bytes", "power_w", "energy_j", "temp_c",
                "sm_clock_hz", "gpm.dram_bw_util_ratio", "gpm.tensor_any_ratio", "gpm.graphics_util_ratio",
                "gpm.pcie_tx_bytes_s"):
        assert key in shared, key
        assert from_dcgm[key] == pytest.approx(from_nvml[key], rel=1e-3, abs=1e-6), key
    assert dcgm.name == "NVIDIA H200" and dcgm.uuid == nvml.uuid
    # the default counters CSV has no power limit: missing, with the reason, never 0
    assert "power_limit_w" not in from_dcgm and "DCGM_FI_DEV_POWER_MGMT_LIMIT" in dcgm.errors["power_limit_mw"]


def test_a_card_read_whole_and_per_instance_keeps_both_apart_and_driver_is_kept(exporter):
    url, handler = exporter
    gpus = parse_exposition(exposition(mixed=True)).gpus
    assert sorted(gpus, key=str) == [(0, 3), (0, None)]
    assert gpus[(0, None)]["values"]["DCGM_FI_DEV_GPU_UTIL"] == FRAME["gpus"][0]["fields"]["utilization_pct"]["gpu"]
    handler.body = exposition(mixed=True)
    backend = DcgmBackend(url)
    card, mig = read_gpus(backend)
    assert (card.mig_id, mig.mig_id, mig.mig_profile) == (None, 3, "1g.18gb")
    assert card.util_ratio is not None and mig.mem_used_bytes == 7 * MIB and mig.mem_total_bytes is None
    assert backend.meta()["driver"] == "580.159.04"


def test_exporter_without_profiling_fields_says_so(exporter):
    url, handler = exporter
    handler.body = exposition(with_prof=False)
    [r] = read_gpus(DcgmBackend(url))
    assert r.gpm is None and "DCGM_FI_PROF_DRAM_ACTIVE" in r.errors["gpm"]
    assert not any(k.startswith("gpm.") for k in reading_values(r))


def test_a_new_xid_is_one_event_and_the_startup_value_is_a_baseline(exporter):
    url, handler = exporter
    handler.body = exposition(xid=13)  # happened before Pitwall looked: time unknown
    collector = GpuCollector(backend_factory=lambda: DcgmBackend(url))
    ctx = CollectorContext(servers=[ServerTarget(id=1, name="s", base_url="http://x")],
                           load_state=lambda k: None, save_state=lambda k, v: None, now=lambda: 1.0)
    assert collector.poll(ctx).events == []
    handler.body = exposition(xid=79)
    [ev] = collector.poll(ctx).events
    assert ev.kind == "gpu_xid" and "XID 79" in ev.message
    assert collector.poll(ctx).events == []  # unchanged: no repeat


@pytest.mark.parametrize(("status", "body", "needle"), [
    (503, "", "HTTP 503"),
    (200, "this is { not prometheus", "not the Prometheus format"),
])
def test_bad_exporter_answers_are_clear_errors(exporter, status, body, needle):
    url, handler = exporter
    handler.status, handler.body = status, body
    with pytest.raises(CollectorError, match=needle):
        DcgmBackend(url).read_raw()


def test_unreachable_exporter_is_a_clear_error():
    with pytest.raises(CollectorError, match="did not answer"):
        DcgmBackend("http://127.0.0.1:9/metrics", deadline_s=1.0).read_raw()


def test_registry_uses_dcgm_when_a_url_is_set(exporter):
    url, _ = exporter
    [gpu], errors = build_collectors({}, names={"gpu"}, gpu={"dcgm_url": url})
    assert not errors
    ctx = CollectorContext(servers=[], load_state=lambda k: None, save_state=lambda k, v: None, now=lambda: 1.0)
    samples = {s.metric: s.value for s in gpu.poll(ctx).samples}
    assert samples["gpu.0.gpm.dram_bw_util_ratio"] > 0.8


@pytest.mark.integration
@needs_prometheus
def test_through_prometheus_the_same_gpu_figures_as_the_exporter_read_directly(exporter, tmp_path):
    """`gpu.prometheus_selector`: this host's dcgm-exporter read through a REAL Prometheus that
    scrapes it (every second) gives the same raw readings, XID baseline and all, as the exporter
    read directly; a selector matching nothing is one clear error; the registry wires it."""
    url, handler = exporter
    rig = PromRig(tmp_path, n_sims=1)
    rig.sim_ports[0] = int(url.split(":")[2].split("/")[0])  # Prometheus scrapes the exporter
    try:
        rig.start_prometheus()
        wait_for(lambda: rig.query('DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-node-1"}'), 60, "a scrape of the exporter")
        via = DcgmPromBackend(rig.url, 'Hostname="gpu-node-1"')
        [direct_raw], [prom_raw] = DcgmBackend(url).read_raw(), via.read_raw()
        assert prom_raw["index"] == direct_raw["index"] == 0
        assert prom_raw["fields"] == direct_raw["fields"]
        assert prom_raw["errors"] == direct_raw["errors"]  # the same unexported fields, named
        [direct], [prom] = read_gpus(DcgmBackend(url)), read_gpus(via)
        assert reading_values(prom) == reading_values(direct)

        with pytest.raises(CollectorError, match=r"no DCGM_FI_\* sample.*gpu.prometheus_selector"):
            DcgmPromBackend(rig.url, 'Hostname="elsewhere"').read_raw()

        [gpu], errors = build_collectors({}, names={"gpu"}, gpu={
            "prometheus_selector": 'Hostname="gpu-node-1"', "prometheus_url": rig.url})
        assert not errors
        ctx = CollectorContext(servers=[], load_state=lambda k: None, save_state=lambda k, v: None, now=lambda: 1.0)
        samples = {s.metric: s.value for s in gpu.poll(ctx).samples}
        assert samples["gpu.0.gpm.dram_bw_util_ratio"] > 0.8
    finally:
        rig.close()
    _, errors = build_collectors({}, names={"gpu"}, gpu={"prometheus_selector": 'Hostname="x"'})
    assert errors and "prometheus.url is not" in errors[0]


@pytest.mark.integration
@needs_prometheus
def test_a_selector_matching_two_hosts_exporters_is_refused_not_mixed(tmp_path):
    """Two dcgm-exporters (two hosts' GPU 0) under one selector: one clear error naming both,
    never GPU 0 made of both; the instance label narrows it to one."""
    servers = []
    for _ in range(2):
        handler = type("Handler", (_Exporter,), {"body": exposition()})  # both say Hostname gpu-node-1
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
    rig = PromRig(tmp_path, n_sims=2)
    rig.sim_ports[:] = [int(srv.server_address[1]) for srv in servers]
    try:
        rig.start_prometheus()
        wait_for(lambda: len(rig.query('DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-node-1"}')) == 2, 60,
                 "a scrape of both exporters")
        with pytest.raises(CollectorError, match="matches more than one dcgm-exporter"):
            DcgmPromBackend(rig.url, 'Hostname="gpu-node-1"').read_raw()
        [one] = DcgmPromBackend(rig.url, f'instance="{rig.instance(1)}"').read_raw()
        assert one["index"] == 0
    finally:
        rig.close()
        for srv in servers:
            srv.shutdown()
            srv.server_close()


@pytest.mark.parametrize("field", ["DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"])
def test_clock_event_reasons_and_the_clock_maximum_read_like_nvmls(field):
    # an exporter with the reasons (by either name: DCGM 3.3 renamed the field) and the maximum
    # SM clock in its counters CSV: the same series NVML gives, so the power wall reads alike
    from collectors.gpu_dcgm import to_raw

    raw = to_raw({field: 4.0, "DCGM_FI_DEV_MAX_SM_CLOCK": 1980.0, "DCGM_FI_DEV_SM_CLOCK": 1410.0},
                 {"modelName": "NVIDIA H200"})
    assert raw["fields"]["clock_event_reasons"] == 4 and isinstance(raw["fields"]["clock_event_reasons"], int)
    values = reading_values(read_gpus(_Raw([raw]))[0])
    assert values["clock_event_reasons"] == 4 and values["throttle_power"] == 1.0
    assert values["sm_clock_max_hz"] == 1.98e9 and values["sm_clock_hz"] == 1.41e9
    # a default exporter sends neither: said, and no 0 stands in for them
    bare = to_raw({"DCGM_FI_DEV_SM_CLOCK": 1410.0}, {})
    assert "clock_event_reasons" not in bare["fields"] and "sm_clock_max_mhz" not in bare["fields"]
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in bare["errors"]["clock_event_reasons"]


class _Raw:
    def __init__(self, raws):  # type: ignore[no-untyped-def]
        self.raws = raws

    def read_raw(self):  # type: ignore[no-untyped-def]
        return [{**r, "index": i} for i, r in enumerate(self.raws)]

    def meta(self):  # type: ignore[no-untyped-def]
        return {}
