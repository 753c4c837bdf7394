"""Behaviour model acceptance: cache hits, batching, saturation, memory, TP.

All figures come from what the simulator reports in *model* seconds (meta_info e2e_latency,
Decode-line gen throughput), so they do not depend on how busy this machine is.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from conftest import FAST, Sim, StartSim
from sim_forms import RETRACT, batch_fields

SYSTEM = "You are a helpful assistant for the operations team. " * 12  # ~150 tokens shared
# Where arrival timing matters, run slower: at speed 50 one wall millisecond of client jitter is
# 50 model milliseconds, enough to spread a "simultaneous" burst over several decode steps.
STEADY = ["--sim-speed", "5", "--sim-startup-s", "1"]


async def _fire(base: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as s:
        async def one(body: dict[str, Any]) -> dict[str, Any]:
            async with s.post(base + "/generate", json=body) as r:
                assert r.status == 200
                return dict(await r.json())
        return list(await asyncio.gather(*(one(b) for b in bodies)))


def fire(sim: Sim, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return asyncio.run(_fire(sim.base, bodies))


def body(text: str, max_new: int) -> dict[str, Any]:
    return {"text": text, "sampling_params": {"max_new_tokens": max_new}}


def prefill_cached(sim: Sim) -> float:
    return sum(f["#cached-token"] for f in batch_fields(sim.log(), "Prefill batch"))


def test_shared_prefix_hits_cache_and_not_without_radix(start_sim: StartSim) -> None:
    bodies = [body(SYSTEM + f"Question {i}: status?", 4) for i in range(6)]
    on = start_sim(*FAST)
    off = start_sim(*FAST, "--disable-radix-cache")
    # Sequential waves: the first request fills the tree, the next five hit it.
    on_out = [fire(on, [b])[0] for b in bodies]
    off_out = [fire(off, [b])[0] for b in bodies]
    hits_on = sum(o["meta_info"]["cached_tokens"] for o in on_out)
    assert hits_on > 5 * 100  # five requests x ~150 shared tokens
    assert prefill_cached(on) >= hits_on
    assert sum(o["meta_info"]["cached_tokens"] for o in off_out) == 0
    assert prefill_cached(off) == 0


def _level(start_sim: StartSim, n: int, *extra: str
           ) -> tuple[float, float, float, float, float]:
    """(mean decode batch, tokens/model-s, p99 e2e model-s, max queue, max usage), n at once."""
    sim = start_sim(*STEADY, "--max-total-tokens", "6000", "--decode-log-interval", "2", *extra)
    outs = fire(sim, [body(f"req {i} " + "lorem ipsum dolor sit amet " * 12, 60)
                      for i in range(n)])
    e2e = sorted(o["meta_info"]["e2e_latency"] for o in outs)
    decode = batch_fields(sim.log(), "Decode batch")
    prefill = batch_fields(sim.log(), "Prefill batch")
    batch = sum(d["#running-req"] for d in decode) / len(decode)
    queue = max(f["#queue-req"] for f in decode + prefill)
    usage = max(f["token usage"] for f in decode + prefill)
    return batch, n * 60 / e2e[-1], e2e[int(0.99 * (n - 1))], queue, usage


@pytest.mark.slow
def test_concurrency_raises_batch_and_throughput_until_saturation(start_sim: StartSim) -> None:
    # Pool 6000 tokens; a request holds ~70 prompt + 60 output tokens and reserves
    # 70 + 0.7 x 60 = 112 at admission, so ~50 fit at once: 2 and 16 fit, 160 must queue.
    b2, t2, p2, _, u2 = _level(start_sim, 2)
    b16, t16, p16, _, u16 = _level(start_sim, 16)
    b160, t160, p160, q160, u160 = _level(start_sim, 160)
    assert b2 < b16 < b160
    assert t2 < t16 < t160 * 1.5  # throughput grows, then flattens once the pool is full
    assert u2 < u16 < 0.6 < 0.8 < u160  # the pool saturates only at 160 ...
    assert q160 > 16  # ... where requests wait for memory
    assert p160 > 2 * p16


@pytest.mark.slow
def test_lower_mem_fraction_queues_and_retracts_earlier(start_sim: StartSim) -> None:
    # 8B on H100: 0.88 x 80 GB - 16 GB weights - 2 GB reserve -> ~400k tokens;
    # 0.25 x 80 GB -> 2 GB -> ~15k tokens for 48 requests x (450 + 200) tokens = 31k.
    bodies = [body(f"doc {i} " + "alpha beta gamma delta " * 100, 200) for i in range(48)]
    big = start_sim(*STEADY, "--decode-log-interval", "5")
    small = start_sim(*STEADY, "--decode-log-interval", "5", "--mem-fraction-static", "0.25")
    fire(big, bodies)
    fire(small, bodies)

    def pool(sim: Sim) -> int:
        line = next(x for x in sim.log().splitlines() if "max_total_num_tokens=" in x)
        return int(line.split("max_total_num_tokens=")[1].split(",")[0])

    def queued_decode_lines(sim: Sim) -> int:
        # A decode step runs only when no waiting request could be admitted, so a Decode line
        # with #queue-req > 0 is (apart from arrivals during that step) a request held back.
        return sum(1 for f in batch_fields(sim.log(), "Decode batch") if f["#queue-req"] > 0)

    def max_usage(sim: Sim) -> float:
        return max(f["token usage"] for f in batch_fields(sim.log(), "Decode batch"))

    def retractions(sim: Sim) -> int:
        return sum(1 for x in sim.log().splitlines()
                   if RETRACT.match(x.split("] ", 1)[-1]))

    assert pool(small) < pool(big)
    assert max_usage(big) < 0.2 < 0.8 < max_usage(small)
    assert queued_decode_lines(big) < queued_decode_lines(small)
    assert retractions(big) == 0 < retractions(small)


def test_tp2_changes_decode_step_time(start_sim: StartSim) -> None:
    def gen_tput(*extra: str) -> tuple[float, str]:
        sim = start_sim(*FAST, "--decode-log-interval", "10", *extra)
        fire(sim, [body("hello world", 41)])
        return batch_fields(sim.log(), "Decode batch")[-1]["gen throughput (token/s)"], sim.log()

    # One request, 40 decode steps: gen throughput = 1 / decode step time (model seconds).
    t1, _ = gen_tput("--tp-size", "1")
    t2, log2 = gen_tput("--tp-size", "2")
    assert t2 > t1 * 1.1  # 8B: half the weight bytes per GPU outweighs the all-reduces
    assert "TP0] Decode batch, " in log2
