"""The one scorecard-input gatherer: a server's window, read through `SeriesReads`, turned into
ScorecardInputs (scorecard/inputs.py) by `gather_window`.

Two readers feed it: scorecard/window_reads.py `WindowReads` (one server, raw samples where they
are kept and rollups where retention removed them: the Server page, Compare, exports) and the
fleet view's per-server slice of its batched reads (dashboard/services/views/fleet.py: a fixed
number of queries for every server at once). Both answer the same questions, so a fleet row's
figures are the server's scorecard over the same window, computed by the same lines.

What the gatherer fills (units as in ScorecardInputs): the window means of MEAN_KEYS, the
server's own TTFT / ITL / E2E percentile estimates (each the window's mean of the estimate) and
whether their histograms clamped, the canary's values, the prefill token totals, the queue and
health series, the decode-line spans (tokens made while busy, when neither a probe run nor
`metrics.generation_tokens_per_s` gives the rate), the GPU count, the probe run's requests and
its workload detail (load mode, images per request, steps) and, for image servers, the diffusion
inputs. What only one reader has (per-GPU energy and memory, walls, events, chart series) its
caller adds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd

from scorecard import math as sm
from scorecard.image import DIFFUSION_KEYS, diffusion_inputs
from scorecard.inputs import ScorecardInputs
from scorecard.metric_specs import CACHE_TIERS, tier_key
from storage import series_keys as sk
from storage.models import Launch, ProbeRun, Server

MEAN_KEYS = (
    sk.LOG_GEN_THROUGHPUT_TOK_S,
    sk.LOG_INPUT_THROUGHPUT_TOK_S,
    sk.LOG_RUNNING_REQ,
    sk.METRICS_GEN_THROUGHPUT_TOK_S,
    sk.METRICS_NUM_RUNNING_REQS,
    sk.METRICS_REQUESTS_PER_S,
    sk.METRICS_GENERATION_TOKENS_PER_S,
    sk.METRICS_PROMPT_TOKENS_PER_S,
    sk.METRICS_CACHED_TOKENS_PER_S,
)
QUEUE_KEYS = (sk.LOG_QUEUE_REQ, sk.METRICS_NUM_QUEUE_REQS, DIFFUSION_KEYS["queue"])
HIST_NAMES = ("ttft", "itl", "e2e")
DIFFUSION_PREFIXES = (sk.LOG_DIFFUSION_PREFIX, sk.METRICS_DIFFUSION_PREFIX)
#: figure keys the canary's raw values feed (marked unavailable when they are only in rollups)
CANARY_FIGURES = tuple(f"{n}_p{p}_s" for n in ("ttft", "e2e", "image") for p in sm.PCTS) + (
    "ttft_p99_p50_ratio",)


Spans = list[tuple[float, float]]


class SeriesReads(Protocol):
    """One server's series over a window. `figures`: figure keys that cannot be computed when
    the series is not there sample by sample (the reader marks them in `unavailable`)."""

    unavailable: dict[str, str]

    def window_mean(self, metric: str) -> float | None: ...
    def total(self, metric: str) -> tuple[float, int]: ...  # (Σ values, count)
    def maximum(self, metric: str) -> float | None: ...
    def count(self, metric: str) -> int: ...
    def values(self, metric: str, *figures: str) -> np.ndarray: ...
    def points(self, metric: str, *figures: str) -> tuple[np.ndarray, np.ndarray]: ...
    def names(self, prefixes: Sequence[str]) -> list[str]: ...


def probe_detail(run: ProbeRun | None) -> tuple[dict[str, Any], int, str]:
    """(fingerprint detail, images per request, load mode) of a probe run (None: no run)."""
    detail = (run.fingerprint_detail or {}) if run is not None else {}
    return detail, int((detail.get("image") or {}).get("n") or 1), str(detail.get("mode") or "concurrency")


def decode_spans(reads: SeriesReads) -> tuple[Spans | None, float | None]:
    """Without /metrics the token rate is the engine's decode log lines, logged only while it decodes: the
    window's tokens and energy are counted over the time those lines cover, idle time neither
    credited with tokens nor charged with its energy (one truth for J/token). Returns
    the busy spans (None when the lines give no token count) and the output tokens over them."""
    g_ts, g_rate = reads.points(sk.LOG_GEN_THROUGHPUT_TOK_S)
    log_tokens = sm.rate_over_spans(g_ts, g_rate)
    return (sm.busy_spans(g_ts) if log_tokens is not None else None), log_tokens


def gather_window(reads: SeriesReads, *, srv: Server, launch: Launch | None, run: ProbeRun | None,
                  requests: pd.DataFrame | None, gpus_seen: Sequence[int], since: float,
                  until: float, subject: Callable[[Spans | None], dict[str, Any]], provenance: dict[str, Any],
                  electricity_usd_per_kwh: float | None = None, level: float | None = None,
                  event_counts: dict[str, int] | None = None
                  ) -> ScorecardInputs:
    """The ScorecardInputs of [since, until) from `reads` (module docstring). `subject` is called
    once the series are read, before the canary's values, with the decode-line spans the window's
    tokens were counted over (None: the rate came from elsewhere): the caller reads there what
    needs them (energy over the same spans) and returns the subject, whose resolution then names
    what was read. A caller that reads more afterwards sets `unavailable` again."""
    detail, images_per_request, mode = probe_detail(run)
    means = {k: reads.window_mean(k) for k in MEAN_KEYS}
    server_hist: dict[str, np.ndarray] = {}
    clamped: dict[str, bool | None] = {}
    for name in HIST_NAMES:
        for p in sm.PCTS:
            est = reads.window_mean(sk.hist_key(name, f"p{p}"))  # the window's mean of the estimate
            server_hist[f"{name}_p{p}"] = np.empty(0) if est is None else np.array([est])
        high = reads.maximum(sk.hist_key(name, "clamped"))
        clamped[name] = None if high is None else bool(high >= 0.5)
    prompt_sum, _ = reads.total(sk.METRICS_PROMPT_TOKENS_PER_S)
    tier_shares: dict[str, float] = {}
    for tier in CACHE_TIERS if prompt_sum > 0 else ():
        got, n = reads.total(tier_key(tier))
        if n:  # Σ/Σ over the window's scrapes: a scrape before the tier's first hit counts 0
            tier_shares[tier] = got / prompt_sum
    cached, n_cached = reads.total(sk.LOG_PREFILL_CACHED_TOKEN)
    new, n_new = reads.total(sk.LOG_PREFILL_NEW_TOKEN)
    queue_key = next((k for k in QUEUE_KEYS if reads.count(k)), QUEUE_KEYS[0])
    q_ts, q_vals = reads.points(queue_key, "queue_above_threshold_s")
    _, health = reads.points(sk.API_HEALTH_OK, "health_flaps")
    diffusion = diffusion_inputs(reads.values, reads.names(DIFFUSION_PREFIXES)) if srv.kind == "image" else {}
    spans, log_tokens = (decode_spans(reads) if run is None and means.get(
        sk.METRICS_GENERATION_TOKENS_PER_S) is None else (None, None))
    ok_sum, ok_n = reads.total(sk.CANARY_OK)
    n_gpu, gpu_note = sm.gpu_count(srv.gpu_indices, gpus_seen, launch.server_args if launch else None)
    out_rate = means.get(sk.METRICS_GENERATION_TOKENS_PER_S) or means.get(sk.LOG_GEN_THROUGHPUT_TOK_S)
    about = subject(spans)
    canary_ttft = reads.values(sk.CANARY_TTFT_S, *CANARY_FIGURES)
    canary_e2e = reads.values(sk.CANARY_E2E_S, *CANARY_FIGURES)
    inputs = ScorecardInputs(
        subject=about,
        provenance=provenance,
        kind=srv.kind,
        engine=srv.engine,
        gpu_hourly_usd=srv.gpu_hourly_usd,
        gpu_count=n_gpu,
        gpu_count_note=gpu_note,
        electricity_usd_per_kwh=electricity_usd_per_kwh,
        probe_requests=requests,
        probe_mode=mode,
        images_per_request=images_per_request,
        level=level,
        canary_ttft_s=canary_ttft,
        canary_e2e_s=canary_e2e,
        canary_ok=reads.values(sk.CANARY_OK),
        canary_ok_sum=(ok_sum, ok_n) if ok_n else None,
        server_hist=server_hist,
        server_clamped=clamped,
        means=means,
        prefill_cached_tokens=cached if n_cached else None,
        cache_tier_shares=tier_shares,
        prefill_new_tokens=new if n_new else None,
        queue_ts=q_ts,
        queue_values=q_vals,
        queue_max=reads.maximum(queue_key),
        health_values=health,
        busy_s=None if spans is None else float(sum(b - a for a, b in spans)),
        window_output_tokens=log_tokens if spans is not None else (
            None if out_rate is None else out_rate * (until - since)),
        event_counts=dict(event_counts or {}),
        image_steps=(detail.get("image") or {}).get("steps"),
        diffusion=diffusion,
        unavailable=dict(reads.unavailable),
    )
    return inputs
