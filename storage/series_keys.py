"""The one table of sample series keys: every `Sample.metric` Pitwall writes, its unit, what it
means and who writes it. Writers and readers import the constants and helpers below instead of
spelling a key (tests/foundation/test_series_keys.py holds every module outside tests/ to that,
and checks that what the collectors really emit is in this table).

A key names its source and its unit: `log.*` (the engine's scheduler
log), `metrics.*` (its /metrics, scraped or read through Prometheus), `api.*` (its HTTP
endpoints), `canary.*`, `gpu.<gpu>.*`, `prometheus.staleness_s` and `self.*` (the runner's own
figures on server_id 0). Values are in base units (`_s` seconds, `_bytes` bytes, `_ratio` /
`*_usage` / `*_rate` 0-1 fractions, `_tok_s` tokens per second); the few that are not say so in
their meaning (`*_gb`: GiB as the diffusion server prints them).

`SeriesKey.key` is a key, or a pattern whose `<name>` parts stand for (PLACEHOLDERS):
- `<gpu>`: a card index (`gpu.0.power_w`), or a MIG instance of a card, `<i>.mig<GPU_I_ID>`
  (`gpu.0.mig3.mem_used_bytes`; collectors/gpu.py);
- `<stage>`: a diffusion pipeline stage as the server names it (`DenoisingStage`);
- `<module>`: a pipeline module (`transformer`);
- `<source>`: where a prefix-cache hit came from (`device`, `host`, `storage`; `total` where the
  engine gave no breakdown);
- `<priority>`: a request priority as the engine labels it (`5`, `-1`, `None`, `HIGH`, `UNKNOWN`);
- `<rank>`: the rank labels that vary on a multi-rank server, `dp1`, `tp3`, `dp0tp1` (per-rank
  detail beside the server figure; `SeriesKey.detail` says which keys carry it);
- `<d>`: a DP rank (`log.running_req.dp1`);
- `<worker>`: a router's worker as the router names it, its URL (`http://10.0.0.5:30000`).

`unit` is a storage/units.py key (how the value is shown); "" where no display unit fits (Hz,
a bitmask, a P-state, GiB figures): shown as a plain number.

Cross-check any key: `sqlite3 pitwall.db "select distinct metric from sample"` lists what one
database holds; each key's writer module documents the key beside the line it parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the writers, by the name `SeriesKey.writer` uses: what writes them, by role (an engine's
#: collectors are its Engine's `collectors`, collectors/engines.py; the rest are Pitwall's own)
WRITERS: dict[str, str] = {
    "log": "the engine's scheduler-log collector (its `log` role)",
    "metrics": "the engine's /metrics collector (its `metrics` role), or Prometheus as its source "
               "(collectors/prometheus_source.py)",
    "api": "the engine's HTTP API collector (its `api` role)",
    "canary": "the canary (collectors/canary.py)",
    "gpu": "the GPU collector over NVML or dcgm-exporter (collectors/gpu.py)",
    "prometheus": "Prometheus as a source (collectors/prometheus_source.py)",
    "self": "the runner's own collector (runner/self_metrics.py)",
}

#: placeholder -> the regular expression it stands for in a pattern key
PLACEHOLDERS: dict[str, str] = {
    "<gpu>": r"[0-9]+(?:\.mig[0-9]+)?",
    "<stage>": r"[A-Za-z_][A-Za-z0-9_.:-]*",
    "<module>": r"[A-Za-z0-9_.:-]+",
    "<priority>": r"[A-Za-z0-9_.+-]+",
    "<source>": r"[A-Za-z0-9_.-]+",
    "<rank>": r"(?:(?:dp|tp|pp|ep)(?:[0-9]+|na))+",
    "<d>": r"[0-9]+",
    "<worker>": r"[A-Za-z0-9_.:/@\[\]%-]+",
}


@dataclass(frozen=True)
class SeriesKey:
    key: str  # a key, or a pattern with PLACEHOLDERS
    unit: str  # storage/units.py key; "" = a plain number
    meaning: str
    writer: str  # a WRITERS name
    detail: str = ""  # "" or a suffix pattern also written per rank / stage: ".<rank>"

    @property
    def pattern(self) -> bool:
        return "<" in self.key

    def regex(self) -> re.Pattern[str]:
        """Every key this entry stands for (the detail suffix optional)."""
        def compile_(text: str) -> str:
            parts = re.split(r"(<[a-z]+>)", text)
            return "".join(PLACEHOLDERS[p] if p in PLACEHOLDERS else re.escape(p) for p in parts)
        tail = f"(?:{compile_(self.detail)})?" if self.detail else ""
        return re.compile(compile_(self.key) + tail)


SERIES_KEYS: dict[str, SeriesKey] = {}


def _k(key: str, unit: str, meaning: str, writer: str, detail: str = "") -> str:
    if key in SERIES_KEYS:
        raise ValueError(f"series key {key!r} is declared twice in storage/series_keys.py")
    if writer not in WRITERS:
        raise ValueError(f"series key {key!r} names an unknown writer {writer!r}")
    SERIES_KEYS[key] = SeriesKey(key, unit, meaning, writer, detail)
    return key


# -- source prefixes (a key starts with one; readers list a source's series by it) -------------
LOG_PREFIX = "log."
METRICS_PREFIX = "metrics."
API_PREFIX = "api."
CANARY_PREFIX = "canary."
GPU_PREFIX = "gpu."
SELF_PREFIX = "self."

# -- log.*: the scheduler log (one sample per record; `.dp<d>` per DP rank, module doc there) ---
_DP = ".dp<d>"
LOG_RUNNING_REQ = _k("log.running_req", "count", "`#running-req`: requests in the batch", "log", _DP)
LOG_QUEUE_REQ = _k("log.queue_req", "count", "`#queue-req`: requests waiting", "log", _DP)
LOG_TOKEN_USAGE = _k("log.token_usage", "ratio", "KV pool fraction in use", "log", _DP)
LOG_NUM_TOKEN = _k("log.num_token", "count", "`#token`: KV tokens in use", "log", _DP)
LOG_GEN_THROUGHPUT_TOK_S = _k("log.gen_throughput_tok_s", "tok_s", "decode tokens/s since the last decode line",
                              "log", _DP)
LOG_INPUT_THROUGHPUT_TOK_S = _k("log.input_throughput_tok_s", "tok_s", "prefill input tokens/s", "log", _DP)
LOG_PENDING_TOKEN = _k("log.pending_token", "count", "`#pending-token`", "log", _DP)
LOG_ACCEPT_LEN = _k("log.accept_len", "tok_step", "speculative accept length (tokens per step)", "log", _DP)
LOG_ACCEPT_RATE = _k("log.accept_rate", "ratio", "speculative accept rate", "log", _DP)
LOG_FULL_TOKEN_USAGE = _k("log.full_token_usage", "ratio", "hybrid model: full-attention pool usage", "log", _DP)
LOG_SWA_TOKEN_USAGE = _k("log.swa_token_usage", "ratio", "hybrid model: sliding-window pool usage", "log", _DP)
LOG_MAMBA_USAGE = _k("log.mamba_usage", "ratio", "hybrid model: mamba pool usage", "log", _DP)
LOG_PREALLOC_REQ = _k("log.prealloc_req", "count", "PD: requests pre-allocated", "log", _DP)
LOG_TRANSFER_REQ = _k("log.transfer_req", "count", "PD: requests transferring", "log", _DP)
LOG_INFLIGHT_REQ = _k("log.inflight_req", "count", "PD: requests in flight", "log", _DP)
LOG_BOOTSTRAP_REQ = _k("log.bootstrap_req", "count", "PD: requests bootstrapping", "log", _DP)
LOG_UNBOOTSTRAPPED_REQ = _k("log.unbootstrapped_req", "count", "PD: requests not bootstrapped", "log", _DP)
LOG_TRANSFERRING_REQ = _k("log.transferring_req", "count", "PD: requests transferring KV", "log", _DP)
LOG_RETRACTED_QUEUE_REQ = _k("log.retracted_queue_req", "count", "PD decode: retracted requests queued", "log",
                             _DP)
LOG_PREFILL_NEW_TOKEN = _k("log.prefill_new_token", "count", "`#new-token` of one prefill batch", "log")
LOG_PREFILL_CACHED_TOKEN = _k("log.prefill_cached_token", "count", "`#cached-token` of one prefill batch "
                              "(radix-cache hits)", "log")
LOG_PREFILL_NEW_SEQ = _k("log.prefill_new_seq", "count", "`#new-seq` of one prefill batch", "log")
LOG_CACHE_HIT_RATE = _k("log.cache_hit_rate", "ratio", "Σcached ÷ Σ(cached + new) over ≤ 10 s of prefill lines",
                        "log")
LOG_CACHE_HIT_RATE_LIFETIME = _k("log.cache_hit_rate_lifetime", "ratio", "cumulative hit rate as printed "
                                 "up to 0.4.3", "log")
LOG_PREFIX_CACHE_HIT_RATE = _k("log.prefix_cache_hit_rate", "ratio", "the prefix cache's hits ÷ lookups as the "
                               "engine prints it (over its last 1,000 requests, not an interval)", "log", _DP)
LOG_RETRACTED_REQ = _k("log.retracted_req", "count", "requests retracted by one decode_retract event", "log")
LOG_FSM_CACHE_HIT_RATE = _k("log.fsm_cache_hit_rate", "ratio", "0.1.x FSM cache hit rate", "log")
LOG_FF_CACHE_HIT_RATE = _k("log.ff_cache_hit_rate", "ratio", "0.1.x fast-forward cache hit rate", "log")
LOG_FSM_CACHE_AVG_INIT_S = _k("log.fsm_cache_avg_init_s", "s", "0.1.x mean FSM cache init time", "log")
LOG_FF_CACHE_AVG_INIT_S = _k("log.ff_cache_avg_init_s", "s", "0.1.x mean fast-forward cache init time", "log")
# diffusion servers
LOG_DIFFUSION_PREFIX = "log.diffusion."
LOG_DIFFUSION_STAGE_PREFIX = "log.diffusion.stage_s."
_k(LOG_DIFFUSION_STAGE_PREFIX + "<stage>", "s", "one request's seconds in pipeline stage <stage>", "log")
LOG_DIFFUSION_STEP_S = _k("log.diffusion.step_s", "s", "mean denoising step time of one request", "log")
LOG_DIFFUSION_REQUEST_S = _k("log.diffusion.request_s", "s", "one request, forward + output", "log")
LOG_DIFFUSION_BATCH_S = _k("log.diffusion.batch_s", "s", "one offline batch", "log")
LOG_DIFFUSION_BATCH_OUTPUTS = _k("log.diffusion.batch_outputs", "count", "outputs of one offline batch", "log")
LOG_DIFFUSION_WARMED_REQUEST_S = _k("log.diffusion.warmed_request_s", "s", "one request, warm-up excluded",
                                    "log")
LOG_DIFFUSION_PEAK_MEM_GB = _k("log.diffusion.peak_mem_gb", "", "peak CUDA memory of one request, GiB", "log")
LOG_DIFFUSION_REMAINING_MEM_GB = _k("log.diffusion.remaining_mem_gb", "", "card total − peak (headroom), GiB",
                                    "log")
LOG_DIFFUSION_PEAK_ALLOCATED_GB = _k("log.diffusion.peak_allocated_gb", "", "peak allocated, GiB", "log")
LOG_DIFFUSION_BATCH_MAX_PEAK_MEM_GB = _k("log.diffusion.batch_max_peak_mem_gb", "", "offline batch: max peak, "
                                         "GiB", "log")
LOG_DIFFUSION_BATCH_AVG_PEAK_MEM_GB = _k("log.diffusion.batch_avg_peak_mem_gb", "", "offline batch: mean peak, "
                                         "GiB", "log")


def stage_key(stage: str) -> str:
    """`log.diffusion.stage_s.<stage>`: one request's seconds in a pipeline stage."""
    return LOG_DIFFUSION_STAGE_PREFIX + stage


