"""Hostile and real-world /metrics payloads: non-finite values, label explosions, huge and
malformed payloads, slow servers, and series SGLang creates late.

Pure cases feed strings to `parse_metrics` / `window`; collector cases scrape real aiohttp
servers on 127.0.0.1 (tests/collectors/sglang/http_stub.py) beside a healthy one.
"""

from __future__ import annotations

import math
import threading
import time

import pytest
from http_stub import MemoryState, StubServer
from prometheus_client import CollectorRegistry, Counter, generate_latest

from collectors.base import CollectorContext, ServerTarget
from collectors.promtext import ParseLimits, parse_metrics
from collectors.sglang.metrics import SGLangMetricsCollector, absent_keys, compute
from collectors.sglang.metrics_alias import LOOKUP
from collectors.sglang.metrics_window import window
from simulator.metrics import DiffusionMetrics

# a healthy read is handed in by the poll that started it, on a loaded host too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("patient_polls")

HEALTHY = (
    "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 2.0\n"
    "# TYPE sglang:prompt_tokens counter\nsglang:prompt_tokens_total 100.0\n"
)


def _gauges(n: int, name: str = "sglang:num_running_reqs") -> str:
    head = f"# HELP {name} running\n# TYPE {name} gauge\n"
    return head + "".join(f'{name}{{tp_rank="{i}"}} 1.0\n' for i in range(n))


def _ctx(servers: list[ServerTarget], mem: MemoryState, clock: list[float]) -> CollectorContext:
    return CollectorContext(servers=servers, load_state=mem.load, save_state=mem.save,
                            now=lambda: clock[0])


def _polls(collector: SGLangMetricsCollector, ctx: CollectorContext, clock: list[float], n: int):
    out = []
    for _ in range(n):
        out.append(collector.poll(ctx))
        clock[0] += 5.0
    return out


# -- non-finite values ---------------------------------------------------------------------------
def test_inf_counter_to_inf_gives_no_nan_and_keeps_its_baseline():
    def text(v: str) -> str:
        return ("# TYPE sglang:prompt_tokens counter\n"
                f'sglang:prompt_tokens_total{{s="a"}} {v}\nsglang:prompt_tokens_total{{s="b"}} 10\n')

    w0 = window(parse_metrics(text("100")), None, 0.0)
    w1 = window(parse_metrics(text("+Inf")), w0.state, 5.0)
    w2 = window(parse_metrics(text("+Inf")), w1.state, 10.0)  # Inf - Inf would be NaN
    w3 = window(parse_metrics(text("150")), w2.state, 15.0)
    for w in (w1, w2, w3):
        assert all(math.isfinite(v) for v in w.values.values())
    assert w1.nonfinite == ['sglang:prompt_tokens_total{s="a"}']
    assert w2.values["metrics.prompt_tokens_per_s"] == 0.0  # b unchanged, a left out
    assert w3.values["metrics.prompt_tokens_per_s"] == 10.0  # a: 150 - 100 (last good) over 5 s
    assert "Infinity" not in str(w2.state) and "inf" not in str(w2.state)


def test_non_finite_gauge_and_histogram_are_skipped_and_only_inf_bucket_bounds_are_normal():
    hist = ("# TYPE sglang:time_to_first_token_seconds histogram\n"
            'sglang:time_to_first_token_seconds_bucket{le="1.0"} %s\n'
            'sglang:time_to_first_token_seconds_bucket{le="+Inf"} %s\n'
            "sglang:time_to_first_token_seconds_count %s\n")
    gauge = "# TYPE sglang:token_usage gauge\nsglang:token_usage NaN\n"
    w0 = window(parse_metrics(hist % (1, 2, 2) + gauge), None, 0.0)
    assert "metrics.token_usage" not in w0.values
    w1 = window(parse_metrics(hist % ("NaN", 4, 4)), w0.state, 5.0)
    assert not any(k.startswith("metrics.ttft") for k in w1.values)
    w2 = window(parse_metrics(hist % (5, 6, 6)), w1.state, 10.0)  # against the last good scrape
    assert w2.values["metrics.ttft_window_count"] == 4.0
    assert w2.values["metrics.ttft_p50_s"] == 0.5  # rank 2 of 4, all 4 in (0, 1]
    assert w2.nonfinite == []


def test_gauges_that_overflow_to_inf_are_dropped():
    text = ('# TYPE sglang:num_used_tokens gauge\nsglang:num_used_tokens{dp_rank="0"} 1e308\n'
            'sglang:num_used_tokens{dp_rank="1"} 1e308\n')
    w = window(parse_metrics(text), None, 0.0)
    assert "metrics.num_used_tokens" not in w.values  # 2e308 overflows
    assert w.values["metrics.num_used_tokens.dp0"] == 1e308
    assert w.nonfinite == ["metrics.num_used_tokens (computed)"]


# -- series SGLang creates late ------------------------------------------------------------------
def _diffusion() -> tuple[CollectorRegistry, Counter]:
    reg = CollectorRegistry()
    c = Counter("sglang:diffusion_requests", "n", ["role", "replica", "status", "is_warmup"],
                registry=reg)
    return reg, c


