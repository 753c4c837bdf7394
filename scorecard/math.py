"""The scorecard formulas as pure functions of numbers and arrays (no storage, no Streamlit).

Every formula of METRIC_SPECS that is more than a mean lives here, so tests feed hand-computed
fixtures. Conventions: seconds, tokens, joules, USD; a missing input gives None (never 0);
percentiles are collectors/probe/stats.py's (numpy linear interpolation), the one home of
probe statistics, imported here for the formulas that read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from collectors.probe.stats import PCTS as PCTS  # the one home of probe statistics
from collectors.probe.stats import percentiles as percentiles
from collectors.prommath import counter_delta

J_PER_KWH = 3.6e6


def mean_or_none(values: np.ndarray | Sequence[float]) -> float | None:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()) if arr.size else None


def safe_div(num: float | None, den: float | None) -> float | None:
    """num / den; None when either is missing or the denominator is not positive."""
    if num is None or den is None or den <= 0:
        return None
    return num / den


def request_window_s(starts: Sequence[float], ends: Sequence[float]) -> float | None:
    """Level window: first measured start -> last measured end, seconds (None if empty/zero)."""
    if len(starts) == 0:
        return None
    span = float(max(ends) - min(starts))
    return span if span > 0 else None


def probe_throughput(
    *,
    n_ok: int,
    tokens_in: float | None,
    tokens_out: float | None,
    images: float | None,
    window_s: float | None,
) -> dict[str, float | None]:
    """rps, output/input tok/s and images/min of one level: totals / level window."""
    return {
        "rps": safe_div(float(n_ok), window_s),
        "output_tok_s": safe_div(tokens_out, window_s),
        "input_tok_s": safe_div(tokens_in, window_s),
        "images_per_min": None if images is None else safe_div(images * 60.0, window_s),
    }


def radix_hit_rate(cached_tokens: float | None, new_tokens: float | None) -> float | None:
    """Token-weighted cache hit rate Σcached / Σ(cached + new); None with no prefill tokens."""
    if cached_tokens is None or new_tokens is None:
        return None
    return safe_div(cached_tokens, cached_tokens + new_tokens)


def gpu_count(
    gpu_indices: Sequence[int] | None,
    seen_gpu_indices: Sequence[int],
    server_args: dict[str, Any] | None,
) -> tuple[int, str]:
    """(GPU count, where it came from): configured indices, else GPUs with samples, else
    tp_size × dp_size of the launch's server args, else 1 (assumed, and said so)."""
    if gpu_indices:
        return len(gpu_indices), "gpu_indices"
    if seen_gpu_indices:
        return len(set(seen_gpu_indices)), "GPUs seen in gpu.* samples"
    args = server_args or {}
    tp, dp = args.get("tp_size"), args.get("dp_size")
    if isinstance(tp, int) and tp > 0:
        n = tp * (dp if isinstance(dp, int) and dp > 0 else 1)
        return n, "tp_size × dp_size"
    return 1, "assumed 1 GPU (set gpu_indices)"


def server_usd_per_hour(gpu_hourly_usd: float | None, gpu_count: int) -> float | None:
    """USD per hour of a whole server: one GPU-hour's price × GPU count; None without a price."""
    return None if gpu_hourly_usd is None else gpu_hourly_usd * gpu_count


def cost_figures(
    *,
    gpu_usd_per_hour: float | None,
    rps: float | None = None,
    output_tok_s: float | None = None,
    input_tok_s: float | None = None,
    images_per_min: float | None = None,
) -> dict[str, float | None]:
    """USD per 1M output / total tokens, per image, per 1,000 requests from the hourly price.

    The one place that turns a price into a cost figure (scorecards, their load levels and the
    Overview cards all call it): price per second ÷ measured throughput, e.g. USD per 1M output
    tokens = gpu_usd_per_hour / 3600 ÷ output_tok_s × 1e6. `gpu_usd_per_hour` is the whole
    server's (server_usd_per_hour); a missing price or throughput, or a throughput of 0, gives None.
    """
    usd_s = None if gpu_usd_per_hour is None else gpu_usd_per_hour / 3600.0
    total_tok_s = (
        None if output_tok_s is None else output_tok_s + (input_tok_s or 0.0)
    )
    per_out = safe_div(usd_s, output_tok_s)
    per_tot = safe_div(usd_s, total_tok_s) if input_tok_s is not None else None
    per_req = safe_div(usd_s, rps)
    per_img = safe_div(None if gpu_usd_per_hour is None else gpu_usd_per_hour / 60.0,
                       images_per_min)
    return {
        "usd_per_1m_output_tok": None if per_out is None else per_out * 1e6,
        "usd_per_1m_total_tok": None if per_tot is None else per_tot * 1e6,
        "usd_per_1k_requests": None if per_req is None else per_req * 1000.0,
        "usd_per_image": per_img,
    }


def counter_increase(values: np.ndarray | Sequence[float]) -> float | None:
    """Increase of a cumulative counter over ordered samples (`gpu.<i>.energy_j` over a window):
    Σ counter_delta(prev, cur) over consecutive samples, so a reset (a drop: the counter
    restarted) counts the new value from 0 exactly as the /metrics collector does. None with
    fewer than two samples."""
    arr = np.asarray(values, dtype=float).tolist()
    if len(arr) < 2:
        return None
    return float(sum(d for prev, cur in pairwise(arr) if (d := counter_delta(prev, cur)) is not None))