# -- metrics.*: the engine's /metrics (gauges as they are, counters as rates, histograms as
#    windowed estimates; `.<rank>` per rank where ranks vary) -------------------------------------
_RANK = ".<rank>"
def metrics_key(name: str) -> str:
    """`metrics.<name>`: the key of the /metrics figure `name` (a gauge or rate), or a histogram's
    stem that hist_key's stats extend."""
    return METRICS_PREFIX + name


METRICS_NUM_RUNNING_REQS = _k("metrics.num_running_reqs", "count", "requests in the running batch", "metrics",
                              _RANK)
METRICS_NUM_QUEUE_REQS = _k("metrics.num_queue_reqs", "count", "requests waiting in the queue", "metrics", _RANK)
METRICS_NUM_RUNNING_BY_PRIORITY = _k("metrics.num_running_reqs_by_priority.<priority>", "count",
                                     "running requests of one priority (--enable-priority-scheduling)", "metrics")
METRICS_NUM_QUEUE_BY_PRIORITY = _k("metrics.num_queue_reqs_by_priority.<priority>", "count",
                                   "queued requests of one priority (--enable-priority-scheduling)", "metrics")
METRICS_NUM_USED_TOKENS = _k("metrics.num_used_tokens", "count", "KV-cache tokens in use", "metrics", _RANK)
METRICS_MAX_TOTAL_NUM_TOKENS = _k("metrics.max_total_num_tokens", "count", "KV-cache token capacity", "metrics",
                                  _RANK)
