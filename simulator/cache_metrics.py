"""The radix cache's and HiCache's /metrics families, as SGLang 0.5.23 writes them.

RadixCacheMetricsCollector (labels cache_type, tp_rank, pp_rank, dp_rank; ``cache_type`` is the
cache's class, ``RadixCache`` or ``HiRadixCache``): evicted_tokens_total and
eviction_duration_seconds for every radix cache; with --enable-hierarchical-cache also
hicache_backup_{tokens,bytes}_total / _duration_seconds, load_back_{tokens,bytes}_total /
_duration_seconds (``pool`` label on the token counters) and hicache_dropped_tokens_total; the
scheduler's hicache_host_used_tokens / hicache_host_total_tokens gauges. Under SGLang's
multiprocess registry each shows from its first write, so they are created then (LlmMetrics.lazy).
"""

from __future__ import annotations

from simulator.kvpool import KvPool
from simulator.metrics import LlmMetrics

#: 0.5.23's RadixCacheMetricsCollector: its labels, bucket lists and (modelled) eviction pass time
RADIX_LABELS = ["cache_type", "tp_rank", "pp_rank", "dp_rank"]
EVICTION_BUCKETS = [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.02, 0.03, 0.04,
                    0.05, 0.1, 0.2, 0.5, 1.0]  # eviction and load-back durations
BACKUP_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0]
EVICTION_PASS_S = 0.0005  # modelled: a pass walks the tree, no copy (write_through copied already)


def record(m: LlmMetrics, kv: KvPool, dp: int) -> None:
    """The radix cache's own families (0.5.23 RadixCacheMetricsCollector: labels cache_type,
    tp_rank, pp_rank, dp_rank; shown from their first write) and HiCache's host pool gauges."""
    host = kv.host
    base = {"cache_type": "HiRadixCache" if host is not None else "RadixCache", "tp_rank": "0",
            "pp_rank": "0", "dp_rank": str(dp)}
    passes, kv.tree.evict_passes = kv.tree.evict_passes, []
    for n in passes:
        m.lazy("sglang:evicted_tokens", "counter", "The number of device KV token slots freed by eviction.",
               RADIX_LABELS).labels(**base).inc(n)
        m.lazy("sglang:eviction_duration_seconds", "histogram", "End-to-end time of a device eviction pass "
               "in seconds.", RADIX_LABELS, EVICTION_BUCKETS).labels(**base).observe(EVICTION_PASS_S)
    if host is None:
        return
    sched = m.labels_of["sglang:num_running_reqs"]
    m.lazy("sglang:hicache_host_used_tokens", "gauge", "Number of tokens currently used in the host KV cache.",
           sched)
    m.lazy("sglang:hicache_host_total_tokens", "gauge", "Total capacity of the host KV cache in tokens.", sched)
    m.child("sglang:hicache_host_used_tokens", dp).set(host.used())
    m.child("sglang:hicache_host_total_tokens", dp).set(host.capacity)
    backups, loads, dropped = host.take()
    pool = {**base, "pool": "kv"}
    for copies, tokens, nbytes, seconds, buckets in (
            (backups, "sglang:hicache_backup_tokens", "sglang:hicache_backup_bytes",
             "sglang:hicache_backup_duration_seconds", BACKUP_BUCKETS),
            (loads, "sglang:load_back_tokens", "sglang:load_back_bytes", "sglang:load_back_duration_seconds",
             EVICTION_BUCKETS)):
        for c in copies:
            m.lazy(tokens, "counter", "Tokens copied between device and host memory, by host pool.",
                   [*RADIX_LABELS, "pool"]).labels(**pool).inc(c.tokens)
            m.lazy(nbytes, "counter", "Bytes copied between device and host memory.",
                   RADIX_LABELS).labels(**base).inc(c.nbytes)
            m.lazy(seconds, "histogram", "Time of one copy between device and host memory in seconds.",
                   RADIX_LABELS, buckets).labels(**base).observe(c.seconds)
    if dropped:
        m.lazy("sglang:hicache_dropped_tokens", "counter", "The number of logical device KV tokens destroyed "
               "without a host backup.", [*RADIX_LABELS, "reason", "pool"]).labels(
            **base, reason="host_pressure", pool="kv").inc(dropped)