def test_first_failure_after_start_is_counted_and_no_failure_yet_reads_zero():
    reg, c = _diffusion()
    c.labels("monolithic", "r", "success", "false").inc(3)
    text0 = generate_latest(reg).decode()
    assert "metrics.diffusion_failed_requests_per_s" not in absent_keys(parse_metrics(text0))
    _, s0 = compute(parse_metrics(text0), None, 0.0)  # first scrape: its own baseline
    c.labels("monolithic", "r", "success", "false").inc(2)
    v1, s1 = compute(parse_metrics(generate_latest(reg).decode()), s0, 10.0)
    assert v1["metrics.diffusion_failed_requests_per_s"] == 0.0  # exported, nothing failed yet
    c.labels("monolithic", "r", "error", "false").inc()  # SGLang creates the series here
    v2, _ = compute(parse_metrics(generate_latest(reg).decode()), s1, 20.0)
    assert v2["metrics.diffusion_failed_requests_per_s"] == 0.1  # the first failure, 1 / 10 s
    assert v2["metrics.diffusion_requests_per_s"] == 0.1


def test_every_diffusion_family_of_sglang_is_recognised():
    sim = DiffusionMetrics("tcp://127.0.0.1:5555")
    sim.lora_module.labels(*sim.base, "transformer").set(1)
    sim.finish(1.0, error=False, warmup=False)
    sim.observe_stage("denoising_step_0", 0.1)
    names = {s.name for s in parse_metrics(sim.render().decode()).samples}
    assert {n for n in names if n.startswith("sglang:diffusion_")} - set(LOOKUP) == set()
    assert "sglang:diffusion_stage_latency_seconds_bucket" in LOOKUP  # the earlier stage name
    v, _ = compute(parse_metrics(sim.render().decode()), None, 0.0)
    assert v["metrics.diffusion_lora_module_active.transformer"] == 1.0
    assert v["metrics.diffusion_lora_active_modules"] == 0.0


# -- payload bounds ------------------------------------------------------------------------------
def test_a_family_past_the_series_cap_is_skipped_whole_and_the_rest_is_read():
    text = _gauges(5000) + HEALTHY.replace("num_running_reqs", "num_queue_reqs")
    parsed = parse_metrics(text, ParseLimits(max_series=1000))
    assert {s.name for s in parsed.samples} == {"sglang:num_queue_reqs", "sglang:prompt_tokens_total"}
    assert parsed.limits[0][0] == "series" and "sglang:num_running_reqs" in parsed.limits[0][1]


def test_parse_budget_stops_the_parse():
    parsed = parse_metrics(HEALTHY, ParseLimits(budget_s=-1.0))  # always spent
    assert parsed.samples == [] and parsed.limits[0][0] == "budget"


def test_one_bad_line_in_a_big_family_loses_only_that_line():
    lines = _gauges(20000).splitlines()
    lines[12001] = 'sglang:num_running_reqs{tp_rank="x" 1.0'  # unclosed label set, line 12002
    parsed = parse_metrics("\n".join(lines) + "\n", ParseLimits(max_series=50000))
    assert len(parsed.samples) == 19999
    assert len(parsed.errors) == 1 and parsed.errors[0].startswith("line 12002:")


def test_per_rank_keys_are_capped_and_the_aggregate_kept():
    w = window(parse_metrics(_gauges(300)), None, 0.0, max_detail_keys=16)
    detail = sorted(k for k in w.values if k.startswith("metrics.num_running_reqs."))
    assert len(detail) == 16 and detail[0] == "metrics.num_running_reqs.tp0"
    assert "metrics.num_running_reqs.tp15" in detail  # natural order: tp0..tp15, not tp100
    assert w.values["metrics.num_running_reqs"] == 1.0  # tp ranks are replicas: max
    assert w.capped == ["metrics.num_running_reqs (300 rank keys)"]


# -- the collector over real HTTP ----------------------------------------------------------------
def test_hostile_server_beside_a_healthy_one_leaves_one_event_per_limit():
    hostile = ("# TYPE sglang:prompt_tokens counter\nsglang:prompt_tokens_total +Inf\n"
               + _gauges(3000, "sglang:num_queue_reqs") + _gauges(40, "sglang:token_usage")
               + "sglang:num_used_tokens{ 1\n")
    collector = SGLangMetricsCollector(limits=ParseLimits(max_series=1000), max_rank_keys=8)
    mem, clock = MemoryState(), [1000.0]
    try:
        with StubServer(lambda p, h: (200, HEALTHY, "text/plain")) as good, \
                StubServer(lambda p, h: (200, hostile, "text/plain")) as bad:
            servers = [ServerTarget(id=1, name="good", base_url=good.url),
                       ServerTarget(id=2, name="evil", base_url=bad.url)]
            results = _polls(collector, _ctx(servers, mem, clock), clock, 3)
    finally:
        collector.close()
    for r in results:
        assert {s.metric for s in r.samples if s.server_id == 1} >= {"metrics.num_running_reqs"}
        assert all(math.isfinite(s.value) for s in r.samples)
        assert len([s for s in r.samples if s.server_id == 2]) < 20
    events = [e for r in results for e in r.events]
    assert all(e.server_id == 2 and "'evil'" in e.message for e in events)
    assert len(events) == 4, [e.message for e in events]  # one per limit, not one per poll
    text = " | ".join(e.message for e in events)
    for needle in ("runner.metrics_max_series", "runner.metrics_max_rank_keys",
                   "sglang:prompt_tokens_total", "malformed"):
        assert needle in text


