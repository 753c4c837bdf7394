"""vLLM's `/metrics` collector: Prometheus text -> `metrics.*` samples, on the engine-neutral scrape
(collectors/promscrape.py: fan-out, bounds, deadline, notes) over vLLM's alias table
(metrics_alias.py, whose docstring says where vLLM's definitions differ).

| key | unit | vLLM family | cross-check |
|---|---|---|---|
| metrics.num_running_reqs, num_queue_reqs | requests | `num_requests_running`, `num_requests_waiting` (sum over engines) | `curl -s $URL/metrics \\| grep num_requests_` |
| metrics.token_usage | 0-1 | `kv_cache_usage_perc` (`gpu_cache_usage_perc` before 0.10): KV *blocks* in use | same |
| metrics.prompt_tokens_per_s, generation_tokens_per_s | tok/s | Δ`prompt_tokens_total`, Δ`generation_tokens_total` / Δt | `rate(vllm:prompt_tokens_total[..])` |
| metrics.cached_tokens_per_s, cached_token_ratio | tok/s, 0-1 | Δ`prompt_tokens_cached_total` / Δt; ÷ Δprompt tokens | `rate(vllm:prompt_tokens_cached_total[..]) / rate(vllm:prompt_tokens_total[..])` |
| metrics.prefix_cache_queries_per_s, prefix_cache_hits_per_s, prefix_cache_hit_ratio | tok/s, 0-1 | Δ`prefix_cache_queries_total`, Δ`prefix_cache_hits_total` (every lookup); hits ÷ queries | `rate(vllm:prefix_cache_hits_total[..]) / rate(vllm:prefix_cache_queries_total[..])` |
| metrics.requests_per_s, aborted_requests_per_s | 1/s | Δ`request_success_total` (every finished_reason; `abort` alone) / Δt | |
| metrics.retracted_requests_per_s | 1/s | Δ`num_preemptions_total` / Δt | |
| metrics.spec_drafts_per_s, spec_draft_tokens_per_s, spec_accepted_tokens_per_s, spec_accept_rate, spec_accept_length | 1/s, tok/s, 0-1, tokens | `spec_decode_num_*`; rate = accepted ÷ draft tokens, length = 1 + accepted ÷ drafts | |
| metrics.<h>_p50_s, _p95_s, _p99_s, _mean_s, _clamped, _window_count | s | windowed quantiles, h in ttft (`time_to_first_token_seconds`), itl (`inter_token_latency_seconds`), e2e, queue_time (`request_queue_time_seconds`), tpot, prefill_time, decode_time | `histogram_quantile(0.99, sum by (le) (rate(..._bucket[..])))` |
| metrics.http_requests_per_s | 1/s | Δ`http_requests_total` (the API server's instrumentator) / Δt | |
| metrics.<gauge>.dp<i> | as above | per engine when the `engine` label varies (data parallel) | filter by `engine="i"` |

No drift guard yet: vLLM's families are read by name each scrape, and a family a release drops
shows as "not exported by this server/version" (the window state's `absent`), not as an event.
"""

from __future__ import annotations

from collectors.promscrape import PromScrapeCollector
from collectors.vllm.metrics_alias import TABLE


class VLLMMetricsCollector(PromScrapeCollector):
    """vLLM's /metrics (collectors/promscrape.py does the scraping; the key table is above)."""

    name = "vllm_metrics"
    table = TABLE
    enable_hint = ("vLLM serves /metrics unless it runs with --disable-log-stats; check the "
                   "server's flags and that base_url (or metrics_url) is its API server")
