"""Scheduler in-process (no HTTP): chunked prefill, max-running cap, lpm order, pool accounting."""

from __future__ import annotations

import asyncio
import io

from sim_forms import batch_fields

from simulator.costmodel import make_cost_model
from simulator.faults import Faults
from simulator.logfmt import LogWriter
from simulator.request import SimRequest
from simulator.scheduler import SchedConfig, Scheduler
from simulator.tokenizer import Generator


def make(**kw: object) -> tuple[Scheduler, io.StringIO]:
    cost = make_cost_model(gpu="h100", params=8e9, tp=1, quantization=None,
                           kv_cache_dtype="auto", cuda_graph=True, cuda_graph_max_bs=256,
                           torch_compile=False, torch_compile_max_bs=32)
    base: dict[str, object] = dict(
        max_total_tokens=100_000, max_running_requests=64, chunked_prefill_size=8192,
        max_prefill_tokens=16384, policy="fcfs", radix=True, decode_log_interval=1,
        speed=1000.0, seed=0, conservativeness=1.0, cost=cost, tags="", faults=Faults())
    base.update(kw)
    out = io.StringIO()

    def fatal(kind: str, detail: str) -> None:
        raise AssertionError(f"unexpected fatal {kind}")

    return Scheduler(SchedConfig(**base), LogWriter(stream=out), fatal), out  # type: ignore[arg-type]


def req(ids: list[int], max_new: int, rid: str = "r") -> SimRequest:
    return SimRequest(rid=rid, input_ids=ids, max_new_tokens=max_new,
                      gen=Generator(0, None, ids))


def run_all(s: Scheduler, reqs: list[SimRequest], timeout_s: float = 10.0) -> None:
    async def go() -> None:
        task = asyncio.get_running_loop().create_task(s.run())
        for r in reqs:
            s.submit(r)
        async with asyncio.timeout(timeout_s):
            while not all(r.finished for r in reqs):
                await asyncio.sleep(0.001)
        task.cancel()

    asyncio.run(go())


def test_chunked_prefill_logs_each_chunk() -> None:
    s, out = make(chunked_prefill_size=1000)
    r = req(list(range(10, 2510)), 3)  # 2500 prompt tokens -> chunks 1000 + 1000 + 500
    run_all(s, [r])
    pre = batch_fields(out.getvalue(), "Prefill batch")
    assert [p["#new-token"] for p in pre] == [1000, 1000, 500]
    assert r.output_ids and len(r.output_ids) == 3


def test_max_running_requests_caps_the_batch() -> None:
    s, out = make(max_running_requests=4)
    reqs = [req([i, i + 1, i + 2], 20, rid=str(i)) for i in range(0, 30, 3)]
    run_all(s, reqs)
    dec = batch_fields(out.getvalue(), "Decode batch")
    assert max(d["#running-req"] for d in dec) == 4
    assert max(d["#queue-req"] for d in dec) > 0


def test_lpm_admits_longest_prefix_match_first() -> None:
    s, _ = make(policy="lpm", max_running_requests=1)
    shared = list(range(100, 400))
    warm = req(shared + [1], 1, rid="warm")
    run_all(s, [warm])
    order: list[str] = []
    s.on_first = lambda r: order.append(r.rid)
    other = req(list(range(1000, 1300)), 1, rid="cold")
    hit = req(shared + [2], 1, rid="hot")
    run_all(s, [other, hit])  # both queued together; lpm picks the cached one first
    assert order == ["hot", "cold"]
    assert hit.cached_tokens == 300 and other.cached_tokens == 0


def test_pool_accounting_returns_to_cache_only() -> None:
    s, _ = make()
    reqs = [req(list(range(i * 1000, i * 1000 + 50)), 10, rid=str(i)) for i in range(5)]
    run_all(s, reqs)
    # Finished requests leave their tokens in the radix tree, all unlocked (evictable).
    assert s.kv.private_total == 0
    assert s.kv.tree.total_size == s.kv.tree.evictable_size > 0
    assert s.num_used() == 0 and s.token_usage() == 0.0


def test_retraction_under_a_tiny_pool_keeps_accounting_exact() -> None:
    # 40 requests x (30 prompt + 60 output) = 3600 tokens into a 600-token pool: admission is
    # optimistic (new_token_ratio 0.7), so decode overflows and retracts, repeatedly.
    s, out = make(max_total_tokens=600)
    seen: list[tuple[int, int]] = []
    s.on_stats = lambda sch: seen.append((sch.kv.used(), sch.kv.private_total))
    reqs = [req([7, 7, 7] + list(range(i * 100, i * 100 + 27)), 60, rid=str(i))
            for i in range(40)]
    run_all(s, reqs, timeout_s=30)
    assert all(len(r.output_ids) == 60 for r in reqs)
    assert s.retracted_total > 0 and "KV cache pool is full. Retract requests." in out.getvalue()
    assert sum(r.num_retractions for r in reqs) == s.retracted_total
    assert all(0 <= used <= 600 and priv >= 0 for used, priv in seen)
    assert s.kv.private_total == 0 and s.kv.tree.total_size == s.kv.tree.evictable_size