def test_servers_are_scraped_concurrently():
    # each handler waits until both requests arrived: one after the other, both would time out
    # (15 s apart at most: generous for a loaded host, and well inside the 30-s read deadline)
    barrier = threading.Barrier(2, timeout=15.0)

    def handler(path: str, headers: dict[str, str]):
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return (500, "scraped alone", "text/plain")
        return (200, HEALTHY, "text/plain")

    collector = SGLangMetricsCollector(timeout_s=30.0, deadline_s=30.0)
    mem, clock = MemoryState(), [0.0]
    try:
        with StubServer(handler) as a, StubServer(handler) as b:
            servers = [ServerTarget(id=1, name="a", base_url=a.url),
                       ServerTarget(id=2, name="b", base_url=b.url)]
            result = collector.poll(_ctx(servers, mem, clock))
    finally:
        collector.close()
    assert result.events == []
    assert {s.server_id for s in result.samples} == {1, 2}


def test_a_server_past_the_poll_deadline_gets_its_own_event_and_the_others_rows_come_back():
    release = threading.Event()

    def slow(path: str, headers: dict[str, str]):
        release.wait(30.0)
        return (200, HEALTHY, "text/plain")

    # deadlines a loaded host meets for the good server (its read must not miss them too)
    collector = SGLangMetricsCollector(timeout_s=2.0, deadline_s=3.0)
    mem, clock = MemoryState(), [0.0]
    try:
        with StubServer(lambda p, h: (200, HEALTHY, "text/plain")) as good, StubServer(slow) as bad:
            servers = [ServerTarget(id=1, name="good", base_url=good.url),
                       ServerTarget(id=2, name="stuck", base_url=bad.url)]
            # the stuck read ends at its own 3-s deadline and a later poll hands in its event;
            # how many polls that takes depends on the host's load, so poll until it has come (at
            # most 30 s), then once more: the event comes once
            ctx, results = _ctx(servers, mem, clock), []
            waited = time.monotonic() + 30.0
            while time.monotonic() < waited and not any(r.events for r in results):
                results += _polls(collector, ctx, clock, 1)
                time.sleep(0.05)
            results += _polls(collector, ctx, clock, 1)
            release.set()
    finally:
        collector.close()
    # the good server's rows come back; the stuck one brings none, only its one event
    assert {s.server_id for r in results for s in r.samples} == {1}
    events = [e for r in results for e in r.events]
    assert len(events) == 1 and events[0].server_id == 2
    assert "'stuck'" in events[0].message and "runner.metrics_deadline_s" in events[0].message


def test_a_malformed_payload_is_reported_once_per_episode():
    bad = HEALTHY + "sglang:num_queue_reqs{ 1\n"
    payloads = [bad, bad, bad, HEALTHY, bad]
    collector = SGLangMetricsCollector()
    mem, clock = MemoryState(), [0.0]
    try:
        with StubServer(lambda p, h: (200, payloads.pop(0), "text/plain")) as srv:
            results = _polls(collector, _ctx([ServerTarget(id=1, name="s", base_url=srv.url)],
                                             mem, clock), clock, 5)
    finally:
        collector.close()
    assert [len(r.events) for r in results] == [1, 0, 0, 0, 1]  # a new episode after a clean one


def test_runner_settings_reach_the_collector(tmp_path):
    from collectors.registry import build_collectors
    from config.settings import load_settings

    (tmp_path / "pitwall.toml").write_text(
        "[runner]\nmetrics_max_series = 500\nmetrics_max_rank_keys = 4\n"
        "metrics_parse_budget_s = 0.5\nmetrics_deadline_s = 3\n")
    settings = load_settings(env={"PITWALL_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    [collector], errors = build_collectors({}, names={"sglang_metrics"}, runner=settings.runner)
    try:
        assert errors == []
        assert isinstance(collector, SGLangMetricsCollector)
        assert collector.limits == ParseLimits(max_series=500, budget_s=0.5)
        assert (collector.max_rank_keys, collector.deadline_s) == (4, 3.0)
    finally:
        collector.close()
    (tmp_path / "pitwall.toml").write_text("[runner]\nmetrics_max_series = 0\n")
    settings = load_settings(env={"PITWALL_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    built, errors = build_collectors({}, names={"sglang_metrics"}, runner=settings.runner)
    assert built == [] and "runner.metrics_max_series" in errors[0]
