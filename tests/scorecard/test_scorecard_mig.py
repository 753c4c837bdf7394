"""The scorecard of a server on a card in MIG mode counts the card once: the golden dcgm-exporter
payload (GPU 0 in MIG mode with GI 1 = 3g.48gb and GI 3 = 2g.24gb, GPU 1 whole; tests/gpu_seed.py
store_dcgm) polled through the GPU collector over loopback into a real SQLite file.

Arithmetic (the fixture, MiB = 2^20 bytes): two cards, so 2 GPUs and 2 GPU-hours an hour at
$2/GPU-h = $4/h; power 142.331 W (card 0, read once, not per instance) + 391.874 W (card 1) =
534.205 W. Memory: card 0 in MIG mode has no total of its own, so its instances' 47,616 + 23,716
MiB count; card 1 97,871 MiB. A card that also reports its own total (97,871 MiB) counts that
once, never plus its instances'.
"""

from __future__ import annotations

import pytest
from gpu_seed import T0, store_dcgm

from scorecard import build
from scorecard.build import build_scorecard, gather_inputs, resolve_subject
from storage import repo

MIB = 1048576


def _inputs(engine, name: str):
    srv, launch, run, since, until = resolve_subject(engine, server=name, since_s=60, now=T0 + 30)
    return gather_inputs(engine, srv=srv, launch=launch, run=run, since=since, until=until, now=T0 + 30)


def test_a_mig_card_counts_once_for_gpus_cost_power_and_memory(engine):
    srv = repo.upsert_server(engine, name="mig", base_url="http://127.0.0.1:1", gpu_hourly_usd=2.0)
    store_dcgm(engine, server_id=int(srv.id), frames=20)
    inp = _inputs(engine, "mig")
    assert inp.gpu_count == 2 and inp.provenance["gpu_count"] == 2
    assert inp.power_w_sum_of_means == pytest.approx(142.331 + 391.874)
    assert inp.gpu_mem_total_bytes == (47616 + 23716 + 97871) * MIB
    assert inp.energy_j == 0.0  # the cards' counters over the window (the payload's do not move)
    card = build_scorecard(engine, server="mig", since_s=60, now=T0 + 30)
    assert card.value("gpu_usd_per_hour") == 4.0
    assert "$2/GPU-h × 2 GPU (GPUs seen in gpu.* samples)" in card.figures["gpu_usd_per_hour"].note


def test_headroom_never_counts_a_card_and_its_instances_both(engine):
    srv = repo.upsert_server(engine, name="mig", base_url="http://127.0.0.1:1")
    store_dcgm(engine, server_id=int(srv.id), frames=5)
    with engine.begin() as conn:  # card 0 also reports its whole memory (an NVML read of it)
        repo.insert_samples(conn, rows=[{"ts": T0 + 4, "server_id": srv.id, "launch_id": None, "source": "gpu",
                                         "metric": "gpu.0.mem_total_bytes", "value": 97871.0 * MIB}])
    assert _inputs(engine, "mig").gpu_mem_total_bytes == 2 * 97871 * MIB


def test_card_mem_total_is_pure():
    assert build.card_mem_total({"gpu.0.mig1.mem_total_bytes": 3.0, "gpu.0.mig2.mem_total_bytes": 4.0,
                           "gpu.1.mem_total_bytes": 10.0}) == 17.0
    assert build.card_mem_total({"gpu.0.mem_total_bytes": 8.0, "gpu.0.mig1.mem_total_bytes": 3.0}) == 8.0
    assert build.card_mem_total({}) is None
