"""The GPU-wall verdict on real work: NVML (with GPM) recorded on an H100 80GB HBM3 and on an
H200 while each kind of work an inference server runs ran in a loop (scripts/gpu_kernels.py; the
models built from their published shapes with random bf16 weights), stored through the GPU
collector as the runner stores it. What each recording ran, as measured there (`meta.work` of
each fixture), H100; H200:

| fixture | work | s a step | DRAM / tensor / SM %, util | clock, power |
|---|---|---|---|---|
| dit-1024-cfg-graph | Qwen-Image DiT step, 1024², CFG (batch 2), CUDA graph | 0.349; 0.336 | 42 / 47 / 95, 100; 30 / 50 / 95, 100 | 1.73; 1.69 of 1.98 GHz, 694; 693 of 700 W |
| dit-1024-b1-eager | the same, batch 1, eager | 0.192; 0.177 | 40 / 41 / 86, 99; 28 / 45 / 88, 100 | 1.86; 1.79 GHz, 686; 692 W |
| dit-512-cfg-graph | 512², CFG, CUDA graph | 0.096; 0.091 | 39 / 38 / 85, 100; 27 / 40 / 86, 100 | 1.90; 1.85 GHz, 688; 689 W |
| dit-512-cfg-eager | 512², CFG, eager (kernel-launch bound) | 0.128; 0.126 | 29 / 27 / 62, 76; 17 / 23 / 50, 67 | 1.97; 1.98 GHz, 561; 492 W |
| gemv-stream | every DiT weight read once at batch 1 (40.9 GB) | 0.023; 0.019 | 57 / 2 / 45, 86; 46 / 2 / 43, 79 | 1.98 GHz, 381; 402 W |
| llm-decode-graph | Llama-3-8B shape, batch-1 decode, static cache, CUDA graph | 0.012; 0.010 / token | 48 / 2 / 65, 100; 40 / 3 / 62, 100 | 1.98 GHz, 371; 412 W |
| llm-decode-eager | the same, `generate`, eager | 0.028; 0.027 / token | 13 / 0 / 13, 31; 12 / 1 / 13, 34 | 1.98 GHz, 180; 201 W |
| llm-prefill | 16 prompts × 2,048 tokens | 0.960; 0.948 | 38 / 64 / 99, 100; 27 / 67 / 99, 100 | 1.48; 1.52 GHz, 700; 692 W |
| idle | nothing | | 0 / 0 / 0, 0 | 0.35 GHz, 71; 82 W |

The power-capped rows carry clock-event reason 0x4 (software power cap) on both cards, the idle
card 0x1 (GPU idle); no thermal, hardware-slowdown or power-brake reason was seen.
"""

from __future__ import annotations

import json

import pytest
from gpu_seed import FIXTURES, T0, store_recording

from scorecard.gpu_wall import classify, gpu_walls

KERNELS = "gpu-kernels/nvml-h100-{}.json"
CARDS = {"h100": ("NVIDIA H100 80GB HBM3", "H100 SXM"), "h200": ("NVIDIA H200", "H200")}
card = pytest.mark.parametrize("card", list(CARDS))


def _wall(engine, phase: str, card: str = "h100", **kw) -> dict:  # type: ignore[no-untyped-def]
    store_recording(engine, f"gpu-kernels/nvml-{card}-{phase}.json", **kw)
    out = gpu_walls(engine, server_id=1, since=T0 - 5, until=T0 + 60)
    [gpu] = out["gpus"]
    assert (gpu["name"], gpu["spec"]) == CARDS[card]
    return gpu


@card
@pytest.mark.parametrize("phase", ["dit-1024-cfg-graph", "dit-1024-b1-eager", "dit-512-cfg-graph", "llm-prefill"])
def test_power_capped_compute_reads_bound_by_power_with_the_clock_and_the_watts(engine, phase, card):
    gpu = _wall(engine, phase, card, queue=1)
    assert gpu["verdict"] == "power" and gpu["shares"]["power"] >= 0.7
    p = gpu["power"]
    assert p["reasons"] == ["software power cap"] and p["power_limit_w"] == pytest.approx(700.0)
    assert p["sm_max_hz"] == pytest.approx(1.98e9) and p["sm_hz"] < 0.97 * p["sm_max_hz"]
    # the verdict names what held the clock, by how much, and what the tensor cores and DRAM did
    assert gpu["reason"].startswith(f"bound by power: clocks held at {p['sm_hz'] / 1e9:.2f} of 1.98 GHz at ")
    assert "of 700 W (software power cap" in gpu["reason"] and "tensor" in gpu["reason"] and "DRAM" in gpu["reason"]


@card
@pytest.mark.parametrize("phase", ["gemv-stream", "llm-decode-graph"])
def test_weight_streaming_reads_bandwidth_though_it_reaches_under_60_percent(engine, phase, card):
    gpu = _wall(engine, phase, card, queue=1)
    assert gpu["verdict"] == "bandwidth" and gpu["shares"]["bandwidth"] >= 0.8
    assert 0.35 < gpu["dram_ratio"] < 0.6 and gpu["tensor_ratio"] < 0.05  # below the old 60 % line
    assert gpu["power"] is None  # nothing held the clock


@card
@pytest.mark.parametrize(("phase", "queue"), [("llm-decode-eager", None), ("llm-decode-eager", 1),
                                              ("dit-512-cfg-eager", 1), ("idle", 2)])
def test_a_starved_gpu_waits_on_the_host_and_is_never_idle(engine, phase, queue, card):
    # eager decode keeps the GPU busy a third of the time: with or without a server's queue to say
    # requests ran, the GPU itself says it works, and waits
    gpu = _wall(engine, phase, card, queue=queue)
    assert gpu["verdict"] == "neither" and "waits on the host" in gpu["reason"]


