"""The scorecard formulas, each against hand-computed numbers (arithmetic in the comments)."""

from __future__ import annotations

import numpy as np
import pytest

from scorecard import math as sm


def test_percentiles_linear_interpolation_and_missing():
    # [0.1, 0.2, 0.3, 0.4]: p50 at index 1.5 -> 0.25; p95 at 2.85 -> 0.3 + 0.85*0.1 = 0.385;
    # p99 at 2.97 -> 0.397
    got = sm.percentiles([0.4, 0.1, 0.3, 0.2])
    assert got[50] == pytest.approx(0.25)
    assert got[95] == pytest.approx(0.385)
    assert got[99] == pytest.approx(0.397)
    assert sm.percentiles([]) == {50: None, 95: None, 99: None}


def test_probe_throughput_totals_over_window():
    # 4 ok requests, 200 tokens in, 400 out, in a 4 s window: 1 req/s, 50 and 100 tok/s
    got = sm.probe_throughput(n_ok=4, tokens_in=200, tokens_out=400, images=None, window_s=4.0)
    assert got == {"rps": 1.0, "output_tok_s": 100.0, "input_tok_s": 50.0,
                   "images_per_min": None}
    # 6 images in 30 s -> 6 * 60 / 30 = 12 images/min
    assert sm.probe_throughput(n_ok=3, tokens_in=None, tokens_out=None, images=6,
                               window_s=30.0)["images_per_min"] == pytest.approx(12.0)
    # no window (all requests at one instant or none): nothing is invented
    assert sm.probe_throughput(n_ok=0, tokens_in=0, tokens_out=0, images=None,
                               window_s=None)["rps"] is None


def test_request_window():
    # starts 0, 1, 2, 3 with e2e 1 s each -> ends 1..4 -> window 4 s
    assert sm.request_window_s([0, 1, 2, 3], [1, 2, 3, 4]) == 4.0
    assert sm.request_window_s([], []) is None


def test_radix_hit_rate_token_weighted():
    # batches (cached, new) = (60, 10), (20, 10): 80 / (80 + 20) = 0.8, not mean(60/70, 20/30)
    assert sm.radix_hit_rate(80, 20) == pytest.approx(0.8)
    assert sm.radix_hit_rate(0, 0) is None  # no prefill tokens: missing, not 0
    assert sm.radix_hit_rate(None, 5) is None


def test_cost_figures_from_hourly_price():
    # $4/h = $0.0011111/s; at 100 out tok/s: 0.0011111 / 100 * 1e6 = $11.111 per 1M output;
    # total 150 tok/s: $7.407 per 1M; 1 req/s: $1.111 per 1,000 requests
    got = sm.cost_figures(gpu_usd_per_hour=4.0, rps=1.0, output_tok_s=100.0, input_tok_s=50.0,
                          images_per_min=None)
    assert got["usd_per_1m_output_tok"] == pytest.approx(11.1111, rel=1e-4)
    assert got["usd_per_1m_total_tok"] == pytest.approx(7.40741, rel=1e-4)
    assert got["usd_per_1k_requests"] == pytest.approx(1.11111, rel=1e-4)
    assert got["usd_per_image"] is None
    # image server: $3/h at 12 img/min -> 3 / 60 / 12 = $0.0041667 per image
    img = sm.cost_figures(gpu_usd_per_hour=3.0, rps=0.2, output_tok_s=None, input_tok_s=None,
                          images_per_min=12.0)
    assert img["usd_per_image"] == pytest.approx(0.00416667, rel=1e-4)
    assert img["usd_per_1m_output_tok"] is None


def test_cost_without_price_is_none_never_zero():
    got = sm.cost_figures(gpu_usd_per_hour=None, rps=1.0, output_tok_s=100.0, input_tok_s=50.0,
                          images_per_min=None)
    assert set(got.values()) == {None}


def test_server_price_and_output_only_cost_as_the_overview_asks():
    # $2/GPU-h x 2 GPUs = $4/h; at 1,000 out tok/s: 4 / 3600 / 1000 * 1e6 = $1.111 per 1M output
    usd_h = sm.server_usd_per_hour(2.0, 2)
    assert usd_h == 4.0 and sm.server_usd_per_hour(None, 2) is None
    got = sm.cost_figures(gpu_usd_per_hour=usd_h, output_tok_s=1000.0)
    assert got["usd_per_1m_output_tok"] == pytest.approx(1.11111, rel=1e-4)
    assert got["usd_per_1m_total_tok"] is None and got["usd_per_1k_requests"] is None
    # no throughput (or none measured yet: 0 tok/s) is no cost, never 0 or infinity
    assert sm.cost_figures(gpu_usd_per_hour=usd_h, output_tok_s=0.0)["usd_per_1m_output_tok"] is None

