"""Launch, relaunch, rollback and coalescing end to end: a real Runner (no collectors) drives the
supervisor, which starts the bundled simulator as the engine over real HTTP on 127.0.0.1.

The simulator is only ever configured through profile [env] (SGLANG_SIM_*), never special-cased:
fast profiles set SGLANG_SIM_SPEED=50 and SGLANG_SIM_STARTUP_S=0.5 (model seconds), so a start
takes well under a second of wall time.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pwtest import sim_profile, wait_for

from cli.wiring import runner_parts
from config.settings import Settings
from launching import launcher
from runner.loop import Runner
from storage import repo

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FAST_ENV = {"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "0.5", "SGLANG_SIM_SEED": "1"}


def free_port() -> int:
    # Local copy: `from conftest import ...` is ambiguous when several conftest.py are loaded.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])







@pytest.fixture
def rig(tmp_path: Path, engine) -> Iterator[dict]:
    """A managed server 'sim' (profile fast-a) and a runner thread with the supervisor only."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    sim_profile(folder, "fast-a", "max-running-requests = 8", FAST_ENV)
    sim_profile(folder, "fast-b", "max-running-requests = 16\ndisable-radix-cache = true", FAST_ENV)
    # startup of 5000 model seconds at speed 50: 100 s of wall time, past any ready timeout here
    sim_profile(folder, "slow", "max-running-requests = 16", {**FAST_ENV, "SGLANG_SIM_STARTUP_S": "5000"})
    sim_profile(folder, "crashy", "max-running-requests = 32", {**FAST_ENV, "SGLANG_SIM_FAULT": "crash-at-start"})
    port = free_port()
    settings = Settings(data_dir=tmp_path / "data", database_url="sqlite://", profiles_dir=folder)
    (tmp_path / "data").mkdir()
    log_path = tmp_path / "data" / "logs" / "sim.log"
    server = repo.upsert_server(engine, name="sim", base_url=f"http://127.0.0.1:{port}", managed=True,
                                python=sys.executable, profile="fast-a", log_path=str(log_path))
    supervisor, handlers = runner_parts(settings, engine)
    runner = Runner(engine, [], supervisor=supervisor, intent_handlers=handlers, tick_s=0.05)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        yield {"engine": engine, "server": server, "port": port, "log": log_path, "runner": runner}
    finally:
        runner.stop()
        thread.join(30)
        assert not thread.is_alive()


def _done(engine, intent_id: int):
    i = repo.get_intent(engine, intent_id=intent_id)
    return i if i is not None and i.state in launcher.FINAL_STATES else None


def _events(engine, sid: int) -> list[dict]:
    return repo.list_events(engine, server_id=sid).to_dict("records")


def _server_info(port: int) -> dict:
    return httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).json()


def test_autostart_relaunch_and_log_continuity(rig) -> None:
    engine, sid, port = rig["engine"], rig["server"].id, rig["port"]
    # Auto-start: the runner's first tick queues a launch under the server's profile.
    auto = wait_for(lambda: repo.list_intents(engine, server_id=sid, kinds=["launch"]), what="auto-start intent")[0]
    first = wait_for(lambda: _done(engine, auto.id), what="auto-start")
    assert first.state == "done", first.message
    assert first.progress["stage"] == "ready"
    assert _server_info(port)["max_running_requests"] == 8
    launch_a = repo.latest_launch(engine, server_id=sid)
    assert launch_a.profile_name == "fast-a" and launch_a.status == "ready"
    assert "--max-running-requests=8" in launch_a.argv
    assert launch_a.env["SGLANG_SIM_SPEED"] == "50"

    intent = launcher.request(engine, kind="relaunch", server_name="sim", actor="tester", profile="fast-b")
    final = wait_for(lambda: _done(engine, intent.id), what="relaunch")
    assert final.state == "done", final.message
    info = _server_info(port)
    assert info["max_running_requests"] == 16 and info["disable_radix_cache"] is True
    launch_b = repo.latest_launch(engine, server_id=sid)
    assert launch_b.id != launch_a.id and launch_b.profile_name == "fast-b"
    assert "--disable-radix-cache" in launch_b.argv
    assert launch_b.server_args["max_running_requests"] == 16
    old = repo.get_launch(engine, launch_id=launch_a.id)
    assert old.status == "stopped" and old.ended_at is not None and "fast-b" in old.end_reason
    # Each launch has its own file (runner/launch_logs.py): the first was rotated aside before
    # the second started, and the ended launch names its new place (the tailer follows a rename).
    text = rig["log"].read_text()
    assert text.count("The server is fired up and ready to roll!") == 1 and "max_running_requests=16" in text
    assert old.log_path != str(rig["log"]) and old.log_path.startswith(str(rig["log"]) + ".")
    first = Path(old.log_path).read_text()
    assert first.count("The server is fired up and ready to roll!") == 1 and "max_running_requests=8" in first
    kinds = [e["kind"] for e in _events(engine, sid)]
    assert {"relaunch_started", "relaunch_done", "server_ready"} <= set(kinds)
    assert [a.action for a in repo.list_audit(engine)] == ["relaunch"]


