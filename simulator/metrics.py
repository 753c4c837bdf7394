"""Prometheus metrics in SGLang 0.5.23 names, types, labels and buckets (private registry).

LLM server (reference §3): scheduler-side gauges carry ``model_name, engine_type, tp_rank,
pp_rank, moe_ep_rank`` (+ ``dp_rank`` when dp > 1); tokenizer-side metrics carry
``model_name, engine_type`` plus ``is_streaming`` ("true"/"false") on prompt/generation token
counters, num_requests_total, TTFT, e2e and per-request TPOT histograms, and ``cache_source``
("device") on cached_tokens_total. HTTP counters carry ``endpoint, method`` (+ ``status_code``).
Counters are exposed without ``_created`` samples, as SGLang's multiprocess registry does.

Diffusion server (§6): ``role`` ("server") and ``replica`` ("0") labels.

Bucket lists follow §3.2 for 0.5.3-0.5.23; the middle of the queue-time list is elided in the
reference and filled here with 50..90 and 300..900 steps [inferred].
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()

TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8]
E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600,
               1200, 1800, 2400]
QUEUE_BUCKETS = [0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40,
                 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200,
                 1400, 1600, 1800, 2000, 2500, 3000]
DIFFUSION_LATENCY_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200]
DIFFUSION_BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64]

SCHED_GAUGES = {
    "num_running_reqs": "The number of running requests.",
    "num_queue_reqs": "The number of requests in the waiting queue.",
    "num_grammar_queue_reqs": "The number of requests in the grammar waiting queue.",
    "gen_throughput": "The generation throughput (token/s).",
    "cache_hit_rate": "The prefix cache hit rate.",
    "decode_sum_seq_lens": "The sum of all sequence lengths in decode.",
    "token_usage": "The token usage.",
    "full_token_usage": "The token usage for full attention layers.",
    "num_used_tokens": "The number of used tokens.",
    "kv_available_tokens": "Number of free token slots in the KV cache pool.",
    "kv_evictable_tokens": "Number of evictable (radix-cached) token slots in the KV cache pool.",
    "kv_used_tokens": "Number of actively used token slots in the KV cache pool.",
    "spec_accept_length": "The average acceptance length of speculative decoding.",
    "spec_accept_rate": "The average acceptance rate of speculative decoding.",
    "num_retracted_reqs": "The number of retracted requests.",
    "num_paused_reqs": "The number of paused requests by async weight sync.",
    "utilization": "The utilization.",
    "new_token_ratio": "The new token ratio.",
    "is_cuda_graph": "Whether the batch is using CUDA graph.",
    "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
    "context_len": "The context length.",
    "page_size": "The page size of the KV cache.",
    "num_pages": "The number of pages in the KV cache pool.",
    "weight_memory_usage_gb": "Memory used by model weights (GB).",
    "kv_cache_memory_usage_gb": "Memory used by the KV cache (GB).",
    "graph_memory_usage_gb": "Memory used by CUDA graphs (GB).",
}


class LlmMetrics:
    def __init__(self, *, model_name: str, dp_size: int, ttft_buckets: list[float] | None = None,
                 itl_buckets: list[float] | None = None,
                 e2e_buckets: list[float] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.model_name = model_name
        self.dp = dp_size > 1
        sched_labels = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]
        if self.dp:
            sched_labels.append("dp_rank")
        tok = ["model_name", "engine_type"]
        stream = [*tok, "is_streaming"]
        self.g = {k: Gauge(f"sglang:{k}", doc, sched_labels, registry=r)
                  for k, doc in SCHED_GAUGES.items()}
        self.startup = Gauge("sglang:startup_time_seconds", "Server startup time by phase.",
                             [*tok, "phase"], registry=r)
        self.retracted_total = Counter("sglang:num_retracted_requests_total",
                                       "Total number of retracted requests.", sched_labels,
                                       registry=r)
        self.queue_time = Histogram("sglang:queue_time_seconds",
                                    "Histogram of queueing time in seconds.", sched_labels,
                                    buckets=QUEUE_BUCKETS, registry=r)
        self.prompt_tokens = Counter("sglang:prompt_tokens", "Number of prefill tokens processed.",
                                     stream, registry=r)
        self.generation_tokens = Counter("sglang:generation_tokens",
                                         "Number of generation tokens processed.", stream,
                                         registry=r)
        self.cached_tokens = Counter("sglang:cached_tokens",
                                     "Number of cached prompt tokens.",
                                     [*tok, "cache_source"], registry=r)
        self.num_requests = Counter("sglang:num_requests", "Number of requests processed.",
                                    stream, registry=r)
        self.num_aborted = Counter("sglang:num_aborted_requests", "Number of requests aborted.",
                                   tok, registry=r)
        self.ttft = Histogram("sglang:time_to_first_token_seconds",
                              "Histogram of time to first token in seconds.", stream,
                              buckets=ttft_buckets or TTFT_BUCKETS, registry=r)
        self.itl = Histogram("sglang:inter_token_latency_seconds",
                             "Histogram of inter-token latency in seconds.", tok,
                             buckets=itl_buckets or ITL_BUCKETS, registry=r)
        self.tpot = Histogram("sglang:request_time_per_output_token_seconds",
                              "Histogram of per-request time per output token in seconds.",
                              stream, buckets=itl_buckets or ITL_BUCKETS, registry=r)
        self.e2e = Histogram("sglang:e2e_request_latency_seconds",
                             "Histogram of End-to-end request latency in seconds", stream,
                             buckets=e2e_buckets or E2E_BUCKETS, registry=r)
        self.http_requests = Counter("sglang:http_requests", "Total number of HTTP requests.",
                                     ["endpoint", "method"], registry=r)
        self.http_responses = Counter("sglang:http_responses", "Total number of HTTP responses.",
                                      ["endpoint", "method", "status_code"], registry=r)
        self.http_active = Gauge("sglang:http_requests_active",
                                 "Number of HTTP requests currently being processed.",
                                 ["endpoint", "method"], registry=r)

    def sched_labels(self, dp_rank: int) -> dict[str, str]:
        d = {"model_name": self.model_name, "engine_type": "unified", "tp_rank": "0",
             "pp_rank": "0", "moe_ep_rank": "0"}
        if self.dp:
            d["dp_rank"] = str(dp_rank)
        return d

    def tok_labels(self) -> dict[str, str]:
        return {"model_name": self.model_name, "engine_type": "unified"}

    def render(self) -> bytes:
        return generate_latest(self.registry)


class DiffusionMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        base = ["role", "replica"]
        self.labels = {"role": "server", "replica": "0"}
        self.queue = Gauge("sglang:diffusion_num_queue_reqs", "Number of queued requests.", base,
                           registry=r)
        self.running = Gauge("sglang:diffusion_num_running_reqs", "Number of running requests.",
                             base, registry=r)
        self.requests = Counter("sglang:diffusion_requests", "Total diffusion requests.",
                                [*base, "status", "is_warmup"], registry=r)
        self.latency = Histogram("sglang:diffusion_request_latency_seconds",
                                 "Diffusion request latency in seconds.",
                                 [*base, "status", "is_warmup"],
                                 buckets=DIFFUSION_LATENCY_BUCKETS, registry=r)
        self.queue_time = Histogram("sglang:diffusion_queue_time_seconds",
                                    "Diffusion request queue time in seconds.", base,
                                    buckets=DIFFUSION_LATENCY_BUCKETS, registry=r)
        self.batch_size = Histogram("sglang:diffusion_generation_batch_size",
                                    "Diffusion generation batch size.", base,
                                    buckets=DIFFUSION_BATCH_BUCKETS, registry=r)
        self.stage = Histogram("sglang:diffusion_stage_host_latency_seconds",
                               "Host-side latency of each pipeline stage in seconds.",
                               [*base, "stage"], buckets=DIFFUSION_LATENCY_BUCKETS, registry=r)
        self.queue.labels(**self.labels).set(0)
        self.running.labels(**self.labels).set(0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
