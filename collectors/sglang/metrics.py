"""SGLang `/metrics` collector: Prometheus text -> `metrics.*` samples (gauges, rates, quantiles).

Owns scraping (every server at once, under one deadline per poll), the events, and the turn of
one scrape into rows. Parsing is collectors/promtext.py (prometheus_client's parser,
bad lines isolated, series and CPU time capped), the windows collectors/sglang/metrics_window.py,
names of every SGLang era and the rank rules collectors/sglang/metrics_alias.py, the arithmetic
collectors/prommath.py. Gauges are taken as they are; counters become per-second rates
and histograms windowed quantiles over the time between two polls, so the first poll of a server
yields gauges only. A metric the server does not export gives no sample (never 0): `absent_keys()`
lists those keys, and the collector keeps the list in its state
(`sglang_metrics:<server_id>:window` -> `"absent"`) for the dashboard's
"not exported by this server/version".

| key | unit | meaning | cross-check |
|---|---|---|---|
| metrics.num_running_reqs, num_queue_reqs | requests | running batch / waiting queue (sum over DP) | `curl -s $URL/metrics \\| grep num_running_reqs` |
| metrics.num_used_tokens, max_total_num_tokens | tokens | KV tokens in use / capacity | same, `num_used_tokens` |
| metrics.token_usage | 0-1 | KV-cache usage (mean over ranks) | `token_usage` |
| metrics.gen_throughput_tok_s | tok/s | decode throughput at the last decode log | `gen_throughput`; log `gen throughput (token/s)` |
| metrics.cache_hit_rate | 0-1 | SGLang's own hit-rate gauge (0.4.4+: last prefill batch) | `cache_hit_rate` |
| metrics.num_grammar_queue_reqs, num_paused_reqs, num_retracted_reqs | requests | other queues | same names |
| metrics.spec_accept_length, utilization | -, 0-1 | speculative accept length, scheduler utilisation | same names |
| metrics.spec_accept_rate, spec_num_draft_tokens | 0-1, tokens | accepted / proposed drafts; draft tokens a verify checks | same names |
| metrics.spec_verify_calls_per_s | 1/s | Δ`spec_verify_calls_total` / Δt (0.5.13+) | `rate(sglang:spec_verify_calls_total[..])` |
| metrics.num_running_reqs_by_priority.<p>, num_queue_reqs_by_priority.<p> | requests | per-priority breakdown under --enable-priority-scheduling (metrics_alias.py `split_priority`) | `num_queue_reqs{priority="5"}` |
| metrics.http_requests_active | requests | HTTP requests in flight (0.5.23+) | same name |
| metrics.<gauge>.dp<i> / .tp<i> ... | as above | per-rank value when a rank label varies | filter by `dp_rank="i"` |
| metrics.prompt_tokens_per_s, generation_tokens_per_s, cached_tokens_per_s | tok/s | Δcounter / Δt between polls | `rate(sglang:prompt_tokens_total[..])` |
| metrics.requests_per_s, aborted_requests_per_s, retracted_requests_per_s | 1/s | Δcounter / Δt | `rate(sglang:num_requests_total[..])` |
| metrics.cached_token_ratio | 0-1 | Δcached_tokens / Δprompt_tokens in the window (token-weighted hit rate) | `rate(sglang:cached_tokens_total[..]) / rate(sglang:prompt_tokens_total[..])` |
| metrics.<h>_p50_s, _p95_s, _p99_s | s | windowed histogram quantile estimate, h in ttft, itl, e2e, queue_time, tpot | `histogram_quantile(0.99, sum by (le) (rate(..._bucket[..])))` |
| metrics.<h>_mean_s | s | Δsum / Δcount in the window | `rate(_sum)/rate(_count)` |
| metrics.<h>_clamped | 1/0 | 1 when any of p50/p95/p99 sits at the last finite bucket (true value higher) | compare with the `le="+Inf"` bucket |
| metrics.<h>_window_count | observations | Δcount in the window (what the estimates rest on) | Δ`_count` |
| metrics.diffusion_num_queue_reqs, diffusion_num_running_reqs | requests | image requests queued / running (diffusion server 0.5.21+) | `grep diffusion_num_` |
| metrics.diffusion_lora_loaded_adapters, diffusion_lora_active_adapters | adapters | loaded / unique active LoRA adapters | same names |
| metrics.diffusion_lora_active_modules | modules | pipeline modules with an active LoRA adapter | same name |
| metrics.diffusion_lora_module_active.<module> | 0-1 | 1 when that module has an active adapter (mean over replicas) | `diffusion_lora_module_active{module=...}` |
| metrics.diffusion_requests_per_s, diffusion_failed_requests_per_s | 1/s | Δ`diffusion_requests_total` / Δt, `is_warmup="true"` left out (failed: `status="error"`) | `rate(sglang:diffusion_requests_total{is_warmup="false"}[..])` |
| metrics.diffusion_e2e_p50_s/_p95_s/_p99_s/_mean_s, diffusion_queue_time_* | s | windowed quantiles of `diffusion_request_latency_seconds` / `diffusion_queue_time_seconds`, warm-up left out | `histogram_quantile(0.99, sum by (le) (rate(sglang:diffusion_request_latency_seconds_bucket{is_warmup="false"}[..])))` |
| metrics.diffusion_batch_size_p50/_p95/_p99/_mean | requests | requests per dispatched batch (a count: no `_s`) | `diffusion_generation_batch_size` |
| metrics.diffusion_stage_p50_s.<Stage>, _p95_s, _p99_s, _mean_s, _clamped, _window_count | s | per-stage windowed quantiles of `diffusion_stage_host_latency_seconds{stage=...}`; `<Stage>` as exported (`DenoisingStage`, `DecodingStage`, ...; `DenoisingStep` = seconds per denoising step) | `histogram_quantile(0.99, sum by (le) (rate(..._bucket{stage="DenoisingStage"}[..])))` |
| metrics.http_requests_per_s | 1/s | Δ`http_requests_total` / Δt | |

Counter and histogram windows use per-series deltas (metrics_window.py): a series that went
down restarted and counts from zero; a series that first appears in a family already seen counts
from zero (SGLang creates `status="error"` on the first failure: that failure is counted); a
family first seen after the server's first scrape counts from zero too (SGLang's
multiprocess registry shows a family from its first write). A failed-requests figure whose family is
exported but has no error series yet reads 0. A non-finite value (`+Inf`, `NaN`) is never stored:
its series is skipped until it reads a number again.

The drift guard (collectors/sglang/metrics_catalog.py) keeps each launch's catalogue of SGLang
families in the state (`sglang_metrics:<server_id>:catalog`) and writes ONE `metric_drift` event
per launch whose families differ from the launch before (gone, retyped, a label lost), naming what
in Pitwall read them (the `dependents` the runner's assembly sets: present/dependents.py).

Scraping, bounds and their events: collectors/promscrape.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from collectors import promscrape
from collectors.base import SampleRow, ServerTarget
from collectors.promscrape import PromScrapeCollector, Snapshot
from collectors.promtext import ParsedMetrics, parse_metrics
from collectors.sglang.metrics_alias import TABLE
from collectors.sglang.metrics_catalog import step as catalog_step
from collectors.sglang.metrics_window import (
    DEFAULT_MAX_DETAIL_KEYS,
    Extracted,
    absent_keys,
    compute,
    extract,
)

__all__ = [
    "Extracted",
    "ParsedMetrics",
    "SGLangMetricsCollector",
    "Snapshot",
    "absent_keys",
    "compute",
    "extract",
    "parse_metrics",
    "parse_metrics_cli",
    "snapshot",
    "snapshot_rows",
]

def snapshot(
    server: ServerTarget,
    parsed: ParsedMetrics,
    prev: dict[str, Any] | None,
    ts: float,
    max_detail_keys: int = DEFAULT_MAX_DETAIL_KEYS,
) -> Snapshot:
    """The rows of one scrape of an SGLang `server` at `ts`, the new window state and the notes
    (collectors/promscrape.py's `snapshot` over SGLang's table). Pure."""
    return promscrape.snapshot(TABLE, server, parsed, prev, ts, max_detail_keys)


def snapshot_rows(
    server: ServerTarget, parsed: ParsedMetrics, prev: dict[str, Any] | None, ts: float
) -> tuple[list[SampleRow], dict[str, Any]]:
    """`snapshot` as (rows, state)."""
    snap = snapshot(server, parsed, prev, ts)
    return snap.rows, snap.state


class SGLangMetricsCollector(PromScrapeCollector):
    """SGLang's /metrics (collectors/promscrape.py does the scraping; the key table is above)."""

    name = "sglang_metrics"
    table = TABLE
    enable_hint = "start SGLang with --enable-metrics"
    catalog_step = staticmethod(catalog_step)


