"""Prometheus as a source (collectors/prometheus_source.py) against a REAL Prometheus (the Debian
binary) scraping a real simulator every second on loopback (tests/prom_rig.py).

- same figures: a Runner writes one simulator twice into a real SQLite file, once scraped
  directly and once read through Prometheus; gauges agree, and the counter and histogram
  windows add up to the same totals (the requests sent);
- gaps: a stopped simulator leaves no rows for the scrapes Prometheus missed, and the staleness
  figure grows;
- errors: Prometheus down, a selector matching nothing, a bad selector, an answer over the cap:
  one error naming the server and what to do, the read position unmoved.
"""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest
from prom_rig import SCRAPE_S, PromRig, needs_prometheus, rig_fixture  # noqa: F401 (fixture `rig`)
from pwtest import free_port, runner_thread, wait_for
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from collectors.base import CollectorContext, CollectorError, ServerTarget
from collectors.prometheus_api import (
    Series,
    decode_matrix,
    interval_from_spacing,
    matchers,
    parse_duration,
)
from collectors.prometheus_source import STALENESS_KEY, PrometheusSourceCollector
from collectors.sglang.metrics import SGLangMetricsCollector
from collectors.sglang.metrics_prom import snapshots
from runner.loop import Runner
from storage import repo
from storage.models import Sample

# a healthy read is handed in by the poll that started it, on a loaded host too (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240), pytest.mark.usefixtures("patient_polls")]
GAUGES = ("metrics.num_running_reqs", "metrics.num_queue_reqs", "metrics.token_usage",
          "metrics.num_used_tokens", "metrics.max_total_num_tokens", "metrics.cache_hit_rate")


# -- pure pieces --------------------------------------------------------------------------------
def test_snapshots_group_by_scrape_time_and_strip_target_labels() -> None:
    series = [
        Series({"__name__": "sglang:num_running_reqs", "job": "j", "instance": "h:1", "tp_rank": "0"},
               [(10.0, 1.0), (11.0, 2.0)]),
        Series({"__name__": "sglang:num_queue_reqs", "job": "j", "instance": "h:1"}, [(11.0, 5.0)]),
    ]
    snaps = snapshots(series, {"job", "instance"}, after=10.0)  # 10.0 was read last time
    assert list(snaps) == [11.0]
    got = {(s.name, tuple(sorted(s.labels.items())), s.value) for s in snaps[11.0].samples}
    assert got == {("sglang:num_running_reqs", (("tp_rank", "0"),), 2.0),
                   ("sglang:num_queue_reqs", (), 5.0)}


def test_api_helpers() -> None:
    assert parse_duration("15s") == 15 and parse_duration("1m30s") == 90
    assert parse_duration("500ms") == 0.5 and parse_duration("soon") is None
    # a just-started Prometheus lists no targets: the interval its `up` samples show, the
    # millisecond of jitter rounded away (1.001 s of `1s` made every step 1.001 s; CI)
    assert interval_from_spacing([100.0 + 1.001 * k for k in range(20)]) == 1.0
    assert interval_from_spacing([0.0, 15.004, 30.0, 45.01]) == 15.0
    assert interval_from_spacing([0.0, 0.5003, 1.0001]) == 0.5 and interval_from_spacing([7.0]) is None
    assert matchers(' {instance="a:1"} ') == 'instance="a:1"'
    with pytest.raises(CollectorError, match="bad_data: parse error"):
        decode_matrix({"status": "error", "error": "bad_data: parse error"})


def test_direct_scrape_skips_servers_read_through_prometheus() -> None:
    # the base_url is a dead port: scraping it would be an error; skipping it is silent
    dead = f"http://127.0.0.1:{free_port()}"
    target = ServerTarget(1, "via-prom", dead, prometheus_url="http://127.0.0.1:1",
                          prometheus_selector='instance="x"')
    col = SGLangMetricsCollector(interval_s=1.0)
    try:
        res = col.poll(_ctx([target], {}))
    finally:
        col.close()
    assert res.samples == [] and res.events == []


