"""Window reads through a REAL Prometheus (dashboard/services/views/prom_series.py): the step
follows the window, a stopped server is a gap (NaN), never Prometheus's 5-minute carry-forward,
and counter rates over the steps add up to the requests sent."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pandas as pd
import pytest
from prom_rig import SCRAPE_S, PromRig, needs_prometheus, rig_fixture  # noqa: F401 (fixture `rig`)
from pwtest import wait_for

from collectors.base import CollectorError
from dashboard.services.views.prom_series import read_window, step_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
KEYS = ["metrics.num_running_reqs", "metrics.requests_per_s", "metrics.e2e_p50_s"]


def test_step_follows_the_window() -> None:
    assert step_for(7 * 86400, 15.0) == 605  # 7 days / 1000 points, rounded up to a second
    assert step_for(900, 15.0) == 15  # never below the scrape interval
    assert step_for(3600, 1.0, max_points=600) == 6


@needs_prometheus
def test_gaps_are_nan_and_rates_add_up(rig: PromRig) -> None:
    sel = f'instance="{rig.instance()}"'
    start = time.time() - 2 * SCRAPE_S
    rig.load(n=5)
    rig.wait_scraped(n=5)
    rig.stop_sim()
    q = f'count_over_time((up{{{sel}}} == 0)[1m:1s])'
    wait_for(lambda: any(float(r["value"][1]) >= 5 for r in rig.query(q)),  # type: ignore[index]
             60, "Prometheus to miss 5 scrapes", poll_s=0.2)
    rig.start_sim()
    rig.wait_scraped_after(time.time() + 2 * SCRAPE_S)
    # a second gap Prometheus cannot see: it is killed (no staleness markers) and comes back
    rig.kill_prometheus()
    killed_at = time.time()
    wait_for(lambda: time.time() > killed_at + 5 * SCRAPE_S, 30, "5 unscraped intervals", poll_s=0.2)
    rig.start_prometheus()
    rig.wait_scraped_after(time.time() + 2 * SCRAPE_S)
    end = time.time()

    win = read_window(rig.url, sel, KEYS, start, end, max_points=10_000)
    assert win.step_s == SCRAPE_S and win.scrape_interval_s == SCRAPE_S
    df = win.frame
    running = df[df["metric"] == "metrics.num_running_reqs"].sort_values("ts")
    gap_ts = running[running["value"].isna()]["ts"].tolist()
    assert win.gap_steps >= 8
    # the simulator's stop: steps inside it are NaN rows, not missing rows
    stopped = [t for t in gap_ts if t < killed_at]
    assert len(stopped) >= 3
    # Prometheus's own outage: query_range carries the last value over it from its lookback
    # window; the gap rule is what turned those steps into NaN
    blind = [t for t in gap_ts if killed_at + SCRAPE_S < t < killed_at + 4 * SCRAPE_S]
    assert blind
    raw = httpx.get(rig.url + "/api/v1/query_range", timeout=10, params={
        "query": f"sglang:num_running_reqs{{{sel}}}", "start": f"{blind[0]:.3f}",
        "end": f"{blind[-1]:.3f}", "step": "1"}).json()["data"]["result"]
    assert raw and len(raw[0]["values"]) == len(blind), "query_range fills the outage"
    # outside the gap every step has a value
    assert running["value"].notna().sum() >= 5
    # rate x time since the previous computed step adds up to the requests counted: the 5 sent
    # and the restarted simulator's own (its warm-up request; the restart counts from zero)
    steps = running[running["value"].notna()]["ts"].tolist()
    prev = {t: steps[k - 1] for k, t in enumerate(steps) if k}
    rates = df[(df["metric"] == "metrics.requests_per_s") & df["value"].notna()]
    since_restart = float(rig.query(f"sglang:num_requests_total{{{sel}}}")[0]["value"][1])  # type: ignore[index]
    total = sum(v * (t - prev[t]) for t, v in zip(rates["ts"], rates["value"], strict=True))
    assert total == pytest.approx(5.0 + since_restart)
    assert not df[df["metric"] == "metrics.e2e_p50_s"]["value"].dropna().empty
    assert win.last_sample_ts is not None
    cap = win.caption(end)
    assert cap.startswith(f"read through Prometheus 127.0.0.1:{rig.prom_port} · step 1 s · last sample")


@needs_prometheus
def test_a_seven_day_window_reads_at_a_coarse_step(rig: PromRig) -> None:
    end = time.time()
    win = read_window(rig.url, f'instance="{rig.instance()}"', KEYS, end - 7 * 86400, end)
    assert win.step_s == 605
    assert isinstance(win.frame, pd.DataFrame)
    assert len(win.frame["ts"].unique()) <= 1001


def test_errors_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(CollectorError, match="Could not reach Prometheus"):
        read_window("http://127.0.0.1:9", 'instance="x"', KEYS, 0, 60, deadline_s=2)
    with pytest.raises(ValueError, match="metrics.\\* keys"):
        read_window("http://127.0.0.1:9", 'instance="x"', ["log.running_req"], 0, 60)
