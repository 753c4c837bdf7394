"""Preflight before a relaunch (launching/preflight.py) on recorded figures: the
config.json of Qwen2.5-7B-Instruct and Llama-3.1-70B-Instruct as published, the H200 NVML
recording (driver 580.159.04, CUDA 13.0, 140 GiB) replayed through the GPU collector."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpu_seed import T0, store_dcgm, store_recording

from launching import preflight
from launching.preflight import GIB, Gpu, HostFacts
from storage import repo

QWEN_7B = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "num_hidden_layers": 28,
           "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
           "vocab_size": 152064, "tie_word_embeddings": False, "max_position_embeddings": 32768,
           "torch_dtype": "bfloat16"}
LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "num_hidden_layers": 80,
             "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
             "vocab_size": 128256, "tie_word_embeddings": False, "max_position_embeddings": 131072,
             "torch_dtype": "bfloat16"}
H200 = 150754820096.0  # memory.total of the recorded H200
H100 = 85520809984.0


def facts(*gpus: Gpu, cuda: int | None = 13000, sglang: str | None = "0.5.6", replacing: bool = False) -> HostFacts:
    return HostFacts(cuda_driver=cuda, driver="580.159.04", engine_version=sglang, gpus=list(gpus), replacing=replacing)


def severities(issues: list, flag: str | None = None) -> list[str]:
    return [i.severity for i in issues if flag is None or i.flag == flag]


def test_parameter_estimate_matches_the_published_sizes() -> None:
    assert preflight.estimate_params(QWEN_7B) == pytest.approx(7.62e9, rel=0.01)
    assert preflight.estimate_params(LLAMA_70B) == pytest.approx(70.6e9, rel=0.01)
    # GQA: 2 x 28 layers x 4 KV heads x 128 x 2 bytes = 57,344 bytes a token on one GPU
    assert preflight.kv_bytes_per_token(QWEN_7B, {}, 1) == 57344
    assert preflight.kv_bytes_per_token(QWEN_7B, {"kv-cache-dtype": "fp8_e5m2"}, 2) == 57344 / 4


def test_driver_older_cuda_major_blocks_minor_warns_newer_passes() -> None:
    assert severities(preflight.check_driver(facts(cuda=11080))) == ["error"]
    warn = preflight.check_driver(facts(cuda=12040))
    assert severities(warn) == ["warning"] and "CUDA 12.4" in warn[0].message and "12.8" in warn[0].message
    assert preflight.check_driver(facts(cuda=13000)) == []
    assert severities(preflight.check_driver(facts(sglang=None))) == ["note"]
    assert severities(preflight.check_driver(facts(cuda=None))) == ["note"]


def test_architecture_below_sm75_blocks() -> None:
    v100 = preflight.check_architecture(facts(Gpu(0, "Tesla V100-SXM2-32GB", 32 * GIB, 0)), {})
    assert severities(v100) == ["error"] and "sm70" in v100[0].message
    assert severities(preflight.check_architecture(facts(Gpu(0, "Tesla T4", 16 * GIB, 0)), {})) == ["warning"]
    assert preflight.check_architecture(facts(Gpu(0, "NVIDIA H200", H200, 0)), {"quantization": "fp8"}) == []
    a100_fp8 = preflight.check_architecture(facts(Gpu(0, "NVIDIA A100-SXM4-80GB", H100, 0)), {"quantization": "fp8"})
    assert severities(a100_fp8, "quantization") == ["warning"]


def test_memory_plan_70b_on_one_h100_blocks_and_on_four_passes() -> None:
    one = preflight.memory_plan(LLAMA_70B, {}, facts(Gpu(0, "NVIDIA H100 80GB HBM3", H100, 0)))
    assert severities(one) == ["error"] and "do not fit" in one[0].message
    four = preflight.memory_plan(LLAMA_70B, {"tp-size": 4, "context-length": 8192},
                                 facts(*(Gpu(i, "NVIDIA H100 80GB HBM3", H100, 0) for i in range(4))))
    assert four == []


def test_memory_plan_fraction_too_low_for_the_weights_blocks() -> None:
    got = preflight.memory_plan(QWEN_7B, {"mem-fraction-static": 0.15}, facts(Gpu(0, "NVIDIA H100", H100, 0)))
    assert severities(got) == ["error"] and "Not enough memory" in got[0].message


def test_memory_plan_other_processes_shrink_the_kv_cache() -> None:
    shared = Gpu(0, "NVIDIA H100", H100, 40 * GIB)
    got = preflight.memory_plan(QWEN_7B, {}, facts(shared))
    assert severities(got) == ["warning"] and "other processes hold 40.0 GiB" in got[0].message
    # SGLang sizes the KV pool from what is free after the load minus (1 - fraction) x memory
    crowded = preflight.memory_plan(QWEN_7B, {}, facts(Gpu(0, "NVIDIA H100", H100, 60 * GIB)))
    assert severities(crowded) == ["error"] and "leaves no KV cache" in crowded[0].message
    # a relaunch: the memory in use is the server being replaced, freed before the load
    assert preflight.memory_plan(QWEN_7B, {}, facts(Gpu(0, "NVIDIA H100", H100, 60 * GIB), replacing=True)) == []


def test_one_gpu_before_tensor_parallelism() -> None:
    gpus = [Gpu(i, "NVIDIA H200", H200, 0) for i in range(2)]
    got = preflight.memory_plan(QWEN_7B, {"tp-size": 2}, facts(*gpus))
    assert severities(got, "tp-size") == ["warning"] and "One GPU holds it" in got[0].message
    assert preflight.memory_plan(LLAMA_70B, {"tp-size": 2, "context-length": 8192}, facts(*gpus)) == []


def test_weights_on_disk_win_over_the_estimate_and_the_cache_is_found(tmp_path: Path) -> None:
    snap = tmp_path / "hub" / "models--Qwen--Qwen2.5-7B-Instruct" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(QWEN_7B), encoding="utf-8")
    with open(snap / "model-00001-of-00001.safetensors", "wb") as fh:
        fh.truncate(80 * GIB)  # sparse: a model far larger than its config says
    assert preflight.model_dir("Qwen/Qwen2.5-7B-Instruct", str(tmp_path)) == snap
    got = preflight.preflight("Qwen/Qwen2.5-7B-Instruct", {}, facts(Gpu(0, "NVIDIA H100", H100, 0)),
                              hf_home=str(tmp_path))
    assert severities(got) == ["error"] and "safetensors on disk" in got[0].message
    missing = preflight.preflight("Org/absent", {}, facts(), hf_home=str(tmp_path))
    assert severities(missing) == ["note"] and "No local config.json" in missing[0].message


def test_bad_config_json_is_skipped_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    got = preflight.preflight(str(tmp_path), {}, facts())
    assert severities(got) == ["note"]


def test_host_facts_from_the_recorded_h200(engine) -> None:
    srv = repo.upsert_server(engine, name="h200", base_url="http://127.0.0.1:1", managed=True)
    store_recording(engine, "nvml-h200-idle.json", t0=T0, server_id=srv.id)
    got = preflight.host_facts(engine, srv, replacing=False)
    assert got.cuda_driver == 13000 and got.driver == "580.159.04"
    assert [(g.index, g.name, g.total_bytes) for g in got.gpus] == [(0, "NVIDIA H200", H200)]
    assert got.engine_version is None  # never launched: the driver is reported, not compared
    other = repo.upsert_server(engine, name="elsewhere", base_url="http://127.0.0.1:2", managed=True,
                               gpu_indices=[3])
    assert preflight.host_facts(engine, other, replacing=False).gpus == []


def test_host_facts_of_a_mig_card_list_each_instance_with_its_memory(engine) -> None:
    """The golden dcgm-exporter payload (GPU 0 in MIG mode: GI 1 = 3g.48gb, 40,211 of 47,616 MiB
    used; GI 3 = 2g.24gb, 20,587 of 23,716) read through the GPU collector: each instance is a GPU
    of its own, named with its profile, never two "GPU 0"; the memory plan judges the instance
    with the least free memory (GI 3: 3,129 MiB), where the 7B model's 15 GiB cannot fit."""
    srv = repo.upsert_server(engine, name="mig", base_url="http://127.0.0.1:1", managed=True, gpu_indices=[0])
    store_dcgm(engine, server_id=int(srv.id), gpu_indices=[0], frames=2)
    got = preflight.host_facts(engine, srv, replacing=False)
    mib = 1048576
    assert [(g.title, g.total_bytes, g.used_bytes) for g in got.gpus] == [
        ("GPU 0 · MIG 3g.48gb (instance 1)", 47616 * mib, 40211 * mib),
        ("GPU 0 · MIG 2g.24gb (instance 3)", 23716 * mib, 20587 * mib)]
    [issue] = preflight.memory_plan(QWEN_7B, {}, got)
    assert issue.severity == "error" and "GPU 0 · MIG 2g.24gb (instance 3) (NVIDIA H20) has 23.2 GiB" in issue.message
    # the card's architecture is judged once, not once per instance
    a100 = [Gpu(0, "NVIDIA A100-SXM4-80GB", 40 * GIB, 0, 1, "GPU 0 · MIG 3g.40gb (instance 1)"),
            Gpu(0, "NVIDIA A100-SXM4-80GB", 20 * GIB, 0, 2, "GPU 0 · MIG 2g.20gb (instance 2)")]
    assert len(preflight.check_architecture(facts(*a100), {"quantization": "fp8"})) == 1


