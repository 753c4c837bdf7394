"""What the Server page charts: its panels, the series each plots (metric key and legend label) and
the panel's unit. The Server page (dashboard/services/views/timeseries.py reads the series) and the
scorecard export's charts (export/charts.py, legend labels) both take them from here.

Metric keys are the collectors' contract (storage/series_keys.py names each):

| panel | unit | series |
|---|---|---|
| latency | s | canary.ttft_s (client-side), metrics.ttft_p50/p95/p99_s (server histogram estimate); probe TTFT p50/p99 per bucket from ProbeRequest rows (E2E lives on the scorecard: on one axis it would flatten TTFT) |
| throughput | tok/s | log.gen_throughput_tok_s, log.input_throughput_tok_s (fallback metrics.gen_throughput_tok_s) |
| batch | count | log.running_req, log.queue_req (fallback metrics.num_running_reqs / num_queue_reqs) |
| token_usage | ratio | log.token_usage (fallback metrics.token_usage) |
| cache_hit | ratio | log.cache_hit_rate (fallback metrics.cache_hit_rate) |
| spec | tok/step | log.accept_len (fallback metrics.spec_accept_length): shown only for a server that speculates |
| hicache | tok/s | metrics.cache_hit_tokens_per_s.device / .host / .storage, metrics.load_back_tokens_per_s: shown only for a server with --enable-hierarchical-cache |
| hicache_pool | count | metrics.hicache_host_used_tokens, metrics.hicache_host_total_tokens (same) |
| pd | count | PD queues: log.bootstrap_req, log.inflight_req (prefill), log.prealloc_req, log.transfer_req, log.retracted_queue_req (decode; the retracted queue is in the log only); fallback metrics.num_prefill_bootstrap_queue_reqs, num_prefill_inflight_queue_reqs, num_decode_prealloc_queue_reqs, num_decode_transfer_queue_reqs: shown only for a prefill or decode server |
| pd_transfer | s | metrics.kv_transfer_latency_p50_s / _p99_s (prefill), metrics.stage_latency_mean_s.decode_transferred (decode: the wait for the KV) (same) |
| router | req/s | metrics.router_requests_per_s, router_errors_per_s, router_retries_per_s, router_cb_opens_per_s: shown only for a router |
| priority | count | metrics.num_running_reqs_by_priority.<p>, metrics.num_queue_reqs_by_priority.<p> for each priority stored: shown only for a server with --enable-priority-scheduling (`priority_panel`) |
| gpu_util / gpu_mem / gpu_power / gpu_temp | ratio / bytes / W / °C | gpu.<i>.util_ratio, mem_used_bytes, power_w, temp_c |

Units are storage/units.py keys, the unit storage/series_keys.py gives the panel's keys. A GPU
panel has one series per GPU entry (dashboard/services/views/timeseries.py gpu_panels).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage import series_keys as sk


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    unit: str  # storage/units.py: the unit storage/series_keys.py gives the panel's keys
    series: tuple[tuple[str, str], ...]  # (metric key, legend label)
    fallback: tuple[tuple[str, str], ...] = ()  # used when none of `series` has data


def _one(key: str, title: str, keys: tuple[str, str], label: str, fallback_label: str | None = None) -> Panel:
    """A one-series panel: the log's key, or the /metrics key when the log has none."""
    log_key, metrics_key = keys
    return Panel(key, title, sk.unit_of(log_key), ((log_key, label),), ((metrics_key, fallback_label or label),))


