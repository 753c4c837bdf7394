"""The one ALIAS table: SGLang metric names of every era -> Pitwall keys, and how ranks combine.

Name eras (SGLang's `/metrics` from 0.3.6 on): every name is tried with the `sglang:`
prefix SGLang writes and the `sglang_` prefix some exporters re-publish under; counters are matched
with and without `_total` (0.4.7's `num_aborted_requests` became `num_aborted_requests_total` in
0.5.3); renamed metrics list their names newest first and the first one present wins
(`inter_token_latency_seconds` over 0.3.6-0.4.4's `time_per_output_token_seconds`;
`queue_time_seconds` / 0.5.2's `queue_time_s` histograms over 0.4.6-0.5.2's
`avg_request_queue_latency` gauge, which feeds `queue_time_mean_s` directly).

Rank aggregation (labels `tp_rank, pp_rank, moe_ep_rank` mark *replicas*: with
`--enable-metrics-for-all-schedulers` every TP/PP/EP rank of one DP group reports the same batch):

- `sum` (counts, token totals, counters, histogram buckets): series are grouped by every label
  except the replica labels; within a group the max is taken (replicas would double-count), and
  groups are summed (dp_rank, engine_type, is_streaming, cache_source, priority all add up).
- `mean` (0-1 ratios, per-batch averages): the mean over every series.

Priority scheduling (`--enable-priority-scheduling`): every scheduler gauge gains a `priority`
label. SGLang 0.5.23 writes the queue gauges (`num_running_reqs`, `num_queue_reqs`) twice in one
family: the total under `priority=""` and one series per priority beside it
(`_log_gauge_queue_count`), so summing them would double the queue. Where a gauge family has a
`priority=""` series and others, the `""` series are the total and the rest its breakdown
(`split_priority`), which feeds `metrics.num_queue_reqs_by_priority.<priority>`; the main branch
moved the breakdown to `num_queue_reqs_by_priority` / `num_running_reqs_by_priority` families of
their own, read the same way (their values win when both forms are there). Histograms and counters
carry the request's priority (`""` when it set none): each request is counted once, so they add up.

Diffusion server (`sglang serve`, 0.5.21+, labels `role, replica`): `diffusion_*` aliases below.
Warm-up requests are left out of the user figures (`exclude` drops series labelled
`is_warmup="true"`); the stage histogram is split by its `stage` label into one key per stage
(`metrics.diffusion_stage_p99_s.DenoisingStage`; the `DenoisingStep` pseudo-stage is seconds
per denoising step; an earlier form named it `diffusion_stage_latency_seconds`). Batch size is
a count, so its keys carry no `_s`. The LoRA gauges count adapters and modules;
`diffusion_lora_module_active{module}` (created once a module first had an adapter) becomes one
0-1 key per module (`metrics.diffusion_lora_module_active.transformer`).

Per-rank detail keeps, for gauges, one value per rank when a rank label takes several values:
`metrics.num_running_reqs.dp1`, `metrics.token_usage.tp3` (only the rank labels that vary).
"""

from __future__ import annotations

from collections.abc import Iterable

from collectors import promalias
from collectors.promalias import Alias, AliasTable, LabelKey
from collectors.promalias import excluded as excluded
from collectors.promalias import label_key as label_key
from collectors.promalias import pitwall_keys as pitwall_keys
from collectors.promalias import split_priority as split_priority
from storage import series_keys as sk

PREFIXES: tuple[str, ...] = ("sglang:", "sglang_")
#: the router's (SGLang Model Gateway) families: `smg_*` from sglang-router 0.3.0, `sgl_router_*`
#: up to 0.2.4; their aliases name them whole
ROUTER_PREFIXES: tuple[str, ...] = ("smg_", "sgl_router_")
REPLICA_LABELS: frozenset[str] = frozenset({"tp_rank", "pp_rank", "moe_ep_rank"})
#: rank label -> detail-suffix letters, in suffix order
RANK_LABELS: tuple[tuple[str, str], ...] = (
    ("dp_rank", "dp"),
    ("tp_rank", "tp"),
    ("pp_rank", "pp"),
    ("moe_ep_rank", "ep"),
)


