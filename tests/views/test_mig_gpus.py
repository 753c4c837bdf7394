"""A card in MIG mode on the dashboard's GPU views: the golden dcgm-exporter payload (GPU 0 in MIG
mode, GI 1 = 3g.48gb and GI 3 = 2g.24gb; GPU 1 whole) polled through the GPU collector over
loopback into a real SQLite file (tests/gpu_seed.py store_dcgm), then read back the way the Server
page, the Overview and the GPU wall read it. Each instance is a GPU entry of its own with its own
memory; the card keeps power and temperature; the card counts once.

Figures (the fixture, MiB = 2^20 bytes): GI 1 uses 40,211 of 47,616 MiB, GI 3 20,587 of 23,716;
the card draws 142.331 W at 38 °C. GI 1's DRAM 0.634 ≥ 0.60 and > tensor 0.213: bandwidth
bound; GI 3 reads 0 everywhere with no request running: idle.
"""

from __future__ import annotations

import pytest
from gpu_seed import T0, store_dcgm

from dashboard.services.views import overview
from dashboard.services.views import timeseries as ts
from dashboard.services.views.gpu_wall_panel import wall_panel
from scorecard.gpu_entries import GpuEntry, entries_from, parse_key
from scorecard.gpu_wall import gpu_walls
from storage import repo

MIB = 1048576
GI1 = "GPU 0 · MIG 3g.48gb (instance 1)"
GI3 = "GPU 0 · MIG 2g.24gb (instance 3)"


@pytest.fixture()
def mig(engine):
    srv = repo.upsert_server(engine, name="mig", base_url="http://127.0.0.1:1", gpu_indices=[0])
    store_dcgm(engine, server_id=int(srv.id), gpu_indices=[0], frames=20)
    return repo.get_server(engine, name="mig")


def test_keys_and_labels_are_pure():
    assert parse_key("gpu.0.mig3.gpm.dram_bw_util_ratio") == (0, 3, "gpm.dram_bw_util_ratio")
    assert parse_key("gpu.12.power_w") == (12, None, "power_w") and parse_key("log.x") is None
    info = {"gpus": [{"index": 0, "mig_id": 1, "mig_profile": "3g.71gb"}]}
    got = entries_from(["gpu.0.mig1.mem_used_bytes", "gpu.0.mig2.mem_used_bytes", "gpu.0.power_w",
                        "gpu.1.power_w"], info, configured=[0])
    assert [e.label for e in got] == ["GPU 0", "GPU 0 · MIG 3g.71gb (instance 1)", "GPU 0 · MIG instance 2"]
    assert got[1].key("mem_used_bytes") == "gpu.0.mig1.mem_used_bytes"


def test_server_page_series_draw_each_instance_and_the_card_once(engine, mig):
    entries = ts.gpu_entries(engine, server_id=mig.id, configured=mig.gpu_indices)
    assert [e.label for e in entries] == ["GPU 0", GI1, GI3]
    panels = {p.key: p for p in ts.gpu_panels(entries)}
    assert dict(panels["gpu_mem"].series)["gpu.0.mig1.mem_used_bytes"] == GI1
    assert [m for m, _ in panels["gpu_power"].series] == ["gpu.0.power_w"]  # the card's, once
    frames = ts.read_series(engine, server_id=mig.id, panels=list(panels.values()), since=T0, until=T0 + 60)
    mem = frames["gpu_mem"].groupby("label")["value"].max()
    assert mem[GI1] == 40211 * MIB and mem[GI3] == 20587 * MIB and "GPU 0" not in mem
    assert set(frames["gpu_power"]["label"]) == {"GPU 0"} and frames["gpu_power"]["value"].iloc[0] == pytest.approx(142.331)
    assert frames["gpu_util"].empty  # DCGM has no utilisation for a MIG card or instance: none drawn, none invented
    # a MIG card has no util_ratio; its samples still count as data in the window
    assert ts.has_samples(engine, server_id=mig.id, since=T0, gpus=entries)


def test_overview_lists_each_instance_with_its_memory_and_the_card_with_its_power(engine, mig):
    figs = {g.label: g for g in overview.gpu_figures(engine, mig)}
    assert list(figs) == ["GPU 0", GI1, GI3]
    card, gi1 = figs["GPU 0"], figs[GI1]
    assert card.power_w == pytest.approx(142.331) and card.temp_c == 38 and card.mem_used_bytes is None
    assert gi1.mig_id == 1 and gi1.index == 0 and gi1.power_w is None and gi1.util_ratio is None
    assert gi1.mem_used_bytes == 40211 * MIB and gi1.mem_ratio == pytest.approx(40211 / 47616)


def test_gpu_wall_gives_each_instance_its_own_verdict(engine, mig):
    out = gpu_walls(engine, server_id=mig.id, since=T0, until=T0 + 60)
    by = {g["label"]: g for g in out["gpus"]}
    assert list(by) == [GI1, GI3] and out["missing"] == [] and out["why_not"] is None
    assert by[GI1]["verdict"] == "bandwidth" and by[GI1]["dram_ratio"] == pytest.approx(0.63409, abs=1e-4)
    assert by[GI3]["verdict"] == "idle" and by[GI3]["mig_id"] == 3
    assert by[GI1]["achieved_bw_bytes_s"] is None  # an instance's share of the card's peak is not read
    view = wall_panel(engine, server_id=mig.id, kind="llm", since=T0, until=T0 + 60)
    assert [c["title"] for c in view["cards"]] == [f"{GI1} (NVIDIA H20)", f"{GI3} (NVIDIA H20)"]
    assert f"{GI1} DRAM bandwidth" in set(view["series"]["label"])
    assert dict((k, t) for k, t, _ in view["cards"][0]["evidence"])["Achieved bandwidth"] == "not known (MIG)"


def test_a_whole_card_beside_keeps_its_own_entry(engine):
    srv = repo.upsert_server(engine, name="all", base_url="http://127.0.0.1:1")
    store_dcgm(engine, server_id=int(srv.id), frames=3, queue=1.0)
    entries = ts.gpu_entries(engine, server_id=int(srv.id))
    assert entries == [GpuEntry(0), GpuEntry(0, 1, "3g.48gb"), GpuEntry(0, 3, "2g.24gb"), GpuEntry(1)]
    walls = gpu_walls(engine, server_id=int(srv.id), since=T0, until=T0 + 60)
    assert [(g["label"], g["verdict"]) for g in walls["gpus"]] == [
        (GI1, "bandwidth"), (GI3, "neither"), ("GPU 1", "bandwidth")]  # requests running: GI 3 is underfed