METRICS_TOKEN_USAGE = _k("metrics.token_usage", "ratio", "KV-cache usage", "metrics", _RANK)
METRICS_GEN_THROUGHPUT_TOK_S = _k("metrics.gen_throughput_tok_s", "tok_s", "decode tokens/s at the last log line",
                                  "metrics", _RANK)
METRICS_CACHE_HIT_RATE = _k("metrics.cache_hit_rate", "ratio", "radix hit rate", "metrics", _RANK)
_k("metrics.num_grammar_queue_reqs", "count", "grammar queue", "metrics", _RANK)
_k("metrics.num_paused_reqs", "count", "paused requests", "metrics", _RANK)
_k("metrics.num_retracted_reqs", "count", "retracted requests now", "metrics", _RANK)
METRICS_SPEC_ACCEPT_LENGTH = _k("metrics.spec_accept_length", "tok_step",
                                "speculative accept length (accepted drafts + the bonus token a verify)", "metrics",
                                _RANK)
METRICS_SPEC_ACCEPT_RATE = _k("metrics.spec_accept_rate", "ratio", "speculative accept rate (accepted / proposed drafts)",
                              "metrics", _RANK)
_k("metrics.spec_num_draft_tokens", "count", "draft tokens a speculative verify forward checks", "metrics", _RANK)
_k("metrics.spec_verify_calls_per_s", "rps", "speculative verify forwards/s (each request's share)", "metrics")
_k("metrics.utilization", "ratio", "scheduler utilisation", "metrics", _RANK)
_k("metrics.http_requests_active", "count", "HTTP requests in flight", "metrics", _RANK)
_k("metrics.queue_time_mean_s", "s", "mean queue time: the histogram's windowed mean, or the 0.4.6-0.5.2 gauge",
   "metrics", _RANK)
