"""Pitwall's own /metrics: `pitwall collect` on the demo (the bundled simulator, a
1-second canary) with `metrics.port` set serves every series named in
runner/own_metrics.py, parsed with prometheus_client's own parser; an OOM event
shows up in its counter and a threshold rule that holds as a firing alert. With the port 0 nothing listens."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pwtest import PY, REPO, free_demo_port, free_port, stop_group, subprocess_env, wait_for

from storage import repo
from storage.db import make_engine

SERVER_SERIES = ("pitwall_server_up", "pitwall_request_ttft_seconds", "pitwall_request_success_ratio",
                 "pitwall_requests", "pitwall_grade", "pitwall_events", "pitwall_collector_lag_seconds")
RUNNER_SERIES = ("pitwall_alerts_firing", "pitwall_alerts_firing_count", "pitwall_runner_heartbeat_age_seconds",
                 "pitwall_runner_cpu_percent", "pitwall_runner_loop_lag_seconds", "pitwall_runner_rows_per_second",
                 "pitwall_alerts_last_eval_age_seconds")


def _scrape(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - loopback only
        text = r.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.fixture
def demo_runner(tmp_path):
    port = free_port()
    config = tmp_path / "pitwall.toml"
    # a rule that holds while the canary runs, so a firing alert shows (an OOM right after the
    # demo's planned launch is inhibited, by design)
    config.write_text('[alerting]\neval_interval_s = 1.0\n[[alerts]]\nname = "canary-runs"\nkind = "threshold"\n'
                      'metric = "canary.ok"\nop = ">="\nvalue = 0\nwindow_s = 60\nfor_s = 0\nservers = ["demo"]\n',
                      encoding="utf-8")
    env = subprocess_env({
        "PITWALL_DATA_DIR": str(tmp_path / "data"),
        "PITWALL_DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}",
        "PITWALL_CONFIG": str(config), "PITWALL_DEMO": "auto", "PITWALL_DEMO_PORT": str(free_demo_port()),
        "PITWALL_CANARY_INTERVAL_S": "1", "PITWALL_METRICS_PORT": str(port),
    })
    log = open(tmp_path / "collect.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([PY, "-m", "cli", "collect"], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield {"url": f"http://127.0.0.1:{port}/metrics", "db": env["PITWALL_DATABASE_URL"], "proc": proc}
    finally:
        stop_group(proc)
        log.close()


@pytest.mark.integration
def test_demo_runner_serves_every_series(demo_runner):
    def complete():
        try:
            fams = _scrape(demo_runner["url"])
        except OSError:
            return None
        servers = {s.labels.get("server") for s in fams.get("pitwall_request_ttft_seconds", [])}
        grades = {s.labels.get("dimension") for s in fams.get("pitwall_grade", [])}
        return fams if "demo" in servers and {"latency", "stability"} <= grades and all(
            fams.get(n) for n in (*SERVER_SERIES, *RUNNER_SERIES) if n != "pitwall_alerts_firing") else None

    fams = wait_for(complete, timeout=240, what="every series of the demo on /metrics", poll_s=2.0)
    assert demo_runner["proc"].poll() is None
    ups = {s.labels["server"]: s.value for s in fams["pitwall_server_up"]}
    assert ups.get("demo") == 1.0
    ok = {(s.labels["server"], s.labels["source"]): s.value for s in fams["pitwall_request_success_ratio"]}
    assert ok[("demo", "canary")] == 1.0
    quantiles = {s.labels["quantile"] for s in fams["pitwall_request_ttft_seconds"] if s.labels["server"] == "demo"}
    assert quantiles == {"0.5", "0.99"}
    assert all(s.value in (0.0, 0.5, 1.0) for s in fams["pitwall_grade"])

    engine = make_engine(demo_runner["db"])
    demo = next(s for s in repo.list_servers(engine) if s.name == "demo")
    repo.add_event(engine, kind="oom", server_id=demo.id, message="CUDA out of memory", severity="error",
                   ts=time.time())
    engine.dispose()

    def oom_seen():
        fams = _scrape(demo_runner["url"])
        firing = [s.labels for s in fams.get("pitwall_alerts_firing", [])]
        counted = [s for s in fams["pitwall_events"] if s.labels == {"server": "demo", "kind": "oom"}]
        return fams if counted and {"server": "demo", "rule": "canary-runs", "severity": "warning"} in firing else None

    fams = wait_for(oom_seen, timeout=120, what="the OOM counted and the canary rule firing", poll_s=1.0)
    assert fams["pitwall_alerts_firing_count"][0].value >= 1


def test_port_zero_serves_nothing(tmp_path):
    from config.settings import load_settings
    from runner.own_metrics import build_exporter

    os.environ.pop("PITWALL_METRICS_PORT", None)
    engine = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    assert build_exporter(load_settings(), engine) is None


def test_the_grafana_dashboard_draws_every_series():
    import json

    dash = json.loads((REPO / "dashboards" / "grafana-pitwall.json").read_text())
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])
    missing = [n for n in (*SERVER_SERIES, *RUNNER_SERIES) if n not in exprs]
    assert not missing, f"dashboards/grafana-pitwall.json has no panel for {missing}"