def test_crash_on_start_rolls_back_with_reason(rig) -> None:
    engine, sid, port = rig["engine"], rig["server"].id, rig["port"]
    auto = wait_for(lambda: repo.list_intents(engine, server_id=sid, kinds=["launch"]), what="auto-start")[0]
    assert wait_for(lambda: _done(engine, auto.id)).state == "done"
    intent = launcher.request(engine, kind="relaunch", server_name="sim", actor="tester", profile="crashy")
    final = wait_for(lambda: _done(engine, intent.id), what="relaunch")
    assert final.state == "failed"
    assert final.progress["stage"] == "rolled back"
    assert "crashy failed to come up" in final.message and "rolled back to profile fast-a" in final.message
    assert final.result["excerpt"]  # the failing log excerpt is kept
    # The reason shown is the error line of the failing launch's log, not its last line.
    log_part = final.message.split("Log: ", 1)[1]
    assert any(w in log_part.lower() for w in ("error", "exception", "killed", "traceback")), log_part
    assert _server_info(port)["max_running_requests"] == 8  # fast-a is back
    events = {e["kind"]: e for e in _events(engine, sid)}
    assert events["relaunch_failed"]["raw"] and events["rollback"]["severity"] == "warning"
    latest = repo.latest_launch(engine, server_id=sid)
    assert latest.profile_name == "fast-a" and latest.status == "ready"
    crashed = repo.get_launch(engine, launch_id=final.result["launch_id"])
    assert crashed.status == "failed" and crashed.exit_code not in (None, 0)


def test_two_concurrent_relaunch_requests_make_one_relaunch(rig) -> None:
    engine, sid = rig["engine"], rig["server"].id
    auto = wait_for(lambda: repo.list_intents(engine, server_id=sid, kinds=["launch"]), what="auto-start")[0]
    assert wait_for(lambda: _done(engine, auto.id)).state == "done"
    n_launches = len(repo.list_launches(engine, server_id=sid))
    # The UI/CLI path refuses a second request while the first is pending.
    first = launcher.request(engine, kind="relaunch", server_name="sim", actor="tab-1", profile="fast-b")
    with pytest.raises(launcher.LauncherError, match="already has a relaunch in progress"):
        launcher.request(engine, kind="relaunch", server_name="sim", actor="tab-2", profile="fast-b")
    # Two writers that raced past that check: the runner refuses the later one.
    raced = repo.create_intent(engine, kind="relaunch", server_id=sid, payload={"profile": "fast-b"}, requested_by="tab-3")
    a = wait_for(lambda: _done(engine, first.id), what="first relaunch")
    b = wait_for(lambda: _done(engine, raced.id), what="second relaunch")
    assert a.state == "done"
    assert b.state == "cancelled" and f"relaunch R-{first.id}" in b.message
    assert len(repo.list_launches(engine, server_id=sid)) == n_launches + 1
    assert [e["kind"] for e in _events(engine, sid)].count("relaunch_started") == 1


