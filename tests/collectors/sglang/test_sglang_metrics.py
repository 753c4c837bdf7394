"""Golden and behaviour tests of collectors/sglang/metrics*.py (parse, aliases, windows, HTTP).

The era payloads under tests/fixtures/ were written from each release's metrics source (bucket sets of
each era) from these observations, so every expected figure below follows by hand:

- TTFT (10 obs, s): 0.03 0.05 0.07 0.09 0.2 0.3 0.4 0.6 0.9 1.5 (sum 4.14)
- ITL (20 obs, s): 0.012 x10, 0.018 x8, 0.045 x2 (sum 0.354)
- E2E (10 obs, s): 1.2 1.4 2.2 2.4 3 4 6 8 12 35 (sum 75.2)
- counters: prompt 10240, generation 20480, cached 4096 (0.5.9+: device 3072 + host 1024),
  requests 10, aborted 1.

`window()` scrapes a zeroed copy first and the payload 10 s later, so rates are total / 10 and
the quantiles cover every observation.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from http_stub import MemoryState, StubServer

from collectors.base import CollectorContext, CollectorError, ServerTarget
from collectors.prommath import histogram_quantile
from collectors.sglang.metrics import (
    SGLangMetricsCollector,
    absent_keys,
    compute,
    parse_metrics,
    parse_metrics_cli,
)

# a healthy read is handed in by the poll that started it, on a loaded host too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("patient_polls")
FIX = Path(__file__).resolve().parents[2] / "fixtures"
_CUMULATIVE = re.compile(r"^(sglang[:_]\S*(?:_total|_bucket|_sum|_count)(?:\{[^}]*\})?) \S+$", re.M)


def read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def window(text: str, dt: float = 10.0) -> dict[str, float]:
    """Values of `text` scraped dt seconds after the same payload with every counter at 0."""
    zero = _CUMULATIVE.sub(r"\1 0.0", text)
    _, state = compute(parse_metrics(zero), None, 100.0)
    values, _ = compute(parse_metrics(text), state, 100.0 + dt)
    return values


# -- parsing -------------------------------------------------------------------------------------
def test_real_0523_payload_parses_every_line():
    text = read("sglang-0.5.23-real-cpu-metrics.prom")
    parsed = parse_metrics(text)
    sample_lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert parsed.errors == []
    assert len(parsed.samples) == len(sample_lines)
    assert len(parsed.families) == text.count("# TYPE ")


def test_malformed_line_is_reported_and_the_rest_kept():
    text = read("sglang-0.5.23-metrics.prom")
    lines = text.splitlines()
    bad_no = next(i for i, ln in enumerate(lines, 1) if ln.startswith("sglang:num_queue_reqs{"))
    lines[bad_no - 1] = 'sglang:num_queue_reqs{dp_rank="0" 1.0'  # unclosed label set
    parsed = parse_metrics("\n".join(lines) + "\n")
    good = [ln for ln in lines if ln and not ln.startswith("#")]
    assert len(parsed.samples) == len(good) - 1
    assert len(parsed.errors) == 1 and parsed.errors[0].startswith(f"line {bad_no}:")
    # the other DP rank of the damaged family survives: 2 of queue_reqs, 1 lost
    assert compute(parsed, None, 0.0)[0]["metrics.num_queue_reqs"] == 2.0


def test_payload_cut_mid_line_keeps_every_complete_sample():
    text = read("sglang-0.5.23-real-cpu-metrics.prom")
    cut = text.index("sglang:num_queue_reqs{") + 30  # inside the label set
    parsed = parse_metrics(text[:cut])
    complete = [ln for ln in text[:cut].splitlines()[:-1] if ln and not ln.startswith("#")]
    assert len(parsed.samples) == len(complete)
    assert len(parsed.errors) == 1 and "mid-line" in parsed.errors[0]


def test_cut_inside_a_number_is_not_read_as_a_value():
    parsed = parse_metrics("sglang:num_running_reqs 12.0\nsglang:num_queue_reqs 12")  # "125" cut
    assert [s.name for s in parsed.samples] == ["sglang:num_running_reqs"]
    assert "metrics.num_queue_reqs" not in compute(parsed, None, 0.0)[0]


def test_broken_type_line_keeps_its_samples_untyped():
    parsed = parse_metrics("# TYPE sglang:num_running_reqs wibble\nsglang:num_running_reqs 3\n")
    assert len(parsed.errors) == 1 and parsed.errors[0].startswith("line 1:")
    assert compute(parsed, None, 0.0)[0]["metrics.num_running_reqs"] == 3.0


# -- eras ----------------------------------------------------------------------------------------
def test_era_0_3_6_time_per_output_token_feeds_itl_and_name_labels_are_ignored():
    text = read("sglang-0.3.6-metrics.prom")
    v = window(text)
    # 0.3.6 TTFT buckets ... 0.1 0.25 0.5 0.75 1 2.5: cumulative 4 at 0.1, 5 at 0.25, 9 at 1, 10 at 2.5
    assert v["metrics.ttft_p50_s"] == pytest.approx(0.25)  # rank 5 -> 0.1 + 0.15*(1/1)
    assert v["metrics.ttft_p95_s"] == pytest.approx(1.75)  # rank 9.5 -> 1 + 1.5*(0.5/1)
    assert v["metrics.ttft_p99_s"] == pytest.approx(2.35)  # rank 9.9 -> 1 + 1.5*0.9
    assert v["metrics.ttft_mean_s"] == pytest.approx(0.414)  # 4.14 / 10
    # ITL from time_per_output_token (buckets 0.01 0.015 0.02 ... 0.04 0.05): 10 in (0.01,0.015]
    assert v["metrics.itl_p50_s"] == pytest.approx(0.015)  # rank 10 -> top of (0.01, 0.015]
    assert v["metrics.itl_p95_s"] == pytest.approx(0.045)  # rank 19 in (0.04, 0.05]: 0.04+0.01*0.5
    assert v["metrics.prompt_tokens_per_s"] == pytest.approx(1024.0)  # 10240 / 10 s
    assert v["metrics.num_running_reqs"] == 12.0 and v["metrics.token_usage"] == 0.25
    assert v["metrics.ttft_clamped"] == 0.0
    parsed = parse_metrics(text)
    assert any(s.labels.get("name") == "get_next_batch_to_run" for s in parsed.samples)
    absent = absent_keys(parsed)
    for key in ("metrics.requests_per_s", "metrics.cached_tokens_per_s", "metrics.queue_time_p99_s"):
        assert key in absent and key not in v  # not exported in 0.3.6: no sample, never 0
    assert "metrics.itl_p99_s" not in absent


def test_era_0_4_4_inter_token_latency_wins_over_time_per_output_token():
    v = window(read("sglang-0.4.4-metrics.prom"))
    # the payload's TPOT says 0.5 s for all 20 tokens; ITL says ~15 ms: ITL must be used
    assert v["metrics.itl_p50_s"] == pytest.approx(0.015)
    assert v["metrics.itl_window_count"] == 20.0
    # 0.4.4 TTFT buckets 0.1 0.3 0.5 ...: 4 <= 0.1, 6 <= 0.3, 7 <= 0.5, 9 <= 1, 10 <= 2
    assert v["metrics.ttft_p50_s"] == pytest.approx(0.2)  # rank 5 in (0.1, 0.3]: 0.1+0.2*(1/2)
    assert v["metrics.cached_token_ratio"] == pytest.approx(0.4)  # 4096 / 10240
    assert v["metrics.requests_per_s"] == pytest.approx(1.0)  # 10 / 10 s


def test_era_0_4_7_queue_latency_gauge_and_aborted_counter():
    v = window(read("sglang-0.4.7-metrics.prom"))
    assert v["metrics.queue_time_mean_s"] == 0.125  # avg_request_queue_latency gauge
    assert "metrics.queue_time_p50_s" not in v  # the histogram only exists from 0.5.3
    assert v["metrics.aborted_requests_per_s"] == pytest.approx(0.1)  # 1 / 10 s
    assert v["metrics.num_grammar_queue_reqs"] == 0.0  # exported and zero: a real 0


def test_era_0_5_9_ranks_are_aggregated_without_double_counting_tp_replicas():
    v = window(read("sglang-0.5.9-metrics.prom"))
    # DP=2 x TP=2, each TP rank repeats its DP rank's batch: 5 + 7, not 2*(5 + 7)
    assert v["metrics.num_running_reqs"] == 12.0
    assert v["metrics.num_running_reqs.dp1tp0"] == 7.0
    assert v["metrics.token_usage"] == pytest.approx(0.4)  # mean(0.3, 0.3, 0.5, 0.5)
    assert v["metrics.max_total_num_tokens"] == 131072.0  # 2 DP pools of 65536
    assert v["metrics.cached_tokens_per_s"] == pytest.approx(409.6)  # (3072 device + 1024 host) / 10
    # queue_time (0.5.3+ buckets 0 0.001 0.005 0.01 0.05 0.1 0.2 0.5 1): dp0 0.0005 0.002 0.02,
    # dp1 0.3 0.7 -> cumulative 1@0.001 2@0.005 3@0.05 4@0.5 5@1
    assert v["metrics.queue_time_p50_s"] == pytest.approx(0.03)  # rank 2.5 in (0.01,0.05]: +0.04*0.5
    assert v["metrics.queue_time_window_count"] == 5.0
    assert v["metrics.queue_time_mean_s"] == pytest.approx(1.0225 / 5)


def test_era_0_5_23_full_label_set_and_the_sglang_underscore_reexport_agree():
    v = window(read("sglang-0.5.23-metrics.prom"))
    r = window(read("sglang-0.5.23-reexport-metrics.prom"))
    assert v == r
    # is_streaming splits TTFT 6 + 4 observations and prompt tokens 6144 + 4096: summed back
    assert v["metrics.ttft_window_count"] == 10.0
    assert v["metrics.prompt_tokens_per_s"] == pytest.approx(1024.0)
    assert v["metrics.num_running_reqs.dp0"] == 5.0 and v["metrics.num_running_reqs.dp1"] == 7.0
    assert v["metrics.retracted_requests_per_s"] == pytest.approx(0.2)  # 2 / 10 s
    assert v["metrics.tpot_mean_s"] == pytest.approx((6 * 0.015 + 4 * 0.02) / 10)
    assert v["metrics.http_requests_active"] == 12.0


def test_real_0523_cpu_capture_window():
    v = window(read("sglang-0.5.23-real-cpu-metrics.prom"))
    # prompt_tokens_total: 343 (non-streaming) + 140 (streaming) = 483 over 10 s
    assert v["metrics.prompt_tokens_per_s"] == pytest.approx(48.3)
    # cached_tokens_total{cache_source="device"} 236 -> 236 / 483 of prompt tokens
    assert v["metrics.cached_token_ratio"] == pytest.approx(236 / 483)
    assert v["metrics.requests_per_s"] == pytest.approx(1.1)  # 4 + 7 requests
    assert v["metrics.max_total_num_tokens"] == 4096.0  # --max-total-tokens 4096


def test_simulator_payload_feeds_every_core_key():
    path = FIX / "sim-0.5.23-metrics.prom"
    if not path.exists():
        pytest.skip("the simulator's golden payload is not there yet")
    parsed = parse_metrics(path.read_text(encoding="utf-8"))
    assert parsed.errors == []
    absent = set(absent_keys(parsed))
    core = {
        "metrics.num_running_reqs", "metrics.num_queue_reqs", "metrics.token_usage",
        "metrics.gen_throughput_tok_s", "metrics.prompt_tokens_per_s",
        "metrics.generation_tokens_per_s", "metrics.cached_tokens_per_s", "metrics.requests_per_s",
        "metrics.ttft_p99_s", "metrics.itl_p99_s", "metrics.e2e_p99_s",
    }  # fmt: skip
    assert not core & absent
    v = window(path.read_text(encoding="utf-8"))
    assert core <= set(v)


# -- windows: resets, clamps, baselines ----------------------------------------------------------
def test_first_poll_gives_gauges_only():
    values, state = compute(parse_metrics(read("sglang-0.4.7-metrics.prom")), None, 0.0)
    assert "metrics.num_running_reqs" in values
    assert not any(k.endswith("_per_s") or "_p50_" in k for k in values)
    assert state["c"] and state["h"]


def test_counter_reset_counts_from_zero_instead_of_a_negative_spike():
    before = "# TYPE sglang:prompt_tokens counter\nsglang:prompt_tokens_total 100000\n"
    after = "# TYPE sglang:prompt_tokens counter\nsglang:prompt_tokens_total 500\n"  # restarted
    _, state = compute(parse_metrics(before), None, 0.0)
    values, _ = compute(parse_metrics(after), state, 5.0)
    assert values["metrics.prompt_tokens_per_s"] == pytest.approx(100.0)  # 500 since restart / 5 s


def test_histogram_reset_uses_the_new_process_observations_only():
    def hist(n01: int, n1: int, inf: int) -> str:
        return (
            "# TYPE sglang:time_to_first_token_seconds histogram\n"
            f'sglang:time_to_first_token_seconds_bucket{{le="0.1"}} {n01}\n'
            f'sglang:time_to_first_token_seconds_bucket{{le="1.0"}} {n1}\n'
            f'sglang:time_to_first_token_seconds_bucket{{le="+Inf"}} {inf}\n'
            f"sglang:time_to_first_token_seconds_count {inf}\n"
            f"sglang:time_to_first_token_seconds_sum {inf * 0.5}\n"
        )

    _, state = compute(parse_metrics(hist(50, 90, 100)), None, 0.0)
    values, _ = compute(parse_metrics(hist(0, 4, 4)), state, 5.0)  # 4 obs in (0.1, 1] after restart
    assert values["metrics.ttft_window_count"] == 4.0
    assert values["metrics.ttft_p50_s"] == pytest.approx(0.55)  # rank 2 of 4 in (0.1,1]: 0.1+0.9/2


def test_histogram_estimate_beyond_the_last_finite_bucket_is_clamped():
    # 0.4.5+ TTFT: last finite bucket 400 s; 3 of 4 observations beyond it
    est = histogram_quantile(0.5, {200.0: 1.0, 400.0: 1.0, math.inf: 4.0})
    assert est is not None and est.value == 400.0 and est.clamped
    text = (
        "# TYPE sglang:time_to_first_token_seconds histogram\n"
        'sglang:time_to_first_token_seconds_bucket{le="1.0"} %d\n'
        'sglang:time_to_first_token_seconds_bucket{le="+Inf"} %d\n'
        "sglang:time_to_first_token_seconds_count %d\n"
    )
    _, state = compute(parse_metrics(text % (0, 0, 0)), None, 0.0)
    values, _ = compute(parse_metrics(text % (95, 100, 100)), state, 5.0)
    assert values["metrics.ttft_p50_s"] == pytest.approx(0.5263157)  # rank 50 of 95 in (0,1]
    assert values["metrics.ttft_p99_s"] == 1.0  # rank 99 > 95: in +Inf
    assert values["metrics.ttft_clamped"] == 1.0


def test_quantile_interpolation_matches_promql():
    # 10 obs: 2 in (0,1], 6 in (1,2], 2 in (2,4]; p50 rank 5 -> 1 + 1*(3/6)
    est = histogram_quantile(0.5, {1.0: 2, 2.0: 8, 4.0: 10, math.inf: 10})
    assert est is not None and est.value == pytest.approx(1.5) and not est.clamped
    assert histogram_quantile(0.5, {1.0: 0, math.inf: 0}) is None  # no observations
    assert histogram_quantile(0.5, {1.0: 3}) is None  # no +Inf bucket: total unknown


def test_empty_window_gives_a_count_but_no_quantile():
    text = read("sglang-0.4.7-metrics.prom")
    _, state = compute(parse_metrics(text), None, 0.0)
    values, _ = compute(parse_metrics(text), state, 5.0)
    assert values["metrics.ttft_window_count"] == 0.0
    assert "metrics.ttft_p50_s" not in values and "metrics.ttft_clamped" not in values
    assert values["metrics.requests_per_s"] == 0.0  # exported, nothing happened: a real 0


def test_a_series_new_in_a_known_family_counts_from_zero():
    one = "# TYPE sglang:num_requests counter\nsglang:num_requests_total{s=\"a\"} 10\n"
    two = one + "sglang:num_requests_total{s=\"b\"} 7\n"
    _, state = compute(parse_metrics(one), None, 0.0)  # a: seen on the first scrape, a baseline
    values, _ = compute(parse_metrics(two), state, 10.0)
    assert values["metrics.requests_per_s"] == 0.7  # a unchanged; b made at its first 7: 7 / 10 s


# -- CLI -----------------------------------------------------------------------------------------
def test_cli_json_contract(tmp_path, capsys):
    path = tmp_path / "m.prom"
    path.write_text("# TYPE sglang:token_usage gauge\nsglang:token_usage{tp_rank=\"0\"} 0.5\nbad{ 1\n")
    assert parse_metrics_cli([str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == [{"name": "sglang:token_usage", "labels": {"tp_rank": "0"}, "value": 0.5}]
    assert out["families"] == 1
    assert len(out["errors"]) == 1 and out["errors"][0].startswith("line 3:")


def test_cli_unreadable_file(tmp_path, capsys):
    assert parse_metrics_cli([str(tmp_path / "missing.prom")]) == 2
    assert "Cannot read" in capsys.readouterr().err


# -- the collector over real HTTP ----------------------------------------------------------------
def _ctx(server: StubServer, mem: MemoryState, clock: list[float], api_key: str | None = None):
    target = ServerTarget(id=3, name="s", base_url=server.url, api_key=api_key, launch_id=9)
    return CollectorContext(servers=[target], load_state=mem.load, save_state=mem.save, now=lambda: clock[0])


def test_collector_scrapes_rates_and_sends_the_api_key():
    text = read("sglang-0.4.7-metrics.prom")
    payloads = [_CUMULATIVE.sub(r"\1 0.0", text), text]

    def handler(path, headers):
        return (200, payloads.pop(0), "text/plain") if path == "/metrics" else None

    mem, clock = MemoryState(), [1000.0]
    collector = SGLangMetricsCollector()
    try:
        with StubServer(handler) as srv:
            ctx = _ctx(srv, mem, clock, api_key="k3y")
            first = collector.poll(ctx)
            clock[0] += 10.0
            second = collector.poll(ctx)
            auth = srv.requests[0][1].get("Authorization")
    finally:
        collector.close()
    assert auth == "Bearer k3y"
    assert not any(s.metric.endswith("_per_s") for s in first.samples)
    got = {s.metric: s.value for s in second.samples}
    assert got["metrics.generation_tokens_per_s"] == pytest.approx(2048.0)
    assert {s.source for s in second.samples} == {"metrics"}
    assert {s.launch_id for s in second.samples} == {9}
    assert "metrics.http_requests_active" in mem.data["sglang_metrics:3:window"]["absent"]


def test_collector_404_is_an_actionable_error():
    collector = SGLangMetricsCollector()
    try:
        with StubServer(lambda path, headers: None) as srv:
            with pytest.raises(CollectorError, match="--enable-metrics"):
                collector.poll(_ctx(srv, MemoryState(), [0.0]))
    finally:
        collector.close()