METRICS_PROMPT_TOKENS_PER_S = _k("metrics.prompt_tokens_per_s", "tok_s", "prompt tokens/s", "metrics")
METRICS_GENERATION_TOKENS_PER_S = _k("metrics.generation_tokens_per_s", "tok_s", "generated tokens/s", "metrics")
METRICS_CACHED_TOKENS_PER_S = _k("metrics.cached_tokens_per_s", "tok_s", "prefix-cache hit tokens/s", "metrics")
METRICS_REQUESTS_PER_S = _k("metrics.requests_per_s", "rps", "finished requests/s", "metrics")
_k("metrics.aborted_requests_per_s", "rps", "aborted requests/s", "metrics")
_k("metrics.retracted_requests_per_s", "rps", "retractions/s (an engine that preempts: preemptions/s)", "metrics")
_k("metrics.prefix_cache_queries_per_s", "tok_s", "tokens looked up in the prefix cache/s, at every lookup "
   "(an engine that counts lookups, not requests)", "metrics")
_k("metrics.prefix_cache_hits_per_s", "tok_s", "tokens found in the prefix cache/s, at every lookup", "metrics")
METRICS_PREFIX_CACHE_HIT_RATIO = _k("metrics.prefix_cache_hit_ratio", "ratio", "Δhits ÷ Δqueries of the prefix "
                                    "cache's lookups over the window (a lookup-weighted hit rate)", "metrics")
_k("metrics.spec_drafts_per_s", "rps", "speculative drafts/s", "metrics")
_k("metrics.spec_draft_tokens_per_s", "tok_s", "speculative draft tokens/s", "metrics")
_k("metrics.spec_accepted_tokens_per_s", "tok_s", "accepted speculative draft tokens/s", "metrics")
_k("metrics.http_requests_per_s", "rps", "HTTP requests/s", "metrics")
METRICS_CACHE_HIT_BY_SOURCE = _k("metrics.cache_hit_tokens_per_s.<source>", "tok_s",
                                 "prefix-cache hit tokens/s from one tier (HiCache: device, host, storage)", "metrics")
METRICS_HICACHE_HOST_USED = _k("metrics.hicache_host_used_tokens", "count", "tokens held in HiCache's host pool",
                               "metrics", _RANK)
# PD disaggregation (one role's server) and the router in front of a service
METRICS_PD_BOOTSTRAP_QUEUE = _k("metrics.num_prefill_bootstrap_queue_reqs", "count",
                                "PD prefill: requests waiting for their decode server's handshake", "metrics", _RANK)