def _line_spans(ts: Sequence[float], max_gap_s: float) -> list[tuple[float, float]]:
    """(start, end) each line after the first covers: the time since the previous line, or the
    typical line interval (the median of the short gaps) after a gap longer than `max_gap_s`."""
    gaps = [cur - prev for prev, cur in pairwise(ts)]
    short = [g for g in gaps if 0 < g <= max_gap_s]
    typical = float(np.median(short)) if short else 0.0
    return [(cur - (g if g <= max_gap_s else typical), cur) for g, cur in zip(gaps, ts[1:], strict=True) if g > 0]


def busy_spans(ts: np.ndarray | Sequence[float], max_gap_s: float = 10.0) -> list[tuple[float, float]]:
    """The time a series logged only while the server works (the engine's decode lines) covers;
    a gap longer than `max_gap_s` was idle and counts only as one typical line interval."""
    return _line_spans(sorted(np.asarray(ts, dtype=float).tolist()), max_gap_s)


def rate_over_spans(ts: np.ndarray | Sequence[float], rates: np.ndarray | Sequence[float],
                    max_gap_s: float = 10.0) -> float | None:
    """Σ rate x the span each line covers (busy_spans): tokens made while busy, with idle time
    credited nothing. None with fewer than two lines."""
    pts = sorted(zip(np.asarray(ts, dtype=float).tolist(), np.asarray(rates, dtype=float).tolist(), strict=True))
    if len(pts) < 2:
        return None
    spans = _line_spans([t for t, _ in pts], max_gap_s)
    by_end = {end: end - start for start, end in spans}
    return float(sum(rate * by_end.get(t, 0.0) for t, rate in pts[1:]))


def counter_increase_within(ts: np.ndarray | Sequence[float], values: np.ndarray | Sequence[float],
                            spans: Sequence[tuple[float, float]]) -> float | None:
    """counter_increase over only the parts of the window inside `spans`: each sample pair's
    delta times the share of its interval the spans cover (energy while tokens were made)."""
    pts = sorted(zip(np.asarray(ts, dtype=float).tolist(), np.asarray(values, dtype=float).tolist(), strict=True))
    if len(pts) < 2:
        return None
    total = 0.0
    for (t0, v0), (t1, v1) in pairwise(pts):
        d = counter_delta(v0, v1)
        if d is None or t1 <= t0:
            continue
        covered = sum(max(0.0, min(t1, b) - max(t0, a)) for a, b in spans)
        total += d * min(covered, t1 - t0) / (t1 - t0)
    return total


def energy_figures(
    *,
    energy_j: float | None,
    window_s: float | None,
    output_tokens: float | None,
    images: float | None,
    electricity_usd_per_kwh: float | None,
) -> dict[str, float | None]:
    """Average power, J per output token / per image, electricity USD per 1M output tokens."""
    per_tok = safe_div(energy_j, output_tokens)
    return {
        "avg_power_w": safe_div(energy_j, window_s),
        "energy_j_per_output_tok": per_tok,
        "energy_j_per_image": safe_div(energy_j, images),
        "electricity_usd_per_1m_output_tok": (
            None
            if per_tok is None or electricity_usd_per_kwh is None
            else per_tok * 1e6 / J_PER_KWH * electricity_usd_per_kwh
        ),
    }


def cost_at_target(
    levels: Sequence[dict[str, Any]], *, ttft_p99_target_s: float | None
) -> tuple[float | None, dict[str, Any] | None]:
    """Cheapest usd_per_1m_output_tok among levels whose ttft_p99_s <= the target.

    Returns (cost, the chosen level) or (None, None) when no level qualifies or has a cost.
    """
    if ttft_p99_target_s is None:
        return None, None
    best: dict[str, Any] | None = None
    for lv in levels:
        p99, cost = lv.get("ttft_p99_s"), lv.get("usd_per_1m_output_tok")
        if p99 is None or cost is None or p99 > ttft_p99_target_s:
            continue
        if best is None or cost < best["usd_per_1m_output_tok"]:
            best = lv
    return (None, None) if best is None else (float(best["usd_per_1m_output_tok"]), best)


def time_above(ts: np.ndarray, values: np.ndarray, threshold: float, until: float | None = None
               ) -> float | None:
    """Seconds a step-function series spends above `threshold`: each sample holds until the next
    one (the last one until `until`, if given). None without samples."""
    if ts.size == 0:
        return None
    nxt = np.append(ts[1:], until if until is not None else ts[-1])
    held = np.clip(nxt - ts, 0.0, None)
    return float(held[values > threshold].sum())


def down_transitions(values: np.ndarray) -> int:
    """Number of 1 -> 0 transitions of a health series (flaps)."""
    if values.size < 2:
        return 0
    up = values >= 0.5
    return int(np.count_nonzero(up[:-1] & ~up[1:]))


def tail_ratio(p99: float | None, p50: float | None) -> float | None:
    return safe_div(p99, p50)