PANELS: tuple[Panel, ...] = (
    Panel(
        "latency",
        "Latency: canary and server histogram estimate",
        sk.unit_of(sk.CANARY_TTFT_S),
        (
            (sk.CANARY_TTFT_S, "canary TTFT"),
            (sk.hist_key("ttft", "p50"), "server TTFT p50 (est.)"),
            (sk.hist_key("ttft", "p95"), "server TTFT p95 (est.)"),
            (sk.hist_key("ttft", "p99"), "server TTFT p99 (est.)"),
        ),
    ),
    Panel(
        "throughput",
        "Throughput",
        sk.unit_of(sk.LOG_GEN_THROUGHPUT_TOK_S),
        ((sk.LOG_GEN_THROUGHPUT_TOK_S, "output tok/s"), (sk.LOG_INPUT_THROUGHPUT_TOK_S, "input tok/s")),
        ((sk.METRICS_GEN_THROUGHPUT_TOK_S, "output tok/s (metrics)"),),
    ),
    Panel(
        "batch",
        "Running batch and queue",
        sk.unit_of(sk.LOG_RUNNING_REQ),
        ((sk.LOG_RUNNING_REQ, "running"), (sk.LOG_QUEUE_REQ, "queued")),
        ((sk.METRICS_NUM_RUNNING_REQS, "running"), (sk.METRICS_NUM_QUEUE_REQS, "queued")),
    ),
    _one("token_usage", "KV cache token usage", (sk.LOG_TOKEN_USAGE, sk.METRICS_TOKEN_USAGE), "token usage"),
    _one("cache_hit", "Radix cache hit rate", (sk.LOG_CACHE_HIT_RATE, sk.METRICS_CACHE_HIT_RATE), "cache hit rate"),
    _one("spec", "Speculative decoding: tokens a step", (sk.LOG_ACCEPT_LEN, sk.METRICS_SPEC_ACCEPT_LENGTH),
         "accept length", "accept length (metrics)"),
    Panel("hicache", "HiCache: prefix hits by tier", sk.unit_of(sk.METRICS_LOAD_BACK_TOKENS_PER_S),
          tuple((sk.pattern_prefix(sk.METRICS_CACHE_HIT_BY_SOURCE) + tier, f"hits from {where}")
                for tier, where in (("device", "GPU memory"), ("host", "host memory"), ("storage", "storage")))
          + ((sk.METRICS_LOAD_BACK_TOKENS_PER_S, "loaded back from host"),)),
    Panel("hicache_pool", "HiCache host pool", sk.unit_of(sk.METRICS_HICACHE_HOST_USED),
          ((sk.METRICS_HICACHE_HOST_USED, "used"), (sk.METRICS_HICACHE_HOST_TOTAL, "capacity"))),
    Panel("pd", "PD queues", sk.unit_of(sk.LOG_BOOTSTRAP_REQ),
          ((sk.LOG_BOOTSTRAP_REQ, "bootstrap (prefill)"), (sk.LOG_INFLIGHT_REQ, "KV in flight (prefill)"),
           (sk.LOG_PREALLOC_REQ, "prealloc (decode)"), (sk.LOG_TRANSFER_REQ, "awaiting KV (decode)"),
           (sk.LOG_RETRACTED_QUEUE_REQ, "retracted (decode)")),
          ((sk.METRICS_PD_BOOTSTRAP_QUEUE, "bootstrap (prefill)"), (sk.METRICS_PD_INFLIGHT_QUEUE, "KV in flight (prefill)"),
           (sk.METRICS_PD_PREALLOC_QUEUE, "prealloc (decode)"), (sk.METRICS_PD_TRANSFER_QUEUE, "awaiting KV (decode)"))),
    Panel("pd_transfer", "KV transfer", sk.unit_of(sk.METRICS_KV_TRANSFER_LAST_S),
          ((sk.hist_key("kv_transfer_latency", "p50"), "transfer p50 (prefill, est.)"),
           (sk.hist_key("kv_transfer_latency", "p99"), "transfer p99 (prefill, est.)"),
           (sk.hist_key("stage_latency", "mean") + ".decode_transferred", "waiting for the KV (decode)"))),
    Panel("router", "Router: requests, errors, retries", sk.unit_of(sk.METRICS_ROUTER_REQUESTS_PER_S),
          ((sk.METRICS_ROUTER_REQUESTS_PER_S, "requests"), (sk.METRICS_ROUTER_ERRORS_PER_S, "errors"),
           (sk.METRICS_ROUTER_RETRIES_PER_S, "retries"), (sk.METRICS_ROUTER_CB_OPENS_PER_S, "breakers opened"))),
)

#: the per-priority queue keys, running first (patterns with `<priority>`)
PRIORITY_KEYS: tuple[tuple[str, str], ...] = ((sk.METRICS_NUM_RUNNING_BY_PRIORITY, "running"),
                                              (sk.METRICS_NUM_QUEUE_BY_PRIORITY, "queued"))


def priority_of(key: str) -> str | None:
    """The priority a per-priority queue key is about (`metrics.num_queue_reqs_by_priority.5` -> `5`)."""
    for pattern, _ in PRIORITY_KEYS:
        prefix = sk.pattern_prefix(pattern)
        if key.startswith(prefix) and sk.keys_matching(pattern, [key]):
            return key[len(prefix):]
    return None


def priority_panel(priorities: Sequence[str]) -> Panel:
    """Running and queued requests of each priority (the engine's breakdown of its queue gauges under
    --enable-priority-scheduling), a series per priority and state."""
    series = tuple((sk.pattern_prefix(pattern) + p, f"{state}, priority {p}")
                   for p in priorities for pattern, state in PRIORITY_KEYS)
    return Panel("priority", "Running and queued by priority", sk.unit_of(sk.METRICS_NUM_RUNNING_REQS), series)


GPU_PANELS: tuple[tuple[str, str, str, str], ...] = (
    ("gpu_util", "GPU utilisation", sk.GPU_FIELDS["util_ratio"][0], "util_ratio"),
    ("gpu_mem", "GPU memory used", sk.GPU_FIELDS["mem_used_bytes"][0], "mem_used_bytes"),
    ("gpu_power", "GPU power", sk.GPU_FIELDS["power_w"][0], "power_w"),
    ("gpu_temp", "GPU temperature", sk.GPU_FIELDS["temp_c"][0], "temp_c"),
)
