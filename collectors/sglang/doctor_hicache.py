"""SGLang's HiCache doctor rules (--enable-hierarchical-cache): the host tier pays while loading a
token back from host memory costs less than recomputing it, and while the host pool has room.

Evidence (collectors/sglang/metrics.py keys): the host pool's used and total tokens, the load-back
copy seconds a token (Δ load_back_duration_seconds_sum ÷ Δ load_back_tokens_total), and what a
prefill token costs to recompute (the scheduler log's input throughput, whose inverse is an upper
bound on it: the log's throughput counts the idle time between prefills, so the rule fires late,
never early). Pure functions, each tested firing and not firing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collectors.tuning import Evidence, Finding
from storage import series_keys as sk

HOST_KEYS = (sk.METRICS_HICACHE_HOST_USED, sk.METRICS_HICACHE_HOST_TOTAL)
LOAD_KEYS = (sk.METRICS_LOAD_BACK_S_PER_TOKEN,)
PREFILL_KEYS = (sk.LOG_INPUT_THROUGHPUT_TOK_S,)
SERIES = (*HOST_KEYS, *LOAD_KEYS, *PREFILL_KEYS)
HOST_FULL = 0.95  # used / total of the host pool, median over the window
MIN_SAMPLES = 5


def _host_fill(ev: Evidence) -> tuple[float, int] | None:
    used, total = ev.series.get(HOST_KEYS[0]), ev.series.get(HOST_KEYS[1])
    if used is None or total is None or used.size < MIN_SAMPLES or not total.size or float(np.median(total)) <= 0:
        return None
    return float(np.median(used)) / float(np.median(total)), int(used.size)


def _costs(ev: Evidence) -> tuple[float, float, int] | None:
    """(load-back seconds a token p50, recompute seconds a token p50, samples), or None."""
    load, tput = ev.series.get(LOAD_KEYS[0]), ev.series.get(PREFILL_KEYS[0])
    if load is None or tput is None or load.size < MIN_SAMPLES:
        return None
    tput = tput[tput > 0]
    if tput.size < MIN_SAMPLES:
        return None
    return float(np.median(load)), 1.0 / float(np.median(tput)), int(load.size)


def rule_hicache_host_full(ev: Evidence) -> Finding | None:
    """The host pool is full: what the device evicts pushes older prefixes out of host memory."""
    if not ev.arg("enable_hierarchical_cache"):
        return None
    got = _host_fill(ev)
    if got is None or got[0] < HOST_FULL:
        return None
    ratio, size = ev.arg("hicache_ratio"), ev.arg("hicache_size")
    # --hicache-size (GB) overrides the ratio: double whichever sizes the pool (the ratio's default is 2.0)
    flags: dict[str, Any] = ({"hicache-size": int(size) * 2} if isinstance(size, int | float) and size > 0
                             else {"hicache-ratio": round(float(ratio if isinstance(ratio, int | float) else 2.0) * 2, 2)})
    return Finding("hicache_host_full", "HiCache's host pool is full",
                   f"host pool {got[0] * 100:.0f} % full (median over {got[1]} samples, fires at "
                   f"{HOST_FULL * 100:.0f} %); hicache-ratio {ratio if ratio is not None else '2.0 (default)'}, "
                   f"hicache-size {size or 'unset'}",
                   "Give the host tier more memory (--hicache-ratio, or --hicache-size in GB) if the host has it; "
                   "prefixes pushed out of host memory are recomputed.", flags)


def rule_hicache_load_back_slow(ev: Evidence) -> Finding | None:
    """Loading a token back from host costs more than recomputing it: host hits slow prefill down."""
    if not ev.arg("enable_hierarchical_cache"):
        return None
    got = _costs(ev)
    if got is None or got[0] <= got[1]:
        return None
    load, recompute, n = got
    return Finding("hicache_load_back_slow", "Host-tier hits cost more than recomputing them",
                   f"loading a token back from host memory takes {load * 1e6:.1f} µs (p50 over {n} samples), "
                   f"recomputing one at most {recompute * 1e6:.1f} µs (the log's input throughput)",
                   f"Check the copy path (--hicache-io-backend, now {ev.arg('hicache_io_backend') or '?'}; "
                   "--hicache-mem-layout), or relaunch without --enable-hierarchical-cache and compare TTFT on "
                   "the Compare page.", {})


RULES = (rule_hicache_host_full, rule_hicache_load_back_slow)


def checked(ev: Evidence) -> list[str]:
    """The HiCache rules' readings, for a server whose launch enables it."""
    if not ev.arg("enable_hierarchical_cache"):
        return []
    fill = _host_fill(ev)
    costs = _costs(ev)
    return [
        (f"HiCache host pool: {fill[0] * 100:.0f} % full (fires at {HOST_FULL * 100:.0f} %)." if fill
         else "HiCache host pool: no host-pool figures in the window."),
        (f"HiCache load-back: {costs[0] * 1e6:.1f} µs a token against at most {costs[1] * 1e6:.1f} µs to "
         "recompute one (fires when loading costs more)." if costs
         else "HiCache load-back: no host hits in the window."),
    ]