_NO_WARMUP = (("is_warmup", "true"),)

ALIASES: tuple[Alias, ...] = (
    # gauges -> metrics.<key>
    Alias(
        "num_running_reqs", "gauge", ("num_running_reqs",), "sum", "requests in the running batch"
    ),
    Alias("num_queue_reqs", "gauge", ("num_queue_reqs",), "sum", "requests waiting in the queue"),
    Alias("num_used_tokens", "gauge", ("num_used_tokens",), "sum", "KV-cache tokens in use"),
    Alias(
        "max_total_num_tokens", "gauge", ("max_total_num_tokens",), "sum", "KV-cache token capacity"
    ),
    Alias("token_usage", "gauge", ("token_usage",), "mean", "KV-cache usage, 0-1"),
    Alias(
        "gen_throughput_tok_s", "gauge", ("gen_throughput",), "sum", "decode tok/s at the last log"
    ),
    Alias(
        "cache_hit_rate",
        "gauge",
        ("cache_hit_rate",),
        "mean",
        "radix hit rate, 0-1 (0.4.4+: last batch)",
    ),
    Alias("num_grammar_queue_reqs", "gauge", ("num_grammar_queue_reqs",), "sum", "grammar queue"),
    Alias("num_paused_reqs", "gauge", ("num_paused_reqs",), "sum", "paused requests"),
    Alias("num_retracted_reqs", "gauge", ("num_retracted_reqs",), "sum", "retracted requests now"),
    Alias(
        "spec_accept_length", "gauge", ("spec_accept_length",), "mean", "speculative accept length"
    ),
    Alias("num_running_reqs_by_priority", "gauge", ("num_running_reqs_by_priority",), "sum",
          "running requests per priority", split="priority"),
    Alias("num_queue_reqs_by_priority", "gauge", ("num_queue_reqs_by_priority",), "sum",
          "queued requests per priority", split="priority"),
    Alias("spec_num_draft_tokens", "gauge", ("spec_num_draft_tokens",), "mean",
          "draft tokens a verify forward checks (0.5.13+; the tier in use when adaptive)"),
    Alias("spec_verify_calls_per_s", "counter", ("spec_verify_calls",), "sum",
          "speculative verify forwards/s, summed over requests (0.5.13+)"),
    Alias("spec_accept_rate", "gauge", ("spec_accept_rate",), "mean", "speculative accept rate, 0-1 (0.5.4+)"),
    Alias("utilization", "gauge", ("utilization",), "mean", "scheduler utilisation, 0-1"),
    Alias("hicache_host_used_tokens", "gauge", ("hicache_host_used_tokens",), "sum",
          "tokens held in HiCache's host pool"),
    Alias("hicache_host_total_tokens", "gauge", ("hicache_host_total_tokens",), "sum",
          "HiCache host pool capacity, tokens"),
    Alias(
        "http_requests_active", "gauge", ("http_requests_active",), "sum", "HTTP requests in flight"
    ),
    Alias(
        "queue_time_mean_s",
        "gauge",
        ("avg_request_queue_latency",),
        "mean",
        "mean queue time (0.4.6-0.5.2)",
    ),
    # counters -> metrics.<key> as per-second rates
    Alias("prompt_tokens_per_s", "counter", ("prompt_tokens",), "sum", "prompt tokens/s"),
    Alias(
        "generation_tokens_per_s", "counter", ("generation_tokens",), "sum", "generated tokens/s"
    ),
    Alias("cached_tokens_per_s", "counter", ("cached_tokens",), "sum", "prefix-cache hit tokens/s"),
    Alias("cache_hit_tokens_per_s", "counter", ("cached_tokens",), "sum",
          "prefix-cache hit tokens/s by tier (cache_source: device, host, storage; 0.5.9+)", split="cache_source"),
    # HiCache (--enable-hierarchical-cache) and the radix cache's own counters (0.5.2+)
    # the token counters count per host pool (kv, swa, mamba: one logical token in each of a
    # hybrid model's pools); Pitwall reads the KV pool's, which every model has
    Alias("load_back_tokens_per_s", "counter", ("load_back_tokens",), "sum", "tokens loaded back from host/s",
          only=(("pool", "kv"),)),
    Alias("evicted_tokens_per_s", "counter", ("evicted_tokens",), "sum", "device KV tokens evicted/s"),
    Alias("hicache_backup_tokens_per_s", "counter", ("hicache_backup_tokens",), "sum",
          "tokens backed up to host/s", only=(("pool", "kv"),)),
    Alias("requests_per_s", "counter", ("num_requests",), "sum", "finished requests/s"),
    Alias(
        "aborted_requests_per_s", "counter", ("num_aborted_requests",), "sum", "aborted requests/s"
    ),
    Alias(
        "retracted_requests_per_s", "counter", ("num_retracted_requests",), "sum", "retractions/s"
    ),
    # histograms -> metrics.<stem>_p50_s / _p95_s / _p99_s / _mean_s / _clamped / _window_count
    Alias("ttft", "histogram", ("time_to_first_token_seconds",), "sum", "time to first token"),
    Alias(
        "itl",
        "histogram",
        ("inter_token_latency_seconds", "time_per_output_token_seconds"),
        "sum",
        "inter-token latency",
    ),
    Alias(
        "e2e", "histogram", ("e2e_request_latency_seconds",), "sum", "end-to-end request latency"
    ),
    Alias(
        "queue_time",
        "histogram",
        ("queue_time_seconds", "queue_time_s"),
        "sum",
        "time in the queue",
    ),
    Alias(
        "tpot", "histogram", ("request_time_per_output_token_seconds",), "sum", "per-request TPOT"
    ),
    Alias("load_back", "histogram", ("load_back_duration_seconds",), "sum",
          "one HiCache load-back copy, host to device"),
    # diffusion server (runtime/observability/metrics.py, 0.5.21+)
    Alias("diffusion_num_queue_reqs", "gauge", ("diffusion_num_queue_reqs",), "sum",
          "image requests waiting for first dispatch"),
    Alias("diffusion_num_running_reqs", "gauge", ("diffusion_num_running_reqs",), "sum",
          "image requests dispatched, not completed"),
    Alias("diffusion_lora_loaded_adapters", "gauge", ("diffusion_lora_loaded_adapters",), "sum",
          "loaded LoRA adapters"),
    Alias("diffusion_lora_active_modules", "gauge", ("diffusion_lora_active_modules",), "sum",
          "pipeline modules with an active LoRA adapter"),
    Alias("diffusion_lora_active_adapters", "gauge", ("diffusion_lora_active_adapters",), "sum",
          "unique active LoRA adapters"),
    Alias("diffusion_lora_module_active", "gauge", ("diffusion_lora_module_active",), "mean",
          "1 when the module has an active LoRA adapter (0-1 over replicas)", split="module"),
    Alias("diffusion_requests_per_s", "counter", ("diffusion_requests",), "sum",
          "completed user image requests/s (warm-up excluded)", _NO_WARMUP),
    Alias("diffusion_failed_requests_per_s", "counter", ("diffusion_requests",), "sum",
          "failed user image requests/s", (*_NO_WARMUP, ("status", "success"))),
    Alias("diffusion_e2e", "histogram", ("diffusion_request_latency_seconds",), "sum",
          "image request latency, scheduler acceptance to completion", _NO_WARMUP),
    Alias("diffusion_queue_time", "histogram", ("diffusion_queue_time_seconds",), "sum",
          "image request time until first dispatch", _NO_WARMUP),
    Alias("diffusion_batch_size", "histogram", ("diffusion_generation_batch_size",), "sum",
          "requests per dispatched batch", unit=""),
    Alias("diffusion_stage", "histogram",
          ("diffusion_stage_host_latency_seconds", "diffusion_stage_latency_seconds"), "sum",
          "host time per pipeline stage (DenoisingStep: per step)", split="stage"),
    Alias("http_requests_per_s", "counter", ("http_requests",), "sum", "HTTP requests/s"),
    # PD disaggregation (--disaggregation-mode prefill|decode, srt/disaggregation): the queues each
    # role holds a request in, the prefill side's per-request KV transfer (0.5.23 histograms; the
    # same names were most-recent gauges before SGLang PR 19009, 2026-02), both sides' failures
    Alias("num_prefill_bootstrap_queue_reqs", "gauge",
          ("num_prefill_bootstrap_queue_reqs", "num_prefill_prealloc_queue_reqs"), "sum",
          "PD prefill: requests waiting for their decode server's handshake (older: prealloc queue)"),
    Alias("num_prefill_inflight_queue_reqs", "gauge", ("num_prefill_inflight_queue_reqs",), "sum",
          "PD prefill: requests whose KV cache is being sent"),
    Alias("num_decode_prealloc_queue_reqs", "gauge", ("num_decode_prealloc_queue_reqs",), "sum",
          "PD decode: requests waiting for KV slots"),
    Alias("num_decode_transfer_queue_reqs", "gauge", ("num_decode_transfer_queue_reqs",), "sum",
          "PD decode: requests waiting for their KV cache to arrive"),
    Alias("prealloc_full_token_usage", "gauge", ("prealloc_full_token_usage",), "mean",
          "PD decode: KV pool share held for transfers still on the way, 0-1"),
    Alias("kv_transfer_latency", "histogram", ("kv_transfer_latency_ms",), "sum",
          "PD: one request's KV transfer, prefill side (ms in SGLang)", scale=1e-3),
    Alias("kv_transfer_bootstrap", "histogram", ("kv_transfer_bootstrap_ms",), "sum",
          "PD: handshake time before a transfer (ms in SGLang; both sides, by engine_type)", scale=1e-3),
    Alias("kv_transfer_alloc", "histogram", ("kv_transfer_alloc_ms",), "sum",
          "PD: KV allocation wait before a transfer (ms in SGLang)", scale=1e-3),
    Alias("kv_transfer_speed", "histogram", ("kv_transfer_speed_gb_s",), "sum",
          "PD: one request's KV transfer speed (GiB/s in SGLang)", unit="_bytes_s", scale=float(2 ** 30)),
    Alias("kv_transfer_size", "histogram", ("kv_transfer_total_mb",), "sum",
          "PD: one request's KV transfer size (MiB in SGLang)", unit="_bytes", scale=float(2 ** 20)),
    Alias("kv_transfer_latency_last_s", "gauge", ("kv_transfer_latency_ms",), "mean",
          "PD: the last request's KV transfer (the gauge before 2026-02)", scale=1e-3),
    Alias("kv_transfer_speed_last_bytes_s", "gauge", ("kv_transfer_speed_gb_s",), "mean",
          "PD: the last request's KV transfer speed (the gauge before 2026-02)", scale=float(2 ** 30)),
    Alias("stage_latency", "histogram", ("per_stage_req_latency_seconds",), "sum",
          "a request's time in one stage (PD: prefill_bootstrap, prefill_transfer_kv_cache, decode_transferred...)",
          split="stage"),
    Alias("bootstrap_failed_per_s", "counter", ("num_bootstrap_failed_reqs",), "sum",
          "PD: requests whose handshake failed/s"),
    Alias("transfer_failed_per_s", "counter", ("num_transfer_failed_reqs",), "sum",
          "PD: requests whose KV transfer failed/s"),
    Alias("kv_transfer_timeouts_per_s", "counter", ("kv_transfer_timeouts",), "sum",
          "PD: KV timeouts/s, by stage bootstrap|transfer (main branch only)", split="stage"),
    # the router (SGLang Model Gateway): smg_* (sglang-router 0.3.0+, smg 1.x), sgl_router_* before
    Alias("router_requests_per_s", "counter", ("smg_router_requests", "sgl_router_requests"), "sum",
          "router: requests/s", router=True),
    Alias("router_errors_per_s", "counter", ("smg_router_request_errors", "sgl_router_request_errors"), "sum",
          "router: failed requests/s (retryable 502/503 aside)", router=True),
    Alias("router_retries_per_s", "counter", ("smg_worker_retries", "sgl_router_retries"), "sum",
          "router: retries/s (PD: both legs count)", router=True),
    Alias("router_request_duration", "histogram",
          ("smg_router_request_duration_seconds", "sgl_router_request_duration_seconds"), "sum",
          "router: request duration, successes", router=True),
    Alias("router_worker_requests_active", "gauge", ("smg_worker_requests_active", "sgl_router_running_requests"),
          "sum", "router: requests in flight per worker", split="worker", router=True),
    Alias("router_worker_health", "gauge", ("smg_worker_health", "sgl_router_worker_health"), "mean",
          "router: 1 healthy, 0 not, -1 removed, per worker", split="worker", router=True),
    Alias("router_worker_cb_state", "gauge", ("smg_worker_cb_state", "sgl_router_cb_state"), "mean",
          "router: circuit breaker per worker, 0 closed, 1 open, 2 half open", split="worker", router=True),
    Alias("router_worker_routing_keys_active", "gauge", ("smg_worker_routing_keys_active",), "sum",
          "router: distinct routing keys in flight per worker (0.3.2+)", split="worker", router=True),
    Alias("router_cb_opens_per_s", "counter", ("smg_worker_cb_transitions", "sgl_router_cb_state_transitions"),
          "sum", "router: circuit breakers opened/s", only=(("to", "open"),), router=True),
    Alias("router_prefill_admission_queued", "gauge", ("smg_pd_prefill_admission_queued",), "sum",
          "router: requests waiting for a prefill slot (smg 1.12+)", router=True),
    Alias("router_prefill_admission_rejections_per_s", "counter", ("smg_pd_prefill_admission_rejections",),
          "sum", "router: requests refused a prefill slot/s (smg 1.12+)", router=True),
)