def test_validate_reports_the_preflight_beside_the_flags(engine, tmp_path: Path) -> None:
    """Validate on a server (the runner's check lane): Llama-3.1-70B in bf16 on the recorded
    H200 leaves SGLang no KV cache at the default fraction, so the profile is invalid; tp 2 on
    two such GPUs would pass, and the same profile without a server is not preflighted."""
    from config.settings import Settings
    from launching.check import validate_named
    from launching.profiles import sync_profiles

    model = tmp_path / "llama-70b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(LLAMA_70B), encoding="utf-8")
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "big.toml").write_text(f'name = "big"\nmodel_path = "{model}"\n[flags]\nport = 30000\n', encoding="utf-8")
    assert sync_profiles(engine, folder)[1] == []
    settings = Settings(data_dir=tmp_path / "data", database_url="sqlite://", profiles_dir=folder)
    srv = repo.upsert_server(engine, name="h200", base_url="http://127.0.0.1:1", managed=True)
    store_recording(engine, "nvml-h200-idle.json", t0=T0, server_id=srv.id)
    report = validate_named(engine, settings, "big", "h200", "tester")
    mem = [i for i in report.issues if i.flag == "mem-fraction-static"]
    assert not report.ok and [i.severity for i in mem] == ["error"], report.lines()
    assert "NVIDIA H200" in mem[0].message and "131.4 GiB" in mem[0].message
    alone = validate_named(engine, settings, "big", None, "tester")
    assert not [i for i in alone.issues if i.flag in ("memory", "mem-fraction-static", "driver")]
