"""HiCache in the simulator (simulator/hicache.py), as SGLang 0.5.23 reports it: a prefix the GPU
evicted and host memory kept is loaded back instead of recomputed, counted as
cached_tokens_total{cache_source="host"} and in meta_info's cached_tokens_details; the host pool,
load-back, backup and eviction families carry 0.5.23's names and labels; and Pitwall reads the
hits by tier, the host pool and the load-back cost a token from them. The real CPU build cannot
run HiCache (tests/real_sglang/test_real_sglang_gpu_only.py)."""

from __future__ import annotations

from pathlib import Path

import httpx
from sim_fixture import running_sim

from collectors.base import ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.metrics import snapshot
from storage import series_keys as sk

POOL = 3000  # device tokens: four prompts of ~800 do not fit, so the first ones are evicted
ARGS = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "50", "--enable-metrics",
        "--max-total-tokens", str(POOL)]


def _gen(url: str, i: int) -> dict:
    ids = [1000 + i] * 5 + list(range(i * 7, i * 7 + 800))
    r = httpx.post(f"{url}/generate", json={"input_ids": ids, "sampling_params": {"max_new_tokens": 4}}, timeout=60)
    r.raise_for_status()
    return dict(r.json()["meta_info"])


def _rows(url: str, text: str, prev: dict | None, ts: float) -> tuple[dict[str, float], dict]:
    snap = snapshot(ServerTarget(1, "sim", url), parse_metrics(text), prev, ts)
    return {r.metric: r.value for r in snap.rows}, snap.state


def test_a_prefix_the_gpu_evicted_comes_back_from_host_memory(tmp_path: Path) -> None:
    with running_sim([*ARGS, "--enable-hierarchical-cache"], tmp_path / "hi.log") as url:
        before = httpx.get(f"{url}/metrics", timeout=10).text
        _, state = _rows(url, before, None, 0.0)
        for i in range(4):
            _gen(url, i)
        again = _gen(url, 0)  # evicted from the 3,000-token GPU pool, still in the 6,000-token host pool
        text = httpx.get(f"{url}/metrics", timeout=10).text
    assert again["cached_tokens"] == 804 and again["cached_tokens_details"] == {"device": 0, "host": 804}
    samples = parse_metrics(text).samples
    by = {(s.name, s.labels.get("cache_source", s.labels.get("pool", ""))): s.value for s in samples}
    assert by[("sglang:cached_tokens_total", "host")] == 804
    assert by[("sglang:load_back_tokens_total", "kv")] == 804
    assert by[("sglang:hicache_host_total_tokens", "")] == 2 * POOL  # --hicache-ratio 2.0
    assert 0 < by[("sglang:hicache_host_used_tokens", "")] <= 2 * POOL
    evicted = [s for s in samples if s.name == "sglang:evicted_tokens_total"]
    assert evicted and evicted[0].labels["cache_type"] == "HiRadixCache"
    assert set(evicted[0].labels) == {"cache_type", "tp_rank", "pp_rank", "dp_rank"}  # the radix collector's labels
    values, _ = _rows(url, text, state, 10.0)
    host = sk.pattern_prefix(sk.METRICS_CACHE_HIT_BY_SOURCE) + "host"
    assert values[host] == 804 / 10.0
    assert values[sk.METRICS_LOAD_BACK_TOKENS_PER_S] == 804 / 10.0
    assert values[sk.METRICS_HICACHE_HOST_TOTAL] == 2 * POOL
    # one copy of 804 tokens' KV (8B: 32 layers x 8 KV heads x 128 x 2 B x K,V) over PCIe at 25 GB/s
    assert 0 < values[sk.METRICS_LOAD_BACK_S_PER_TOKEN] < 1e-4


def test_without_hicache_the_evicted_prefix_is_recomputed(tmp_path: Path) -> None:
    with running_sim(ARGS, tmp_path / "plain.log") as url:
        for i in range(4):
            _gen(url, i)
        again = _gen(url, 0)
        text = httpx.get(f"{url}/metrics", timeout=10).text
    assert again["cached_tokens"] == 0
    assert "hicache_host" not in text and "load_back" not in text
    evicted = [s for s in parse_metrics(text).samples if s.name == "sglang:evicted_tokens_total"]
    assert evicted and evicted[0].labels["cache_type"] == "RadixCache" and evicted[0].value > 0


def test_load_back_counts_the_kv_pool_only() -> None:
    """A hybrid model's host pools each count the same logical tokens (pool="kv", "swa"):
    Pitwall reads the KV pool's."""
    from collectors.sglang.metrics_window import window

    def text(kv: int, swa: int) -> str:
        base = 'cache_type="HiRadixCache",tp_rank="0",pp_rank="0",dp_rank="0"'
        return ("# HELP sglang:load_back_tokens_total x\n# TYPE sglang:load_back_tokens_total counter\n"
                f'sglang:load_back_tokens_total{{{base},pool="kv"}} {kv}\n'
                f'sglang:load_back_tokens_total{{{base},pool="swa"}} {swa}\n')

    w0 = window(parse_metrics(text(100, 100)), None, 0.0)
    w1 = window(parse_metrics(text(300, 300)), w0.state, 10.0)
    assert w1.values[sk.METRICS_LOAD_BACK_TOKENS_PER_S] == 20.0