METRICS_PD_INFLIGHT_QUEUE = _k("metrics.num_prefill_inflight_queue_reqs", "count",
                               "PD prefill: requests whose KV cache is being sent", "metrics", _RANK)
METRICS_PD_PREALLOC_QUEUE = _k("metrics.num_decode_prealloc_queue_reqs", "count",
                               "PD decode: requests waiting for KV slots", "metrics", _RANK)
METRICS_PD_TRANSFER_QUEUE = _k("metrics.num_decode_transfer_queue_reqs", "count",
                               "PD decode: requests waiting for their KV cache", "metrics", _RANK)
_k("metrics.prealloc_full_token_usage", "ratio", "PD decode: KV pool share held for transfers on the way",
   "metrics", _RANK)
METRICS_KV_TRANSFER_LAST_S = _k("metrics.kv_transfer_latency_last_s", "s",
                                "PD: the last request's KV transfer (the gauge of releases before 2026-02)",
                                "metrics", _RANK)
_k("metrics.kv_transfer_speed_last_bytes_s", "bytes_s", "PD: the last request's KV transfer speed (gauge)",
   "metrics", _RANK)
METRICS_BOOTSTRAP_FAILED_PER_S = _k("metrics.bootstrap_failed_per_s", "rps", "PD: failed handshakes/s", "metrics")
METRICS_TRANSFER_FAILED_PER_S = _k("metrics.transfer_failed_per_s", "rps", "PD: failed KV transfers/s", "metrics")
_k("metrics.kv_transfer_timeouts_per_s.<stage>", "rps", "PD: KV timeouts/s at one stage (bootstrap, transfer)",
   "metrics")
METRICS_ROUTER_REQUESTS_PER_S = _k("metrics.router_requests_per_s", "rps", "router: requests/s", "metrics")
METRICS_ROUTER_ERRORS_PER_S = _k("metrics.router_errors_per_s", "rps", "router: failed requests/s", "metrics")
METRICS_ROUTER_RETRIES_PER_S = _k("metrics.router_retries_per_s", "rps", "router: retries/s", "metrics")
METRICS_ROUTER_CB_OPENS_PER_S = _k("metrics.router_cb_opens_per_s", "rps", "router: circuit breakers opened/s",
                                   "metrics")
METRICS_ROUTER_WORKER_ACTIVE = _k("metrics.router_worker_requests_active.<worker>", "count",
                                  "router: requests in flight on <worker>", "metrics")
METRICS_ROUTER_WORKER_HEALTH = _k("metrics.router_worker_health.<worker>", "ratio",
                                  "router: <worker> healthy 1, unhealthy 0, removed -1", "metrics")
METRICS_ROUTER_WORKER_CB = _k("metrics.router_worker_cb_state.<worker>", "count",
                              "router: <worker>'s circuit breaker, 0 closed, 1 open, 2 half open", "metrics")
_k("metrics.router_worker_routing_keys_active.<worker>", "count", "router: routing keys in flight on <worker>",
   "metrics")
_k("metrics.router_prefill_admission_queued", "count", "router: requests waiting for a prefill slot", "metrics")
_k("metrics.router_prefill_admission_rejections_per_s", "rps", "router: requests refused a prefill slot/s",
   "metrics")
METRICS_HICACHE_HOST_TOTAL = _k("metrics.hicache_host_total_tokens", "count", "HiCache host pool capacity",
                                "metrics", _RANK)
METRICS_LOAD_BACK_TOKENS_PER_S = _k("metrics.load_back_tokens_per_s", "tok_s", "tokens HiCache loaded back "
                                    "from host memory/s", "metrics")
_k("metrics.evicted_tokens_per_s", "tok_s", "device KV tokens the radix cache evicted/s", "metrics")
_k("metrics.hicache_backup_tokens_per_s", "tok_s", "tokens HiCache backed up to host memory/s", "metrics")
METRICS_LOAD_BACK_S_PER_TOKEN = _k("metrics.load_back_s_per_token", "s", "HiCache load-back copy seconds a token "
                                   "(Δ load_back_duration_seconds_sum ÷ Δ load_back_tokens_total)", "metrics")
METRICS_CACHED_TOKEN_RATIO = _k("metrics.cached_token_ratio", "ratio", "Δcached ÷ Δprompt tokens over the window",
                                "metrics")
METRICS_DIFFUSION_PREFIX = "metrics.diffusion_"
METRICS_DIFFUSION_NUM_QUEUE_REQS = _k("metrics.diffusion_num_queue_reqs", "count", "image requests waiting for "
                                      "first dispatch", "metrics", _RANK)