def test_exit_on_its_own_is_recorded_and_stop_works(rig) -> None:
    import os
    import signal

    engine, sid = rig["engine"], rig["server"].id
    auto = wait_for(lambda: repo.list_intents(engine, server_id=sid, kinds=["launch"]), what="auto-start")[0]
    assert wait_for(lambda: _done(engine, auto.id)).state == "done"
    launch = repo.latest_launch(engine, server_id=sid)
    os.killpg(launch.pid, signal.SIGKILL)  # an OOM-killer stand-in
    ev = wait_for(lambda: [e for e in _events(engine, sid) if e["kind"] == "server_exit"], what="server_exit")
    assert "exited on its own with code -9" in ev[0]["message"]
    assert repo.get_launch(engine, launch_id=launch.id).status == "exited"
    # launch again, then stop
    again = launcher.request(engine, kind="launch", server_name="sim", actor="tester")
    assert wait_for(lambda: _done(engine, again.id)).state == "done"
    stop = launcher.request(engine, kind="stop", server_name="sim", actor="tester")
    assert wait_for(lambda: _done(engine, stop.id)).state == "done"
    assert repo.latest_launch(engine, server_id=sid).status == "stopped"
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{rig['port']}/health", timeout=1)


def test_ready_timeout_rolls_back_to_last_good_profile(rig) -> None:
    engine, sid, port = rig["engine"], rig["server"].id, rig["port"]
    auto = wait_for(lambda: repo.list_intents(engine, server_id=sid, kinds=["launch"]), what="auto-start")[0]
    assert wait_for(lambda: _done(engine, auto.id)).state == "done"
    # 1 s is shorter than the slow profile's startup (100 s), however busy the machine: the new
    # profile is stopped and fast-a started again. (A 0.05-s timeout on a fast profile was a race:
    # under load the server could answer /health before the first check.)
    intent = launcher.request(engine, kind="relaunch", server_name="sim", actor="tester", profile="slow", timeout_s=1)
    final = wait_for(lambda: _done(engine, intent.id), what="relaunch")
    assert final.state == "failed" and final.progress["stage"] == "rolled back"
    assert "not ready within" in final.message and "rolled back to profile fast-a" in final.message
    assert _server_info(port)["max_running_requests"] == 8
    timed_out = repo.get_launch(engine, launch_id=final.result["launch_id"])
    assert timed_out.status == "failed" and timed_out.ended_at is not None


def test_auto_restart_after_exit_when_enabled(rig) -> None:
    import os
    import signal

    engine, sid = rig["engine"], rig["server"].id
    rig["runner"].supervisor.auto_restart = True  # off by default
    auto = wait_for(lambda: repo.list_intents(engine, server_id=sid, kinds=["launch"]), what="auto-start")[0]
    assert wait_for(lambda: _done(engine, auto.id)).state == "done"
    first = repo.latest_launch(engine, server_id=sid)
    os.killpg(first.pid, signal.SIGKILL)
    restart = wait_for(lambda: [i for i in repo.list_intents(engine, server_id=sid, kinds=["launch"])
                                if i.requested_by == "runner (auto-restart)"], what="auto-restart intent")[0]
    assert wait_for(lambda: _done(engine, restart.id)).state == "done"
    again = repo.latest_launch(engine, server_id=sid)
    assert again.id != first.id and again.profile_name == "fast-a" and again.status == "ready"


def test_a_reused_pid_is_not_adopted() -> None:
    """Adoption needs the PID's process to have started with the launch, not just to exist."""
    import os

    import psutil

    from runner.procs import same_process as _same_process

    me = psutil.Process(os.getpid())
    assert _same_process(os.getpid(), me.create_time())
    # the same PID recorded by a launch an hour earlier belongs to another process now
    assert not _same_process(os.getpid(), me.create_time() - 3600)
