"""The engine seam end to end: the toy engine (this folder) registered with one line, and the
real runner, supervisor, scorecard and Server page run it with no change of theirs.

The supervisor starts the toy server as a real process on 127.0.0.1 and stops it; the runner
hands the toy's collectors only the toy server and SGLang's collectors none of it; a server
whose engine is not registered gets one collector_error event and no engine's collectors.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from pwtest import free_port, wait_for
from streamlit.testing.v1 import AppTest

import toy_engine
from collectors.engines import ENGINES, get_engine
from collectors.registry import build_collectors
from runner.launch_plan import LaunchPlan
from runner.loop import Runner
from runner.supervisor import ProcessSupervisor
from scorecard.build import build_scorecard
from storage import repo
from storage.db import make_engine
from storage.kinds import CONTROL_KINDS
from storage.models import Server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _planner(server: Server, profile: str | None, replacing: bool) -> LaunchPlan:
    """What the launcher hands the supervisor, built from the server's engine."""
    assert server.id is not None and server.log_path
    port = int(server.base_url.rsplit(":", 1)[1])
    argv = get_engine(server.engine).build_argv(sys.executable, "toy", "", "127.0.0.1", port, {})
    return LaunchPlan(server_id=server.id, server_name=server.name, base_url=server.base_url, argv=argv,
                      env={}, log_path=server.log_path, profile_name="toy", ready_timeout_s=60.0,
                      engine=server.engine)


def test_a_toy_engine_is_one_folder_and_one_line(tmp_path, app_env, monkeypatch) -> None:
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)  # the one line
    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    toy = repo.upsert_server(engine, name="toy1", base_url=f"http://127.0.0.1:{free_port()}", managed=True,
                             engine="toy", profile="toy", python=sys.executable, log_path=str(tmp_path / "toy1.log"))
    odd = repo.upsert_server(engine, name="odd", base_url=f"http://127.0.0.1:{free_port()}", engine="nosuch")
    assert toy.id is not None and odd.id is not None
    collectors, errors = build_collectors({"canary_interval_s": 0}, names={
        "toy_log", "toy_metrics", "sglang_log", "sglang_metrics", "sglang_api"})
    assert errors == [] and {c.name for c in collectors} == {
        "toy_log", "toy_metrics", "sglang_log", "sglang_metrics", "sglang_api"}
    supervisor = ProcessSupervisor(engine, _planner, auto_start=True, poll_s=0.05)
    handlers = {kind: supervisor.handle_intent for kind in CONTROL_KINDS}
    runner = Runner(engine, collectors, supervisor=supervisor, intent_handlers=handlers, tick_s=0.05, flush_s=0.2)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        def landed() -> bool:
            got = repo.latest_samples(engine, server_id=toy.id, metrics=(toy_engine.LOG_KEY, toy_engine.METRICS_KEY))
            return set(got) == {toy_engine.LOG_KEY, toy_engine.METRICS_KEY}

        wait_for(landed, timeout=60, what="samples from the toy's log and /toy_metrics")
        launch = repo.latest_launch(engine, server_id=toy.id)
        assert launch is not None and launch.status == "ready" and launch.engine_version == "9.9"
        assert launch.argv is not None and launch.argv[1].endswith("server.py")
    finally:
        runner.stop()
        thread.join(60)
    assert not thread.is_alive()
    launch = repo.latest_launch(engine, server_id=toy.id)
    assert launch is not None and launch.status == "stopped"  # the supervisor stopped it
    assert launch.pid is not None

    events = repo.list_events(engine, limit=200).to_dict("records")
    # SGLang's collectors never read the toy server (no parse failures, no scrape errors of it)
    toy_errors = [e for e in events if e["server_id"] == toy.id and e["kind"] in ("collector_error", "health_down")]
    assert toy_errors == []
    assert set(repo.metric_names(engine, server_id=toy.id)) == {toy_engine.LOG_KEY, toy_engine.METRICS_KEY}
    unknown = [e for e in events if e["server_id"] == odd.id]
    assert [e["kind"] for e in unknown] == ["collector_error"]
    assert "Unknown engine 'nosuch'" in unknown[0]["message"] and "toy" in unknown[0]["message"]
    assert repo.metric_names(engine, server_id=odd.id, prefix="") == []

    card = build_scorecard(engine, server="toy1", since_s=3600)
    assert card.provenance["sglang_version"] == "9.9"  # the published schema's field name
    engine.dispose()

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["server"] = "toy1"
    at.run()
    at.switch_page("dashboard/pages/server.py")
    at.run()
    assert not at.exception, at.exception
    assert any(r"Toy **9\.9**" in m.value for m in at.markdown), [m.value for m in at.markdown][:8]  # md-escaped