def parse_metrics_cli(argv: list[str] | None = None) -> int:
    """`pitwall parse-metrics FILE [--json]`: parse a saved /metrics payload; 0 unless unreadable."""
    parser = argparse.ArgumentParser(
        prog="pitwall parse-metrics", description="Parse a saved SGLang /metrics payload."
    )
    parser.add_argument(
        "file", help="a Prometheus text file (curl -s $URL/metrics > FILE); - for stdin"
    )
    parser.add_argument(
        "--json", action="store_true", help="print {samples, families, errors} as JSON"
    )
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"Cannot read {args.file}: {exc}; pass a saved /metrics text file.", file=sys.stderr)
        return 2
    parsed = parse_metrics(text)
    if args.json:
        print(json.dumps(parsed.to_json()))
        return 0
    values, _ = compute(parsed, None, 0.0)
    print(
        f"{len(parsed.families)} families, {len(parsed.samples)} samples, {len(parsed.errors)} errors"
    )
    for err in parsed.errors:
        print(f"  error: {err}")
    for _, text in parsed.limits:
        print(f"  limit: {text}")
    for k, v in sorted(values.items()):
        print(f"  {k} = {v:g}")
    absent = absent_keys(parsed)
    if absent:
        print("  not exported by this server/version: " + ", ".join(absent))
    return 0