# -- against a real Prometheus ------------------------------------------------------------------
def _ctx(servers: list[ServerTarget], store: dict[str, Any]) -> CollectorContext:
    return CollectorContext(servers, store.get, store.__setitem__)


def _target(rig: PromRig, *, url: str | None = None, selector: str | None = None) -> ServerTarget:
    return ServerTarget(7, "via-prom", rig.base(), prometheus_url=url or rig.url,
                        prometheus_selector=selector or f'instance="{rig.instance()}"')


def _rows(engine: Engine, server_id: int) -> list[Sample]:
    with Session(engine) as s:
        q = select(Sample).where(Sample.server_id == server_id).order_by(Sample.ts)  # type: ignore[arg-type]
        return list(s.execute(q).scalars())


def _totals(rows: list[Sample], rate_key: str, count_key: str) -> tuple[float, float]:
    """(sum of rate x window, sum of window counts) over a server's metrics rows: what the
    counter grew by across every window, as each source saw it."""
    stamps = sorted({r.ts for r in rows if r.metric.startswith("metrics.")})
    prev = {t: stamps[i - 1] for i, t in enumerate(stamps) if i}
    inc = sum(r.value * (r.ts - prev[r.ts]) for r in rows if r.metric == rate_key)
    n = sum(r.value for r in rows if r.metric == count_key)
    return inc, n


@needs_prometheus
def test_same_figures_as_the_direct_scrape(rig: PromRig, engine: Engine) -> None:
    direct = repo.upsert_server(engine, name="direct", base_url=rig.base())
    via = repo.upsert_server(engine, name="via-prom", base_url=rig.base(), prometheus_url=rig.url,
                             prometheus_selector=f'instance="{rig.instance()}"')
    assert direct.id is not None and via.id is not None
    metrics = SGLangMetricsCollector(interval_s=0.5)
    source = PrometheusSourceCollector(interval_s=0.5, first_window_s=0.0)
    runner = Runner(engine, [metrics, source], tick_s=0.05, flush_s=0.2)
    with runner_thread(runner):
        # both sources have a baseline before the load starts
        wait_for(lambda: {"metrics.num_running_reqs"} <= {r.metric for r in _rows(engine, via.id)}
                 and _rows(engine, direct.id), 90, "a first sample from each source")
        rig.load(n=4)
        rig.load(n=3)
        # both have windows past the load: every request counted
        wait_for(lambda: all(_totals(_rows(engine, sid), "metrics.requests_per_s",
                                     "metrics.e2e_window_count")[1] >= 7 for sid in (direct.id, via.id)),
                 120, "both sources to count the 7 requests")
        # and an idle stretch after it, where gauges hold still long enough to compare
        wait_for(lambda: len({r.ts for r in _rows(engine, via.id)
                              if r.metric == "metrics.num_running_reqs"}) >= 15, 120, "15 scrapes")
    d_rows, p_rows = _rows(engine, direct.id), _rows(engine, via.id)

    # the same keys (Prometheus-read windows are one scrape apart, the direct ones one poll)
    p_keys = {r.metric for r in p_rows if r.metric.startswith("metrics.")}
    d_keys = {r.metric for r in d_rows}
    assert p_keys == d_keys, (p_keys ^ d_keys)
    assert {r.source for r in p_rows} == {"metrics", "prometheus"}
    assert all(r.launch_id is None for r in p_rows)

    # stamped with Prometheus's scrape times, not the poll's clock
    raw = rig.query(f'sglang:num_running_reqs{{instance="{rig.instance()}"}}[10m]')
    scrape_ts = {round(float(t), 3) for t, _ in raw[0]["values"]}  # type: ignore[attr-defined]
    assert {round(r.ts, 3) for r in p_rows if r.metric.startswith("metrics.")} <= scrape_ts

    # gauges: a value Prometheus held across neighbouring scrapes was seen by the direct scrape
    # within one scrape interval (a value that changed between scrapes cannot be compared)
    compared = 0
    for key in GAUGES:
        p = [(r.ts, r.value) for r in p_rows if r.metric == key]
        d = [(r.ts, r.value) for r in d_rows if r.metric == key]
        for i in range(1, len(p) - 1):
            ts, v = p[i]
            if p[i - 1][1] != v or p[i + 1][1] != v or not d or not d[0][0] <= ts <= d[-1][0]:
                continue
            near = [dv for dt, dv in d if abs(dt - ts) <= SCRAPE_S]
            if not near:
                continue  # the direct poll ran late here (a busy machine)
            assert v in near, (key, ts, v, near)
            compared += 1
    assert compared >= 5

    # counters and histograms: the windows of each source add up to the same totals
    for rate_key, count_key in (("metrics.requests_per_s", "metrics.e2e_window_count"),
                                ("metrics.generation_tokens_per_s", "metrics.ttft_window_count")):
        d_inc, d_n = _totals(d_rows, rate_key, count_key)
        p_inc, p_n = _totals(p_rows, rate_key, count_key)
        assert math.isclose(d_inc, p_inc, rel_tol=1e-6), (rate_key, d_inc, p_inc)
        assert d_n == p_n == 7, (count_key, d_n, p_n)
    assert _totals(p_rows, "metrics.requests_per_s", "x")[0] == pytest.approx(7)
    # the freshness figure is written every poll
    assert [r for r in p_rows if r.metric == STALENESS_KEY and r.value >= 0]