@card
def test_an_idle_gpu_with_nothing_queued_is_idle(engine, card):
    gpu = _wall(engine, "idle", card)
    assert gpu["verdict"] == "idle" and gpu["shares"] == {"idle": 1.0}


def test_each_recording_carries_the_work_it_measured():
    # the figures the simulator's cost model is checked against come with the recordings
    for phase in ("dit-1024-cfg-graph", "dit-1024-b1-eager", "dit-512-cfg-graph", "llm-prefill"):
        work = json.loads((FIXTURES / KERNELS.format(phase)).read_text())["meta"]["work"]
        assert work["phase"] == phase and work["s_per_step"] > 0
    dit = json.loads((FIXTURES / KERNELS.format("dit-1024-cfg-graph")).read_text())["meta"]["work"]
    # 70.6 TFLOP a forward (torch's flop counter), two forwards with CFG: not the 191.5 of a
    # model that sends every token through all 20.4 B parameters
    assert dit["flops"] == pytest.approx(141.15e12, rel=0.01) and dit["weight_bytes"] == pytest.approx(40.86e9, rel=0.01)


# The H200 table (DRAM / tensor / SM; utilization where it was said): each row's verdict.
@pytest.mark.parametrize(("dram", "tensor", "sm", "util", "held", "verdict"), [
    (0.29, 0.50, 0.95, 1.0, True, "power"),  # DiT 1024² CFG graph, 692 of 700 W at 1.76 of 1.98 GHz
    (0.15, 0.21, 0.45, 0.56, False, "neither"),  # DiT 512² CFG eager, GPU 56 % busy: was "idle"
    (0.60, 0.02, 0.54, None, False, "bandwidth"),  # all 40.9 GB of DiT weights streamed: was "mixed"
    (0.41, 0.02, 0.54, None, False, "bandwidth"),  # 8B decode, graph: was "mixed"
    (0.07, 0.00, 0.07, 0.18, False, "neither"),  # 8B decode, eager, 18 % busy: was "idle"
    (0.28, 0.67, 0.98, 1.0, False, "compute"),  # 8B prefill
    (0.28, 0.67, 0.98, 1.0, True, "power"),  # the same, its clock held by the cap
    (0.89, 0.00, 0.95, 1.0, True, "bandwidth"),  # a copy loop stays bandwidth-bound under a cap
])
def test_the_h200_table(dram, tensor, sm, util, held, verdict):
    assert classify(dram, tensor, sm, busy=False, util=util, held=held) == verdict


def test_without_exported_reasons_or_limits_the_datasheet_says_what_holds_the_clock(engine, tmp_path):
    # a default dcgm-exporter sends the SM clock and the power draw, not the clock-event reasons,
    # the power limit or the clock's maximum: the card's TDP and boost clock (GPU_SPECS) stand in
    rec = json.loads((FIXTURES / KERNELS.format("dit-1024-cfg-graph")).read_text())
    for frame in rec["frames"]:
        for gpu in frame["gpus"]:
            for f in ("clock_event_reasons", "power_limit_mw", "sm_clock_max_mhz"):
                gpu["fields"].pop(f, None)
    (tmp_path / "bare.json").write_text(json.dumps(rec))
    store_recording(engine, str(tmp_path / "bare.json"), queue=1)
    [gpu] = gpu_walls(engine, server_id=1, since=T0 - 5, until=T0 + 60)["gpus"]
    assert gpu["verdict"] == "power" and gpu["power"]["sm_max_hz"] == pytest.approx(1.98e9)
    assert "not exported" in gpu["reason"] and "of 700 W" in gpu["reason"]
    # the same frames far below the limit: nothing holds the clock, whatever the clock reads
    for frame in rec["frames"]:
        for gpu in frame["gpus"]:
            gpu["fields"]["power_mw"] = 400_000
    (tmp_path / "cool.json").write_text(json.dumps(rec))
    store_recording(engine, str(tmp_path / "cool.json"), queue=1, server_id=2)
    [gpu] = gpu_walls(engine, server_id=2, since=T0 - 5, until=T0 + 60)["gpus"]
    assert gpu["verdict"] == "compute" and gpu["power"] is None


def test_the_what_if_of_a_power_held_dit_step_scales_its_dram_share_with_bandwidth(engine):
    from scorecard.gpu_wall_stage import stage_walls
    from storage import repo

    store_recording(engine, KERNELS.format("dit-1024-cfg-graph"), queue=1)
    step = 0.349  # the recording's own s a step (meta.work)
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=[
            {"ts": T0 + 9, "server_id": 1, "source": "log", "metric": m, "value": v}
            for m, v in (("log.diffusion.stage_s.DenoisingStage", 8.0), ("log.diffusion.step_s", step))])
    out = stage_walls(engine, server_id=1, since=T0 - 5, until=T0 + 60)
    assert out["shares"] == {"power": 1.0}
    split = out["what_if_split"]
    # DRAM 42 % beside tensor 47 %: under half of the step's time moves memory, the rest computes
    assert 0.40 < split["bandwidth"] < 0.55 and split["power"] == pytest.approx(1 - split["bandwidth"])
    b300 = out["what_if"][0]
    assert b300["card"] == "B300"
    expected = step * (split["bandwidth"] * 3.35 / 8.0 + split["power"] * 989 / 2250)
    assert b300["step_s"] == pytest.approx(expected, rel=1e-6)
    assert "DRAM share of compute-bound ones" in b300["note"] and "held by the power cap as compute" in b300["note"]