METRICS_DIFFUSION_NUM_RUNNING_REQS = _k("metrics.diffusion_num_running_reqs", "count", "image requests "
                                        "dispatched, not completed", "metrics", _RANK)
_k("metrics.diffusion_lora_loaded_adapters", "count", "loaded LoRA adapters", "metrics", _RANK)
_k("metrics.diffusion_lora_active_modules", "count", "pipeline modules with an active LoRA adapter", "metrics",
   _RANK)
_k("metrics.diffusion_lora_active_adapters", "count", "unique active LoRA adapters", "metrics", _RANK)
_k("metrics.diffusion_lora_module_active.<module>", "ratio", "1 when <module> has an active LoRA adapter",
   "metrics")
_k("metrics.diffusion_requests_per_s", "rps", "completed user image requests/s", "metrics")
_k("metrics.diffusion_failed_requests_per_s", "rps", "failed user image requests/s", "metrics")

#: histogram stem -> (unit suffix of its quantile keys, meaning); each writes `<stem>_p50<u>`,
#: `_p95<u>`, `_p99<u>`, `_mean<u>` (windowed estimates), `_clamped` (1 when a quantile fell in
#: the +Inf bucket) and `_window_count` (observations in the window)
HIST_QUANTILES = ("p50", "p95", "p99")
_HISTOGRAMS: dict[str, tuple[str, str, str]] = {  # stem -> (unit suffix, unit, meaning)
    "metrics.ttft": ("_s", "s", "time to first token"),
    "metrics.itl": ("_s", "s", "inter-token latency"),
    "metrics.e2e": ("_s", "s", "end-to-end request latency"),
    "metrics.queue_time": ("_s", "s", "time in the queue"),
    "metrics.tpot": ("_s", "s", "per-request time per output token"),
    "metrics.prefill_time": ("_s", "s", "a request's prefill phase, scheduled to first token"),
    "metrics.decode_time": ("_s", "s", "a request's decode phase, first to last token"),
    "metrics.load_back": ("_s", "s", "one HiCache load-back copy, host memory to GPU"),
    "metrics.kv_transfer_latency": ("_s", "s", "PD: one request's KV transfer, prefill side"),
    "metrics.kv_transfer_bootstrap": ("_s", "s", "PD: the handshake before a KV transfer"),
    "metrics.kv_transfer_alloc": ("_s", "s", "PD: the KV allocation wait before a transfer"),
    "metrics.kv_transfer_speed": ("_bytes_s", "bytes_s", "PD: one request's KV transfer speed"),
    "metrics.kv_transfer_size": ("_bytes", "bytes", "PD: one request's KV cache sent"),
    "metrics.stage_latency": ("_s", "s", "a request's time in one stage"),
    "metrics.router_request_duration": ("_s", "s", "router: one request, successes"),
    "metrics.diffusion_e2e": ("_s", "s", "image request latency"),
    "metrics.diffusion_queue_time": ("_s", "s", "image request time until first dispatch"),
    "metrics.diffusion_batch_size": ("", "count", "requests per dispatched batch"),
    "metrics.diffusion_stage": ("_s", "s", "host seconds per pipeline stage (DenoisingStep: per step)"),
}
#: stems whose keys are written per label value (`.<stage>`), never as a server figure alone
_HIST_SPLIT = {"metrics.diffusion_stage": ".<stage>", "metrics.stage_latency": ".<stage>"}
for _stem, (_u, _unit, _meaning) in _HISTOGRAMS.items():
    _split = _HIST_SPLIT.get(_stem, "")
    _stat_keys = [*(f"_{q}{_u}" for q in HIST_QUANTILES), f"_mean{_u}"]
    for _stat in _stat_keys:
        if _stem + _stat + _split in SERIES_KEYS:
            continue  # declared above: a gauge feeds it too
        _k(_stem + _stat + _split, _unit, f"{_meaning}: windowed {_stat.strip('_')}", "metrics")
    _k(_stem + "_clamped" + _split, "ratio", f"{_meaning}: 1 when a quantile fell in the +Inf bucket", "metrics")
    _k(_stem + "_window_count" + _split, "count", f"{_meaning}: observations in the window", "metrics")
HIST_STEMS: tuple[str, ...] = tuple(_HISTOGRAMS)