@needs_prometheus
def test_a_gap_stays_a_gap_and_staleness_grows(rig: PromRig) -> None:
    store: dict[str, Any] = {}
    target = _target(rig)
    col = PrometheusSourceCollector(interval_s=1.0, first_window_s=30.0)

    def poll() -> list[Any]:
        return col.poll(_ctx([target], store)).samples

    def staleness(rows: list[Any]) -> float:
        return next(r.value for r in rows if r.metric == STALENESS_KEY)

    try:
        before = poll()
        assert any(r.metric == "metrics.num_running_reqs" for r in before)
        fresh = staleness(before)
        rig.stop_sim()
        q = f'count_over_time((up{{instance="{rig.instance()}"}} == 0)[1m:1s])'
        wait_for(lambda: any(float(r["value"][1]) >= 4 for r in rig.query(q)),  # type: ignore[index]
                 60, "Prometheus to miss 4 scrapes", poll_s=0.2)
        during: list[Any] = []
        wait_for(lambda: during.extend(poll()) or store["prometheus_source:7"]["pos"]
                 > store["prometheus_source:7"]["last"] + 3 * SCRAPE_S, 60, "a poll past the gap")
        stale = [r.value for r in during if r.metric == STALENESS_KEY][-1]
        assert stale > max(fresh, 3 * SCRAPE_S)
        rig.start_sim()
        rig.wait_scraped(n=2)
        after: list[Any] = []
        wait_for(lambda: after.extend(poll()) or any(
            r.metric == "metrics.num_running_reqs" for r in after), 60, "samples after the restart")
    finally:
        col.close()
    stamps = sorted({r.ts for r in before + during + after if r.metric.startswith("metrics.")})
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    # the stop is one gap of >= 4 scrapes: nothing was written for the scrapes Prometheus missed
    widest = max(gaps)
    assert widest >= 4 * SCRAPE_S, gaps
    cut = stamps[gaps.index(widest)]
    assert all(r.ts <= cut for r in before if r.metric.startswith("metrics."))
    assert all(r.ts >= cut + widest for r in after if r.metric.startswith("metrics."))
    assert not [r for r in during if r.metric.startswith("metrics.") and r.ts > cut]


