"""What a trace looks like, in figures a preview draws and a person reads before replaying it.

- `requests`, `duration_s`, `rate_rps` (mean), `peak_rps` (the busiest `bucket_s` window, per
  second) and `arrivals` (requests per bucket, for the arrival-rate chart);
- `input_tokens` / `output_tokens`: p50, p90, p99, max and mean; `histogram_*`: counts per
  power-of-two bucket (for the length charts);
- `prefix_reuse_share`: the share of input tokens in prefix blocks an earlier request already
  sent (what a radix cache could reuse, from the trace's `hash_ids`; None without them);
  `server_cached_share`: the share the server itself reported as cached (`cached_tokens`), where
  the source says;
- `sessions`, `turns_mean`, `turns_max`; `apis` and `statuses`: counts by value.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from collectors.trace.model import TraceRequest


def _lengths(values: Sequence[int]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None, "mean": None}
    arr = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(arr.max()), "mean": float(arr.mean())}


def _histogram(values: Sequence[int]) -> dict[str, int]:
    """Counts per power-of-two bucket, keyed by the bucket's lower bound ("0", "1", "2", "4", ...)."""
    counts: Counter[int] = Counter(0 if v <= 0 else 2 ** int(math.log2(v)) for v in values)
    return {str(k): counts[k] for k in sorted(counts)}


def prefix_reuse(requests: Sequence[TraceRequest], block_size: int | None) -> float | None:
    """Share of input tokens in leading blocks some earlier request already sent. A hash id names
    a block together with everything before it (Mooncake's ids, and the chain hashes Pitwall
    derives from token ids), so a seen id means a seen prefix."""
    if not block_size or not any(r.hash_ids for r in requests):
        return None
    seen: set[int] = set()
    reused = total = 0
    for r in requests:
        total += r.input_tokens
        ids = r.hash_ids or []
        k = 0
        while k < len(ids) and ids[k] in seen:
            k += 1
        reused += min(k * block_size, r.input_tokens)
        seen.update(ids[k:])
    return reused / total if total else None


def summarise(requests: Sequence[TraceRequest], block_size: int | None, bucket_s: float | None = None) -> dict[str, Any]:
    n = len(requests)
    duration = requests[-1].arrival_s if n else 0.0
    bucket = bucket_s or max(1.0, duration / 120)
    buckets: Counter[int] = Counter(int(r.arrival_s // bucket) for r in requests)
    arrivals = [[round(k * bucket, 6), buckets.get(k, 0)] for k in range(int(duration // bucket) + 1)] if n else []
    ins = [r.input_tokens for r in requests]
    outs = [r.output_tokens for r in requests if r.output_tokens is not None]
    cached = [(r.cached_tokens, r.input_tokens) for r in requests if r.cached_tokens is not None]
    sessions: Counter[str] = Counter(r.session for r in requests if r.session is not None)
    return {
        "requests": n,
        "duration_s": duration,
        "rate_rps": n / duration if duration > 0 else None,
        "bucket_s": bucket,
        "peak_rps": max(buckets.values()) / bucket if buckets else None,
        "arrivals": arrivals,
        "input_tokens": _lengths(ins),
        "output_tokens": _lengths(outs),
        "histogram_input": _histogram(ins),
        "histogram_output": _histogram(outs),
        "prefix_reuse_share": prefix_reuse(requests, block_size),
        "server_cached_share": (sum(c for c, _ in cached) / sum(i for _, i in cached)) if cached and sum(i for _, i in cached) else None,
        "sessions": len(sessions),
        "turns_mean": (sum(sessions.values()) / len(sessions)) if sessions else None,
        "turns_max": max(sessions.values()) if sessions else None,
        "apis": dict(Counter(r.api or "unspecified" for r in requests)),
        "statuses": dict(Counter(r.status for r in requests)),
    }