def test_counter_increase_survives_reset():
    # 1000 -> 1600 (+600) -> 100 (reset: +100 from 0) -> 400 (+300) = 1000 J
    assert sm.counter_increase(np.array([1000.0, 1600.0, 100.0, 400.0])) == pytest.approx(1000.0)
    assert sm.counter_increase(np.array([5.0])) is None


def test_energy_figures():
    # 1000 J over 6 s = 166.67 W; 500 tokens -> 2 J/token;
    # electricity: 2 J * 1e6 / 3.6e6 J/kWh * $0.15 = $0.08333 per 1M output tokens
    got = sm.energy_figures(energy_j=1000.0, window_s=6.0, output_tokens=500.0, images=None,
                            electricity_usd_per_kwh=0.15)
    assert got["avg_power_w"] == pytest.approx(166.6667, rel=1e-4)
    assert got["energy_j_per_output_tok"] == pytest.approx(2.0)
    assert got["electricity_usd_per_1m_output_tok"] == pytest.approx(0.083333, rel=1e-4)
    assert got["energy_j_per_image"] is None
    none = sm.energy_figures(energy_j=1000.0, window_s=6.0, output_tokens=500.0, images=None,
                             electricity_usd_per_kwh=None)
    assert none["electricity_usd_per_1m_output_tok"] is None


def test_cost_at_target_picks_cheapest_level_meeting_the_slo():
    levels = [
        {"level": 1, "ttft_p99_s": 0.10, "usd_per_1m_output_tok": 20.0},
        {"level": 8, "ttft_p99_s": 0.45, "usd_per_1m_output_tok": 4.0},  # meets 0.5, cheapest
        {"level": 32, "ttft_p99_s": 1.20, "usd_per_1m_output_tok": 1.5},  # cheaper, too slow
    ]
    cost, lv = sm.cost_at_target(levels, ttft_p99_target_s=0.5)
    assert cost == 4.0 and lv is not None and lv["level"] == 8
    assert sm.cost_at_target(levels, ttft_p99_target_s=0.05) == (None, None)
    assert sm.cost_at_target(levels, ttft_p99_target_s=None) == (None, None)


def test_time_above_threshold_step_function():
    # queue 0 @0, 20 @1, 5 @3, window ends @5; above 16 only from 1 to 3 -> 2 s
    ts, v = np.array([0.0, 1.0, 3.0]), np.array([0.0, 20.0, 5.0])
    assert sm.time_above(ts, v, 16, until=5.0) == 2.0
    # the last sample holds until the window's end: 20 @3 until 5 -> 2 s more
    assert sm.time_above(ts, np.array([0.0, 20.0, 20.0]), 16, until=5.0) == 4.0
    assert sm.time_above(np.empty(0), np.empty(0), 16) is None


def test_down_transitions_and_tail_ratio():
    # 1 1 0 1 0 0 1: two 1 -> 0 transitions
    assert sm.down_transitions(np.array([1, 1, 0, 1, 0, 0, 1], dtype=float)) == 2
    assert sm.tail_ratio(0.397, 0.25) == pytest.approx(1.588)
    assert sm.tail_ratio(0.3, None) is None


def test_gpu_count_sources():
    assert sm.gpu_count([0, 1], [], None) == (2, "gpu_indices")
    assert sm.gpu_count(None, [0, 1, 2], None)[0] == 3
    assert sm.gpu_count(None, [], {"tp_size": 4, "dp_size": 2})[0] == 8
    n, note = sm.gpu_count(None, [], {})
    assert n == 1 and note.startswith("assumed")


def test_busy_spans_tokens_and_energy_inside_them():
    ts = [0.0, 2.0, 4.0, 60.0, 62.0]  # a 56 s gap was idle: the line at 60 covers one typical 2 s
    assert sm.busy_spans(ts) == [(0.0, 2.0), (2.0, 4.0), (58.0, 60.0), (60.0, 62.0)]
    assert sm.rate_over_spans(ts, [100.0] * 5) == pytest.approx(100.0 * 8)
    assert sm.rate_over_spans([1.0], [5.0]) is None
    # a counter rising 10 J/s; half of the [0, 20] interval is inside the spans
    assert sm.counter_increase_within([0.0, 20.0], [0.0, 200.0], [(0.0, 5.0), (15.0, 20.0)]) == pytest.approx(100.0)
    # a counter reset counts the new value from 0, as counter_increase does
    assert sm.counter_increase_within([0.0, 10.0], [500.0, 30.0], [(0.0, 10.0)]) == pytest.approx(30.0)