@needs_prometheus
def test_errors_name_the_server_and_keep_the_position(rig: PromRig) -> None:
    store: dict[str, Any] = {}
    good = _target(rig)
    col = PrometheusSourceCollector(interval_s=1.0, first_window_s=30.0)
    try:
        assert col.poll(_ctx([good], store)).samples
        nothing = ServerTarget(8, "nowhere", rig.base(), prometheus_url=rig.url,
                               prometheus_selector='instance="nowhere:1"')
        # one server failing among others: an event naming it; the others are read
        res = col.poll(_ctx([good, nothing], store))
        assert [e.server_id for e in res.events] == [8]
        assert "'nowhere'" in res.events[0].message
        assert {r.server_id for r in res.samples} == {7}
        # alone, the collector fails (the runner records one collector_error)
        with pytest.raises(CollectorError, match=r"'nowhere'.*matches no target.*prometheus_selector"):
            col.poll(_ctx([nothing], store))
        bad = _target(rig, selector="instance=")
        with pytest.raises(CollectorError, match=r"HTTP 400 .*parse error.*check the selector"):
            col.poll(_ctx([bad], store))

        saved = dict(store["prometheus_source:7"])
        rig.stop_prometheus()
        with pytest.raises(CollectorError, match=r"Could not reach Prometheus at .*prometheus_url"):
            col.poll(_ctx([good], store))
        assert store["prometheus_source:7"] == saved  # nothing read, nothing skipped

        rig.start_prometheus()  # same TSDB: what it held before is read from where we left
        rows: list[Any] = []
        wait_for(lambda: rows.extend(col.poll(_ctx([good], store)).samples) or any(
            r.metric.startswith("metrics.") for r in rows), 60, "reads after Prometheus is back")
        assert min(r.ts for r in rows if r.metric.startswith("metrics.")) > saved["last"]
    finally:
        col.close()


@needs_prometheus
def test_an_answer_over_the_cap_is_read_in_halves_then_reported(rig: PromRig) -> None:
    store: dict[str, Any] = {}
    target = _target(rig)
    # a 1 KiB cap: no window of even one scrape fits, so halving ends in a clear error
    col = PrometheusSourceCollector(interval_s=1.0, first_window_s=60.0, max_bytes=1024)
    try:
        with pytest.raises(CollectorError, match=r"'via-prom'.*1 KiB \(limit\).*shorter window"):
            col.poll(_ctx([target], store))
        assert "prometheus_source:7" not in store
    finally:
        col.close()


@needs_prometheus
def test_no_sglang_series_is_reported_only_once_reading_has_gone_on_for_three_scrapes(tmp_path) -> None:
    """A target Prometheus scrapes that has no sglang:* series (here Prometheus's own /metrics,
    its second static target) is reported, naming what to do, but not at the first poll: a
    server that just became ready may not have been scraped yet."""
    import time

    rig = PromRig(tmp_path, n_sims=2)
    rig.sim_ports[1] = rig.prom_port  # target 1: Prometheus itself, up, with no sglang series
    store: dict[str, Any] = {}
    col = PrometheusSourceCollector()
    try:
        rig.start_prometheus()
        not_sglang = ServerTarget(8, "not-sglang", rig.base(1), prometheus_url=rig.url,
                                  prometheus_selector=f'instance="{rig.instance(1)}"')
        up_js = f'up{{instance="{rig.instance(1)}"}} == 1'
        wait_for(lambda: httpx.get(f"{rig.url}/api/v1/query", params={"query": up_js}).json()["data"]["result"],
                 60, "Prometheus scraping itself")
        t0 = time.time()
        first = CollectorContext([not_sglang], store.get, store.__setitem__, now=lambda: t0)
        col.poll(first)  # raises nothing: reading has only begun
        later = CollectorContext([not_sglang], store.get, store.__setitem__, now=lambda: t0 + 5 * SCRAPE_S)
        with pytest.raises(CollectorError, match=r"'not-sglang'.*holds no sglang:\* series.*--enable-metrics"):
            col.poll(later)
    finally:
        col.close()
        rig.close()