def hist_key(name: str, stat: str) -> str:
    """`metrics.<name>_<stat><unit>`: hist_key("ttft", "p99") -> `metrics.ttft_p99_s`; `stat` is
    p50 | p95 | p99 | mean | clamped | window_count."""
    stem = METRICS_PREFIX + name
    if stem not in _HISTOGRAMS:
        raise KeyError(f"{name!r} is not a histogram of storage/series_keys.py")
    u = _HISTOGRAMS[stem][0] if stat in (*HIST_QUANTILES, "mean") else ""
    return f"{stem}_{stat}{u}"


def diffusion_stage_hist_prefix(q: str) -> str:
    """`metrics.diffusion_stage_<q>_s.`, + a stage name: the stage histogram's quantile `q`."""
    return hist_key("diffusion_stage", q) + "."


# -- api.*: the engine's HTTP endpoints (/health, /v1/loads or /get_load; `.dp<d>` per DP rank) ---
API_HEALTH_OK = _k("api.health_ok", "ratio", "1 when /health answered 200, else 0", "api")
API_HEALTH_LATENCY_S = _k("api.health_latency_s", "s", "time to the /health answer (any status)", "api")
API_NUM_RUNNING_REQS = _k("api.num_running_reqs", "count", "running requests (sum over DP)", "api", _DP)
API_NUM_WAITING_REQS = _k("api.num_waiting_reqs", "count", "waiting requests (sum over DP)", "api", _DP)
API_NUM_USED_TOKENS = _k("api.num_used_tokens", "count", "KV tokens in use", "api", _DP)
API_MAX_TOTAL_NUM_TOKENS = _k("api.max_total_num_tokens", "count", "KV token capacity", "api", _DP)
API_TOKEN_USAGE = _k("api.token_usage", "ratio", "KV usage (mean over DP)", "api", _DP)
API_GEN_THROUGHPUT_TOK_S = _k("api.gen_throughput_tok_s", "tok_s", "decode tokens/s (sum over DP)", "api", _DP)
API_CACHE_HIT_RATE = _k("api.cache_hit_rate", "ratio", "radix hit rate (mean over DP)", "api", _DP)
API_UTILIZATION = _k("api.utilization", "ratio", "scheduler utilisation (mean over DP)", "api", _DP)
API_NUM_REQS = _k("api.num_reqs", "count", "requests in the server by its load endpoint (/get_load 0.4.7-0.5.20, /load)", "api", _DP)
API_NUM_PENDING_TOKENS = _k("api.num_pending_tokens", "count", "/get_load pending tokens", "api", _DP)

# -- canary.*: one short request per server per interval ------------------------------------------
CANARY_TTFT_S = _k("canary.ttft_s", "s", "request start -> first non-empty text chunk (LLM)", "canary")
CANARY_E2E_S = _k("canary.e2e_s", "s", "request start -> response fully read", "canary")
CANARY_OK = _k("canary.ok", "ratio", "1 when the request succeeded, else 0", "canary")

# -- prometheus.* and self.* ---------------------------------------------------------------------
PROMETHEUS_STALENESS_S = _k("prometheus.staleness_s", "s", "age of the newest sample Prometheus holds for the "
                            "server", "prometheus")
SELF_CPU_PCT = _k("self.cpu_pct", "pct", "CPU of the runner process, % of one core", "self")
SELF_LOOP_LAG_S = _k("self.loop_lag_s", "s", "worst scheduler loop lateness of the interval", "self")
SELF_ROWS_PER_S = _k("self.rows_per_s", "count", "rows the runner wrote per second", "self")

