"""A relaunch interrupted by a SIGKILL of the runner, whose new server came up ready, is recorded
as done when the next runner starts, never as failed ("The runner that was carrying this out
stopped") while the server runs the new profile.

Real processes: a real `pitwall collect` auto-starts the simulator under profile fast-a; a
relaunch to slow-b (a start of ~6 s of wall time) is requested; the runner is SIGKILLed while
the new server starts (the server lives on: its own session). A second `pitwall collect` adopts
it and records what happened: the relaunch done, with a message that says the runner was
interrupted, a relaunch_done event, the new launch ready and the old one stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pwtest import PY, REPO, free_port, sim_profile, stop_group, subprocess_env, wait_for

from launching import launcher
from runner import procs
from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
FAST_ENV = {"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "0.5", "SGLANG_SIM_SEED": "1"}


def test_a_relaunch_whose_runner_was_killed_is_recorded_as_what_happened(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    sim_profile(folder, "fast-a", "max-running-requests = 8", FAST_ENV)
    # 300 model seconds at speed 50: ~6 s of wall time to start, time to kill the runner meanwhile
    sim_profile(folder, "slow-b", "max-running-requests = 16", {**FAST_ENV, "SGLANG_SIM_STARTUP_S": "300"})
    port = free_port()
    (tmp_path / "pitwall.toml").write_text(
        f'[[servers]]\nname = "sim"\nbase_url = "http://127.0.0.1:{port}"\nmanaged = true\nprofile = "fast-a"\n'
        f'python = "{sys.executable}"\nlog_path = "{tmp_path / "sim.log"}"\n', encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}"
    env = subprocess_env({"PITWALL_DATA_DIR": str(tmp_path / "data"), "PITWALL_DATABASE_URL": url,
                          "PITWALL_CONFIG": str(tmp_path / "pitwall.toml"), "PITWALL_DEMO": "off",
                          "PITWALL_PROFILES_DIR": str(folder), "PITWALL_CANARY_INTERVAL_S": "0"})

    def collect(name: str) -> subprocess.Popen[bytes]:
        out = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - the child holds it
        return subprocess.Popen([PY, "-m", "cli", "collect"], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)

    first = collect("runner1")
    second = None
    pids: list[int] = []
    try:
        engine = make_engine(url)
        sid = wait_for(lambda: repo.get_server(engine, name="sim"), what="the runner to sync servers").id

        def latest(status: str, other_than: int | None = None):  # type: ignore[no-untyped-def]
            got = repo.latest_launch(engine, server_id=sid)
            return got if got is not None and got.status == status and got.id != other_than else None

        old = wait_for(lambda: latest("ready"), 120, what="auto-start under fast-a")
        # the launch row turns ready a moment before the auto-start intent is closed as done
        wait_for(lambda: launcher.pending_control(engine, sid) is None, 60, what="the auto-start intent to close")
        pids.append(int(old.pid))
        intent = launcher.request(engine, kind="relaunch", server_name="sim", actor="op", profile="slow-b")
        new = wait_for(lambda: latest("starting", other_than=old.id), 120, what="the new launch to start")
        pids.append(int(new.pid))
        os.kill(first.pid, signal.SIGKILL)  # the runner only: the server has a session of its own
        first.wait(30)
        assert procs.alive(int(new.pid)), "the new server died with its runner"
        assert repo.get_intent(engine, intent_id=intent.id).state == "running"

        second = collect("runner2")
        final = wait_for(lambda: (i := repo.get_intent(engine, intent_id=intent.id)) and
                         i.state in launcher.FINAL_STATES and i, 120, what="the relaunch to be resolved")
        assert final.state == "done", (final.state, final.message)
        assert "interrupted" in (final.message or "") and "slow-b" in (final.message or "")
        assert final.result and final.result["launch_id"] == new.id
        assert repo.get_launch(engine, launch_id=new.id).status == "ready"
        assert repo.get_launch(engine, launch_id=old.id).status == "stopped"
        done = repo.list_events(engine, server_id=sid, kinds=["relaunch_done"])
        assert len(done) == 1 and int(done.iloc[0]["launch_id"]) == new.id
        assert "interrupted" in done.iloc[0]["message"]
        engine.dispose()
    finally:
        for p in (second, first):
            if p is not None and p.poll() is None:
                stop_group(p)
        for pid in pids:  # a server the killed runner left, should the second one not stop it
            if procs.alive(pid):
                os.killpg(pid, signal.SIGKILL)
