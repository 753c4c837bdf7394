"""METRIC_SPECS: every scorecard figure declared once (key, label, dimension, units, direction, formula).

Scorecards (build.py, compute.py), SLO grading (slo.py), comparisons (compare.py), charts and
every export read this table; the README's metric table is `metric_table_markdown()` pasted
verbatim (a meta-test compares them). A figure's `key` is also its SLO key in pitwall.toml's
`[slo]` table.

Units: `unit` is the base unit the value is stored and exported in, a key of storage/units.py
UNITS (`s`, `ratio` 0-1, `rps`, `tok_s`, `img_min`, `usd`, `usd_h`, `j`, `w`, `count`, `x`,
`bytes`, `bytes_s`, `verdict`: an index into scorecard/gpu_wall.py VERDICTS, the word in
the figure's note); `display` is its label there, and `fmt_value(value, unit)` in
present/format.py writes a value as a person reads it. `better` is
`lower`, `higher` or `none` (informational, never coloured or graded).

Where the inputs come from (Sample keys are the collectors' contract; each collector's docstring names its keys):
- probe figures: ProbeRequest rows of the scorecard's probe run, exact numpy percentiles
  (linear interpolation), measured (non-warm-up) successful requests of the headline level;
- canary figures (no probe run): `canary.ttft_s` / `canary.e2e_s` samples in the window;
- server figures: `metrics.*` / `log.*` samples in the window, energy from `gpu.<i>.energy_j`.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage import series_keys as sk
from storage import units

DIMENSIONS = ("latency", "throughput", "cost", "stability")
DIMENSION_LABELS = {
    "latency": "Latency",
    "throughput": "Throughput",
    "cost": "Cost",
    "stability": "Stability",
}


@dataclass(frozen=True)
class MetricSpec:
    key: str  # unique; also the [slo] key
    label: str
    dimension: str  # one of DIMENSIONS
    unit: str  # base unit of the value (see module docstring)
    better: str  # "lower" | "higher" | "none"
    formula: str  # how the value is computed, in words, with its inputs

    @property
    def display(self) -> str:
        return units.label(self.unit)


def tier_key(tier: str) -> str:
    """`metrics.cache_hit_tokens_per_s.<tier>`: prefix-cache hit tokens/s served from one tier."""
    return sk.pattern_prefix(sk.METRICS_CACHE_HIT_BY_SOURCE) + tier


#: HiCache's tiers as `cached_tokens_total{cache_source}` names them -> where the hit came from
CACHE_TIERS: dict[str, str] = {"device": "GPU memory", "host": "host memory (HiCache)",
                               "storage": "storage (HiCache L3)"}


def latency_key(name: str, p: int) -> str:
    """The key of a latency percentile figure, seconds: `latency_key("ttft", 99)` is `ttft_p99_s`
    (name one of _LAT_NAMES or `image`, p one of 50, 95, 99)."""
    return f"{name}_p{p}_s"


# -- named keys: what views, exports and the CLI import instead of spelling a figure's key --------
# (tests/foundation/test_metric_keys.py holds dashboard/services/views/ to that)
TTFT_P50_S, TTFT_P95_S, TTFT_P99_S = (latency_key("ttft", p) for p in (50, 95, 99))
ITL_P50_S, ITL_P95_S, ITL_P99_S = (latency_key("itl", p) for p in (50, 95, 99))
E2E_P50_S, E2E_P95_S, E2E_P99_S = (latency_key("e2e", p) for p in (50, 95, 99))
IMAGE_P50_S, IMAGE_P95_S, IMAGE_P99_S = (latency_key("image", p) for p in (50, 95, 99))
IMAGE_STEP_S = "image_step_s"
RPS = "rps"
OUTPUT_TOK_S = "output_tok_s"
IMAGES_PER_MIN = "images_per_min"
RADIX_HIT_RATE = "radix_hit_rate"
GPU_USD_PER_HOUR = "gpu_usd_per_hour"
USD_PER_1M_OUTPUT_TOK = "usd_per_1m_output_tok"
USD_PER_IMAGE = "usd_per_image"
AVG_POWER_W = "avg_power_w"
ENERGY_J_PER_OUTPUT_TOK = "energy_j_per_output_tok"
ENERGY_J_PER_IMAGE = "energy_j_per_image"
ELECTRICITY_USD_PER_1M_OUTPUT_TOK = "electricity_usd_per_1m_output_tok"
SUCCESS_RATE = "success_rate"
ERROR_COUNT = "error_count"
OOM_COUNT = "oom_count"
CRASH_COUNT = "crash_count"
RESTART_COUNT = "restart_count"
PEAK_MEM_BYTES = "peak_mem_bytes"
MEM_HEADROOM_BYTES = "mem_headroom_bytes"
#: fleet row keys that are not a scorecard key (FLEET_ROW_FIGURES maps them to theirs)
FLEET_USD_PER_MTOK = "usd_per_mtok"
FLEET_CACHE_HIT_RATE = "cache_hit_rate"

_LAT_NAMES = {
    "ttft": ("TTFT", "time to first token"),
    "itl": ("ITL", "inter-token latency, pooled over every per-token gap"),
    "tpot": ("TPOT", "time per output token, (e2e - ttft) / (tokens_out - 1) per request"),
    "e2e": ("E2E", "end-to-end request latency"),
}
_SERVER_HIST = ("ttft", "itl", "e2e")  # histograms of storage/series_keys.py


def _latency_specs() -> list[MetricSpec]:
    out: list[MetricSpec] = []
    for name, (short, meaning) in _LAT_NAMES.items():
        for p in (50, 95, 99):
            canary = (
                f"; without probes: p{p} of `canary.{name}_s` samples (labelled canary only)"
                if name in ("ttft", "e2e")
                else ""
            )
            out.append(
                MetricSpec(
                    latency_key(name, p),
                    f"{short} p{p}",
                    "latency",
                    "s",
                    "lower",
                    f"p{p} of the probe's {meaning} (exact, ProbeRequest rows){canary}",
                )
            )
    for p in (50, 95, 99):
        out.append(
            MetricSpec(
                latency_key("image", p),
                f"Per-image latency p{p}",
                "latency",
                "s",
                "lower",
                f"image servers: p{p} of e2e_s / images per request over the probe's requests",
            )
        )
    for name in _SERVER_HIST:
        for p in (50, 95, 99):
            out.append(
                MetricSpec(
                    f"server_{name}_p{p}_s",
                    f"Server {_LAT_NAMES[name][0]} p{p} (histogram)",
                    "latency",
                    "s",
                    "lower",
                    f"mean of `{sk.hist_key(name, f'p{p}')}` samples in the window (the server's histogram "
                    f"estimate); flagged when any `{sk.hist_key(name, 'clamped')}` sample is 1 (the "
                    "quantile hit the last finite bucket, so the true value is higher)",
                )
            )
    return out


METRIC_SPECS: tuple[MetricSpec, ...] = (
    *_latency_specs(),
    MetricSpec(IMAGE_STEP_S, "Seconds per denoising step", "latency", "s", "lower",
               "image servers: mean of `log.diffusion.step_s` (DenoisingStage 'average time per "
               "step') in the window; else `metrics.diffusion_stage_p50_s.DenoisingStep`; else "
               "`metrics.diffusion_stage_p50_s.DenoisingStage` / steps; else the probe's inference_time_s p50 / steps (an upper bound)"),
    MetricSpec("image_steps", "Denoising steps", "latency", "count", "none",
               "image servers: num_inference_steps of the probe workload (in its fingerprint)"),
    MetricSpec("stage_share_encode", "Share of time: text encode", "latency", "ratio", "none",
               "image servers: Σ `log.diffusion.stage_s.<*Encoding*>` / Σ every stage (else "
               "the /metrics stage p50s); the note names the source"),
    MetricSpec("stage_share_denoise", "Share of time: denoise", "latency", "ratio", "none",
               "image servers: DenoisingStage seconds / Σ every stage, as stage_share_encode"),
    MetricSpec("stage_share_decode", "Share of time: VAE decode", "latency", "ratio", "none",
               "image servers: DecodingStage seconds / Σ every stage, as stage_share_encode"),
    MetricSpec("stage_share_other", "Share of time: other stages", "latency", "ratio", "none",
               "image servers: every other stage (latent / timestep preparation, new ones) / Σ "
               "every stage"),
    # -- throughput ---------------------------------------------------------------------------
    MetricSpec(RPS, "Requests/s", "throughput", "rps", "higher",
               "probe: successful requests / the steady window, as Benchmarks (last warm-up end -> last "
               "measured start, else first start -> last end); without probes: mean of `metrics.requests_per_s`"),
    MetricSpec(OUTPUT_TOK_S, "Output tokens/s", "throughput", "tok_s", "higher",
               "probe: Σ tokens_out of successful requests / the steady window; without probes: mean "
               "of `metrics.generation_tokens_per_s`, else `log.gen_throughput_tok_s`"),
    MetricSpec("input_tok_s", "Input tokens/s", "throughput", "tok_s", "higher",
               "probe: Σ tokens_in of successful requests / the steady window; without probes: mean "
               "of `metrics.prompt_tokens_per_s`, else `log.input_throughput_tok_s`"),
    MetricSpec(IMAGES_PER_MIN, "Images/min", "throughput", "img_min", "higher",
               "image servers: images of successful requests / level window × 60"),
    MetricSpec("server_gen_tok_s", "Server gen throughput", "throughput", "tok_s", "higher",
               "mean of `log.gen_throughput_tok_s` samples in the window, else "
               "`metrics.gen_throughput_tok_s` (what the scheduler reports)"),
    MetricSpec("avg_running_batch", "Avg running batch", "throughput", "count", "higher",
               "mean of `log.running_req` samples in the window, else `metrics.num_running_reqs`"),
    MetricSpec(RADIX_HIT_RATE, "Radix cache hit rate", "throughput", "ratio", "higher",
               "token-weighted: Σ `log.prefill_cached_token` / Σ (`log.prefill_cached_token` + "
               "`log.prefill_new_token`) in the window; else mean `metrics.cached_tokens_per_s` / "
               "mean `metrics.prompt_tokens_per_s`; else Σ tokens_cached / Σ tokens_in of the "
               "probe's requests (client-reported)"),
    *(MetricSpec(f"radix_hit_rate_{tier}", f"Radix hits from {where}", "throughput", "ratio", "none",
                 f"share of prompt tokens served from {where}: mean `metrics.cache_hit_tokens_per_s.{tier}` / "
                 "mean `metrics.prompt_tokens_per_s` (`cached_tokens_total{cache_source}`, 0.5.9+); not "
                 "applicable where the server splits no hit by tier")
      for tier, where in CACHE_TIERS.items()),
    MetricSpec("gpu_bound_by", "GPU bound by", "throughput", "verdict", "none",
               "the verdict of most GPM samples of the server's GPUs in the window (memory "
               "bandwidth, compute, neither wall, idle, mixed, power; rules in scorecard/gpu_wall.py, "
               "from `gpu.<i>.gpm.dram_bw_util_ratio`, `tensor_any_ratio`, `sm_util_ratio` and the "
               "queue); the value is its index, the note names it with its evidence; missing (never "
               "0) without GPM"),
    MetricSpec("gpu_bandwidth_bound_share", "Share of GPU time bound by memory bandwidth",
               "throughput", "ratio", "none",
               "GPM samples of every GPU with the verdict `bandwidth` / all GPM samples in the window"),
    MetricSpec("gpu_compute_bound_share", "Share of GPU time bound by compute", "throughput",
               "ratio", "none",
               "GPM samples of every GPU with the verdict `compute` / all GPM samples in the window"),
    MetricSpec("gpu_power_bound_share", "Share of GPU time held by the power cap", "throughput",
               "ratio", "none",
               "GPM samples of every GPU with the verdict `power` (a power or thermal limit held the "
               "SM clock on compute work) / all GPM samples in the window"),
    MetricSpec("gpu_achieved_bw_bytes_s", "Achieved memory bandwidth per GPU", "throughput",
               "bytes_s", "none",
               "mean over GPUs of mean `gpu.<i>.gpm.dram_bw_util_ratio` × the card's peak memory "
               "bandwidth (GPU_SPECS); the note gives the share of the peak"),
    MetricSpec("denoise_bandwidth_share", "Share of denoising time bound by memory bandwidth",
               "throughput", "ratio", "none",
               "image servers: seconds of DenoisingStage intervals ([ts − s, ts] of "
               "`log.diffusion.stage_s.DenoisingStage`) covered by GPM samples with the verdict "
               "`bandwidth` / seconds covered by any GPM sample, pooled over GPUs"),
    MetricSpec("denoise_compute_share", "Share of denoising time bound by compute", "throughput",
               "ratio", "none",
               "image servers: as denoise_bandwidth_share, for the verdict `compute`"),
    MetricSpec("image_step_s_what_if", "Seconds per step on a B300 (what-if)", "throughput", "s",
               "none",
               "image servers: image_step_s × (the memory share × this card's / the B300's memory "
               "bandwidth + the compute and power-held share × this card's / the B300's dense BF16 "
               "FLOPS + the rest unchanged), where the memory share is the bandwidth-bound time plus, "
               "of compute- and power-bound time, the part DRAM / (DRAM + tensor) activity gives "
               "(elementwise, norm and copy work); the note states the assumption"),
    # -- cost ---------------------------------------------------------------------------------
    MetricSpec(GPU_USD_PER_HOUR, "GPU cost per hour", "cost", "usd_h", "none",
               "Server.gpu_hourly_usd × GPU count (gpu_indices, else GPUs seen in `gpu.<i>.*`, "
               "else tp_size × dp_size of the launch, else 1); missing price: not configured"),
    MetricSpec(USD_PER_1M_OUTPUT_TOK, "USD per 1M output tokens", "cost", "usd", "lower",
               "gpu_usd_per_hour / 3600 / output_tok_s × 1e6"),
    MetricSpec("usd_per_1m_total_tok", "USD per 1M total tokens", "cost", "usd", "lower",
               "gpu_usd_per_hour / 3600 / (input_tok_s + output_tok_s) × 1e6"),
    MetricSpec(USD_PER_IMAGE, "USD per image", "cost", "usd", "lower",
               "gpu_usd_per_hour / 60 / images_per_min"),
    MetricSpec("usd_per_1k_requests", "USD per 1,000 requests", "cost", "usd", "lower",
               "gpu_usd_per_hour / 3600 / rps × 1000"),
    MetricSpec("usd_per_1m_output_tok_at_slo", "USD per 1M output tokens at the TTFT target",
               "cost", "usd", "lower",
               "cheapest usd_per_1m_output_tok over the probe's load levels whose TTFT p99 meets "
               "the ttft_p99_s SLO target (names the level)"),
    MetricSpec(AVG_POWER_W, "Avg GPU power", "cost", "w", "lower",
               "Σ over GPUs of Δ`gpu.<i>.energy_j` / window seconds (counter deltas; without /metrics "
               "only the time the engine logged decode lines), else Σ mean `gpu.<i>.power_w`"),
    MetricSpec(ENERGY_J_PER_OUTPUT_TOK, "Energy per output token", "cost", "j", "lower",
               "Σ over GPUs of Δ`gpu.<i>.energy_j` over the window / output tokens produced in it; "
               "without /metrics both over only the time the engine logged decode lines (idle excluded)"),
    MetricSpec(ENERGY_J_PER_IMAGE, "Energy per image", "cost", "j", "lower",
               "Σ over GPUs of Δ`gpu.<i>.energy_j` over the window / images produced in it"),
    MetricSpec(ELECTRICITY_USD_PER_1M_OUTPUT_TOK, "Electricity per 1M output tokens", "cost",
               "usd", "lower",
               "energy_j_per_output_tok × 1e6 / 3.6e6 J/kWh × electricity_usd_per_kwh"),
    # -- stability ----------------------------------------------------------------------------
    MetricSpec(SUCCESS_RATE, "Success rate", "stability", "ratio", "higher",
               "probe: ok / measured requests over every level; without probes: mean of "
               "`canary.ok`"),
    MetricSpec(ERROR_COUNT, "Errors", "stability", "count", "lower",
               "failed measured probe requests (by kind in errors_by_kind); without probes: "
               "canary samples with `canary.ok` = 0"),
    MetricSpec(OOM_COUNT, "OOMs", "stability", "count", "lower",
               "`oom` + `prefill_oom` events in the window"),
    MetricSpec("retraction_count", "Decode retractions", "stability", "count", "lower",
               "`decode_retract` events in the window"),
    MetricSpec(CRASH_COUNT, "Crashes", "stability", "count", "lower",
               "`crash` events in the window"),
    MetricSpec(RESTART_COUNT, "Server exits / restarts", "stability", "count", "lower",
               "`server_exit` events in the window"),
    MetricSpec("nccl_timeout_count", "NCCL timeouts", "stability", "count", "lower",
               "`nccl_timeout` events in the window"),
    MetricSpec("queue_max", "Max queue", "stability", "count", "lower",
               "max of `log.queue_req` (else `metrics.num_queue_reqs`) in the window"),
    MetricSpec("queue_above_threshold_s", "Time with queue above threshold", "stability", "s",
               "lower",
               "Σ (ts[i+1] - ts[i]) over queue samples with value > [slo] queue_threshold "
               "(default 16): the queue as a step function"),
    MetricSpec("timeout_count", "Timeouts", "stability", "count", "lower",
               "measured probe requests that failed with error kind `timeout`"),
    MetricSpec(PEAK_MEM_BYTES, "Peak GPU memory per request", "stability", "bytes", "lower",
               "image servers: max `peak_memory_mb` × 2^20 of the probe's requests; else max "
               "`log.diffusion.peak_mem_gb` × 2^30 in the window"),
    MetricSpec(MEM_HEADROOM_BYTES, "GPU memory headroom at peak", "stability", "bytes",
               "higher",
               "image servers: min `log.diffusion.remaining_mem_gb` × 2^30 (the server's "
               "'Remaining GPU memory at peak'); else Σ NVML `gpu.<i>.mem_total_bytes` − "
               "peak_mem_bytes"),
    MetricSpec("ttft_p99_p50_ratio", "TTFT p99/p50", "stability", "x", "lower",
               "ttft_p99_s / ttft_p50_s (tail spread; 1 = flat)"),
    MetricSpec("health_flaps", "Health flaps", "stability", "count", "lower",
               "`health_down` events in the window, else 1 -> 0 transitions of `api.health_ok`"),
    MetricSpec("structured_valid_rate", "Structured output valid rate", "stability", "ratio",
               "higher",
               "structured-output probe runs only: measured successful requests whose output "
               "passed the check (`detail.structured.valid`) / those checked; not applicable "
               "otherwise"),
    MetricSpec("cold_grammar_ttft_s", "Cold-grammar TTFT", "latency", "s", "lower",
               "structured-output probe runs only: TTFT of the run's first request (a schema "
               "the server had not compiled); the note gives the warm p50 beside it"),
)

SPECS_BY_KEY: dict[str, MetricSpec] = {s.key: s for s in METRIC_SPECS}
if len(SPECS_BY_KEY) != len(METRIC_SPECS):  # pragma: no cover - a programming error
    raise RuntimeError("METRIC_SPECS declares a key twice")

#: the server series a figure reads when it comes from the server (no probe run, or always), in
#: the order it prefers them. scorecard/compute.py reads the plain fallbacks (rps, tokens/s, gen
#: throughput, running batch) from here; the radix, tier and histogram rows list what compute.py
#: and gather.py read by name. The metric drift guard (present/dependents.py) names the figures a
#: vanished family leaves without input from this table.
SERVER_SERIES: dict[str, tuple[str, ...]] = {
    RPS: (sk.METRICS_REQUESTS_PER_S,),
    OUTPUT_TOK_S: (sk.METRICS_GENERATION_TOKENS_PER_S, sk.LOG_GEN_THROUGHPUT_TOK_S),
    "input_tok_s": (sk.METRICS_PROMPT_TOKENS_PER_S, sk.LOG_INPUT_THROUGHPUT_TOK_S),
    "server_gen_tok_s": (sk.LOG_GEN_THROUGHPUT_TOK_S, sk.METRICS_GEN_THROUGHPUT_TOK_S),
    "avg_running_batch": (sk.LOG_RUNNING_REQ, sk.METRICS_NUM_RUNNING_REQS),
    RADIX_HIT_RATE: (sk.LOG_PREFILL_CACHED_TOKEN, sk.LOG_PREFILL_NEW_TOKEN, sk.METRICS_CACHED_TOKENS_PER_S,
                     sk.METRICS_PROMPT_TOKENS_PER_S),
    **{f"radix_hit_rate_{tier}": (tier_key(tier), sk.METRICS_PROMPT_TOKENS_PER_S) for tier in CACHE_TIERS},
    **{f"server_{h}_p{p}_s": (sk.hist_key(h, f"p{p}"),) for h in _SERVER_HIST for p in (50, 95, 99)},
}

#: the figures a fleet row (the Overview's table, `pitwall export --fleet table`) carries from its
#: server's scorecard: fleet row key -> scorecard key
FLEET_ROW_FIGURES: dict[str, str] = {
    OUTPUT_TOK_S: OUTPUT_TOK_S, RPS: RPS, TTFT_P95_S: TTFT_P95_S, TTFT_P99_S: TTFT_P99_S,
    FLEET_CACHE_HIT_RATE: RADIX_HIT_RATE, FLEET_USD_PER_MTOK: USD_PER_1M_OUTPUT_TOK, SUCCESS_RATE: SUCCESS_RATE,
    IMAGES_PER_MIN: IMAGES_PER_MIN, USD_PER_IMAGE: USD_PER_IMAGE}
#: the latency a fleet scorecard pools over its servers' probe requests (scorecard keys, seconds)
FLEET_LATENCY_KEYS: tuple[str, ...] = tuple(latency_key(n, p) for n in ("ttft", "e2e") for p in (50, 95, 99))


def spec(key: str) -> MetricSpec:
    """The spec of a figure; KeyError names the unknown key."""
    try:
        return SPECS_BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown metric {key!r}; see METRIC_SPECS") from None


def specs_of(dimension: str) -> list[MetricSpec]:
    return [s for s in METRIC_SPECS if s.dimension == dimension]


def metric_table_markdown() -> str:
    """METRIC_SPECS as the README's Markdown table (paste verbatim; a meta-test compares)."""
    lines = [
        "| key | metric | dimension | unit | better | formula |",
        "|---|---|---|---|---|---|",
    ]
    for s in METRIC_SPECS:
        formula = s.formula.replace("|", "\\|")
        lines.append(
            f"| `{s.key}` | {s.label} | {s.dimension} | {s.display} | {s.better} | {formula} |"
        )
    return "\n".join(lines) + "\n"