# -- gpu.<gpu>.*: one GPU (collectors/gpu.py has the cross-checks) ---------------------------------
#: field (the key after `gpu.<gpu>.`) -> (unit, meaning)
GPU_FIELDS: dict[str, tuple[str, str]] = {
    "util_ratio": ("ratio", "fraction of the last sample period a kernel ran"),
    "mem_util_ratio": ("ratio", "fraction of time device memory was read or written"),
    "mem_used_bytes": ("bytes", "device memory in use"),
    "mem_total_bytes": ("bytes", "device memory installed"),
    "mem_reserved_bytes": ("bytes", "driver-reserved memory"),
    "power_w": ("w", "board power draw"),
    "power_limit_w": ("w", "enforced power limit"),
    "energy_j": ("j", "energy since the driver loaded (a counter)"),
    "temp_c": ("c", "GPU core temperature"),
    "sm_clock_hz": ("", "SM clock, Hz"),
    "sm_clock_max_hz": ("", "the SM clock's maximum, Hz (what a held clock is held below)"),
    "mem_clock_hz": ("", "memory clock, Hz"),
    "clock_event_reasons": ("", "clock event reason bits active now (a bitmask)"),
    "throttle_power": ("ratio", "1 when a power-cap or brake reason is active"),
    "throttle_thermal": ("ratio", "1 when a thermal or HW-slowdown reason is active"),
    "ecc_corrected": ("count", "volatile corrected ECC errors"),
    "ecc_uncorrected": ("count", "volatile uncorrected ECC errors"),
    "pcie_tx_bytes_s": ("bytes_s", "PCIe transmit"),
    "pcie_rx_bytes_s": ("bytes_s", "PCIe receive"),
    "fan_ratio": ("ratio", "fan speed"),
    "pstate": ("", "performance state (0 = max)"),
    "procs": ("count", "processes on the GPU"),
    "procs_mem_bytes": ("bytes", "memory of the processes on the GPU"),
    "server_mem_bytes": ("bytes", "memory held by this server's processes"),
    **{f"gpm.{name}_ratio": ("ratio", f"GPM (Hopper+): {what}") for name, what in (
        ("graphics_util", "graphics engine active"), ("sm_util", "SMs busy"),
        ("sm_occupancy", "warps resident vs the maximum"), ("dram_bw_util", "DRAM bandwidth vs peak"),
        ("tensor_any", "any tensor core active"), ("tensor_hmma", "FP16/BF16 tensor cores"),
        ("tensor_imma", "INT8 tensor cores"), ("tensor_dmma", "FP64 tensor cores"),
        ("fp16", "FP16 pipe"), ("fp32", "FP32 pipe"), ("fp64", "FP64 pipe"))},
    **{f"gpm.{name}_bytes_s": ("bytes_s", f"GPM (Hopper+): {what}") for name, what in (
        ("pcie_tx", "PCIe transmit"), ("pcie_rx", "PCIe receive"),
        ("nvlink_tx", "NVLink transmit"), ("nvlink_rx", "NVLink receive"))},
}
for _field, (_unit, _meaning) in GPU_FIELDS.items():
    _k(f"{GPU_PREFIX}<gpu>.{_field}", _unit, _meaning, "gpu")


def gpu_prefix(index: int, mig_id: int | None = None) -> str:
    """`gpu.<i>.` for a card, `gpu.<i>.mig<GPU_I_ID>.` for one of its MIG instances."""
    return f"{GPU_PREFIX}{index}." if mig_id is None else f"{GPU_PREFIX}{index}.mig{mig_id}."


def gpu_key(index: int, field: str, mig_id: int | None = None) -> str:
    """`gpu.<i>.<field>` (a GPU_FIELDS field): gpu_key(0, "power_w") -> `gpu.0.power_w`."""
    if field not in GPU_FIELDS:
        raise KeyError(f"{field!r} is not a GPU field of storage/series_keys.py")
    return gpu_prefix(index, mig_id) + field


def gpu_pattern(field: str) -> str:
    """`gpu.<gpu>.<field>`: the field on every GPU (and MIG instance) a server's series name;
    `keys_matching` lists the stored keys it stands for."""
    if field not in GPU_FIELDS:
        raise KeyError(f"{field!r} is not a GPU field of storage/series_keys.py")
    return f"{GPU_PREFIX}<gpu>.{field}"


# -- reading the table ----------------------------------------------------------------------------
_MATCHERS: list[tuple[re.Pattern[str], SeriesKey]] = [(e.regex(), e) for e in SERIES_KEYS.values()]


def entry(key: str) -> SeriesKey | None:
    """The table entry a stored key belongs to (a per-rank or per-stage key included); None for
    a key Pitwall does not write."""
    hit = SERIES_KEYS.get(key)
    if hit is not None:
        return hit
    for rx, e in _MATCHERS:
        if rx.fullmatch(key):
            return e
    return None


def unit_of(key: str) -> str:
    """The storage/units.py unit of a stored key ("" when it has none or is not in the table)."""
    e = entry(key)
    return "" if e is None else e.unit


def keys_matching(pattern: str, keys: list[str]) -> list[str]:
    """The keys of `keys` a pattern (`gpu.<gpu>.temp_c`) stands for; a plain key matches itself."""
    if "<" not in pattern:
        return [k for k in keys if k == pattern]
    rx = SeriesKey(pattern, "", "", "").regex()
    return [k for k in keys if rx.fullmatch(k)]


def pattern_prefix(pattern: str) -> str:
    """The fixed part of a pattern before its first placeholder (`gpu.` of `gpu.<gpu>.temp_c`)."""
    return pattern.split("<", 1)[0]