#: a queue gauge whose family may carry its per-priority breakdown -> the breakdown's alias key
PRIORITY_BREAKDOWN: dict[str, str] = {"num_running_reqs": "num_running_reqs_by_priority",
                                      "num_queue_reqs": "num_queue_reqs_by_priority"}


def _derived(values: dict[str, float], deltas: dict[str, float]) -> None:
    """HiCache: seconds of load-back copy a token (what a host hit costs; the doctor sets it
    against what recomputing a token costs)."""
    ops, mean = values.get(sk.hist_key("load_back", "window_count")), values.get(sk.hist_key("load_back", "mean"))
    if deltas.get("load_back_tokens_per_s", 0.0) > 0 and ops is not None and mean is not None:
        values[sk.METRICS_LOAD_BACK_S_PER_TOKEN] = mean * ops / deltas["load_back_tokens_per_s"]


def _group(key: str) -> str:
    return "diffusion" if key.startswith("diffusion_") else ""


TABLE = AliasTable(
    aliases=ALIASES,
    prefixes=PREFIXES,
    replica_labels=REPLICA_LABELS,
    rank_labels=RANK_LABELS,
    priority_gauges=True,
    priority_breakdown=PRIORITY_BREAKDOWN,
    ratios=((sk.METRICS_CACHED_TOKEN_RATIO, "cached_tokens_per_s", "prompt_tokens_per_s"),),
    derived=_derived,
    group_of=_group,
)
LOOKUP: dict[str, list[tuple[Alias, str, str]]] = TABLE.lookup


def aggregate(values: dict[LabelKey, float], agg: str) -> float | None:
    """Combine one quantity's series (label key -> value) by the module-doc rule."""
    return promalias.aggregate(values, agg, REPLICA_LABELS)


def rank_detail(values: dict[LabelKey, float], agg: str) -> dict[str, float]:
    """Per-rank values keyed by suffix ('dp1', 'tp0pp1', ...) for the rank labels that vary."""
    return promalias.rank_detail(values, agg, RANK_LABELS, REPLICA_LABELS)


def source_names(keys: Iterable[str]) -> list[str]:
    """The SGLang base names (no prefix, no _total/_bucket/_sum/_count) that feed the given
    `metrics.*` keys, per-rank and per-stage detail keys included; for reading only the series
    a chart needs (Prometheus as a source). Pure; unknown keys feed nothing."""
    return TABLE.source_names(keys)
