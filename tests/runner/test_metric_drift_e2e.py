"""The metric drift guard end to end: a managed simulator launched under a profile whose simulated
release (SGLANG_SIM_VERSION=0.4.3) exports the ITL histogram under its old name, upgraded by a
relaunch to a 0.5.23 profile, raises exactly one `metric_drift` event naming the family and the
scorecard figure that read it. A real Runner drives the supervisor and the /metrics collector
over real HTTP on 127.0.0.1; the settle time is set short (runner.metrics_drift_settle_s)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx
import pytest
from pwtest import runner_thread, sim_profile, wait_for

from cli.wiring import runner_parts
from collectors.sglang.metrics import SGLangMetricsCollector
from config.settings import Settings
from launching import launcher
from present.dependents import dependents
from runner.loop import Runner
from scorecard.metric_specs import spec
from storage import repo

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FAST_ENV = {"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "0.5", "SGLANG_SIM_SEED": "1"}
SETTLE_S = 1.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _drift(engine, sid: int) -> list[dict]:
    return [e for e in repo.list_events(engine, server_id=sid).to_dict("records") if e["kind"] == "metric_drift"]


def _catalogued(engine, sid: int, launch_id: int) -> bool:
    """The collector's catalogue of `launch_id` holds a scrape taken after the server's first request."""
    cur = (repo.load_state(engine, key=f"sglang_metrics:{sid}:catalog") or {}).get("current") or {}
    return cur.get("epoch") == launch_id and cur.get("traffic_at") is not None


def _served(port: int) -> None:
    r = httpx.post(f"http://127.0.0.1:{port}/generate", timeout=30,
                   json={"text": "hello", "sampling_params": {"max_new_tokens": 4}})
    r.raise_for_status()


def test_upgrading_to_a_release_that_renamed_a_family_raises_one_drift_event(tmp_path: Path, engine) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    sim_profile(folder, "old-release", "", {**FAST_ENV, "SGLANG_SIM_VERSION": "0.4.3"})
    sim_profile(folder, "new-release", "", FAST_ENV)
    (tmp_path / "data").mkdir()
    settings = Settings(data_dir=tmp_path / "data", database_url="sqlite://", profiles_dir=folder)
    port = free_port()
    server = repo.upsert_server(engine, name="sim", base_url=f"http://127.0.0.1:{port}", managed=True,
                                python=sys.executable, profile="old-release",
                                log_path=str(tmp_path / "data" / "logs" / "sim.log"))
    metrics = SGLangMetricsCollector(interval_s=0.2)
    metrics.configure({"metrics_drift_settle_s": SETTLE_S})
    metrics.set_dependents(dependents)
    supervisor, handlers = runner_parts(settings, engine)
    runner = Runner(engine, [metrics], supervisor=supervisor, intent_handlers=handlers, tick_s=0.05, flush_s=0.2)
    with runner_thread(runner):
        first = wait_for(lambda: (launch := repo.latest_launch(engine, server_id=server.id)) is not None
                         and launch.status == "ready" and launch, what="the old release ready")
        assert "time_per_output_token_seconds" in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        _served(port)
        wait_for(lambda: _catalogued(engine, server.id, first.id), what="a scrape of the old release after traffic")
        intent = launcher.request(engine, kind="relaunch", server_name="sim", actor="tester", profile="new-release")
        done = wait_for(lambda: (i := repo.get_intent(engine, intent_id=intent.id)) is not None
                        and i.state in launcher.FINAL_STATES and i, what="the upgrade")
        assert done.state == "done", done.message
        assert repo.latest_launch(engine, server_id=server.id).id != first.id
        _served(port)
        [event] = wait_for(lambda: _drift(engine, server.id), what="the drift event")
        time.sleep(SETTLE_S + 1.0)  # more scrapes of the new launch, more traffic: still one event
        _served(port)
        time.sleep(1.0)
        assert len(_drift(engine, server.id)) == 1
    assert "sglang:time_per_output_token_seconds is no longer exported" in event["message"]
    assert "server_itl_p99_s" in event["message"]  # the dependent figure, by its key
    assert spec("server_itl_p99_s").label.replace("p99", "p50/p95/p99") in event["message"]  # and its label
    assert "sglang:inter_token_latency_seconds" in event["message"]  # what Pitwall reads now
    [change] = json.loads(event["raw"])
    assert change["family"] == "sglang:time_per_output_token_seconds" and change["change"] == "vanished"
