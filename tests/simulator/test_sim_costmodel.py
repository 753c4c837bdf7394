"""Roofline step times move the way a GPU engineer expects (directions, not absolute values)."""

from __future__ import annotations

from simulator.costmodel import infer_params, make_cost_model, model_shape, parse_params


def cm(**kw: object):  # type: ignore[no-untyped-def]
    base: dict[str, object] = dict(gpu="h100", params=8e9, tp=1, quantization=None,
                                   kv_cache_dtype="auto", cuda_graph=True, cuda_graph_max_bs=256,
                                   torch_compile=False, torch_compile_max_bs=32)
    base.update(kw)
    return make_cost_model(**base)  # type: ignore[arg-type]


def test_params_from_name_and_flag() -> None:
    assert infer_params("meta-llama/Llama-3.1-70B-Instruct") == 70e9
    assert infer_params("Qwen/Qwen2.5-0.5B") == 0.5e9
    assert infer_params("my-model") == 8e9
    assert parse_params("8B") == 8e9 and parse_params("7e9") == 7e9
    assert model_shape(70e9).layers == 80


def test_decode_step_grows_with_batch_and_context() -> None:
    m = cm()
    assert m.decode_time(1, 1000) < m.decode_time(64, 64000) < m.decode_time(256, 256000)
    # Throughput per step still rises with batch (memory-bound regime).
    assert 64 / m.decode_time(64, 64000) > 1 / m.decode_time(1, 1000)


def test_tp2_changes_step_time() -> None:
    # 70B decode: halving weight bytes per GPU beats the added all-reduce cost.
    one, two = cm(params=70e9, tp=1), cm(params=70e9, tp=2)
    assert two.decode_time(8, 8000) < one.decode_time(8, 8000)
    assert two._comm(8) > 0 == one._comm(8)


def test_no_cuda_graph_and_bigger_gpu() -> None:
    assert cm(cuda_graph=False).decode_time(8, 8000) > cm().decode_time(8, 8000)
    assert cm(gpu="h200").decode_time(8, 8000) < cm().decode_time(8, 8000)
    # Batches above --cuda-graph-max-bs-decode run eagerly.
    assert not cm(cuda_graph_max_bs=16).uses_graph(32)


def test_kv_pool_follows_mem_fraction_and_kv_dtype() -> None:
    m = cm()
    # 8B bf16: 32 layers x 8 kv heads x 128 dim x 2 (K,V) x 2 B = 131072 B per token.
    assert m.kv_bytes_per_token == 131072
    assert m.kv_pool_tokens(0.5) < m.kv_pool_tokens(0.88)
    assert cm(kv_cache_dtype="fp8_e5m2").kv_pool_tokens(0.88) > m.kv_pool_tokens(0.88)
    assert cm(params=70e9).kv_pool_tokens(0.88) <= 0  # 140 GB of weights on one 80 GB GPU
