"""Faults the runner package owns, each on real processes: the simulator as the
engine, real sweep processes, a real `pitwall collect`.

Waits poll a condition with a generous deadline; none asserts how fast anything happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from pwtest import REPO, free_port, subprocess_env, wait_for

from cli.wiring import runner_parts
from collectors.base import CollectorContext, PollResult
from config.settings import Settings
from dashboard.services.views import benchmarks as bm
from launching import launcher
from runner import procs
from runner.loop import Runner
from runner.supervisor import ProcessSupervisor
from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

FAST_ENV = {"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "0.5", "SGLANG_SIM_SEED": "1"}




def _profile(folder: Path, name: str, env: dict[str, str]) -> None:
    env_lines = "\n".join(f'{k} = "{v}"' for k, v in env.items())
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\nmodel_path = "Qwen/Qwen2.5-7B-Instruct"\n'
        f'entrypoint = "simulator.launch_server"\n[flags]\nenable-metrics = true\n[env]\n{env_lines}\n'
    )


def _settings(tmp_path: Path, **runner_opts: object) -> Settings:
    folder = tmp_path / "profiles"
    folder.mkdir(exist_ok=True)
    _profile(folder, "fast", FAST_ENV)
    (tmp_path / "data").mkdir(exist_ok=True)
    return Settings(data_dir=tmp_path / "data", database_url="sqlite://", profiles_dir=folder,
                    runner=dict(runner_opts))


def _managed(engine, tmp_path: Path, name: str = "sim"):
    return repo.upsert_server(engine, name=name, base_url=f"http://127.0.0.1:{free_port()}", managed=True,
                              python=sys.executable, profile="fast", log_path=str(tmp_path / f"{name}.log"))


def _start(runner: Runner) -> threading.Thread:
    t = threading.Thread(target=runner.run, daemon=True)
    t.start()
    return t


def _ready_launch(engine, sid: int):
    launch = repo.latest_launch(engine, server_id=sid)
    return launch if launch is not None and launch.status == "ready" and launch.ended_at is None else None


def _gone(pid: int) -> bool:
    return not procs.alive(pid)


# -- SIGKILL of the runner during a sweep --------------------------------------------------------


def test_sigkill_of_the_runner_leaves_no_sweep_process(tmp_path: Path) -> None:
    """A real `pitwall collect` runs a long sweep against a watched simulator; SIGKILL the runner:
    the sweep process ends too (it watches its parent) and its run says why."""
    port = free_port()
    sim = subprocess.Popen(
        [sys.executable, "-m", "simulator.launch_server", "--model-path", "Qwen/Qwen2.5-7B-Instruct",
         "--port", str(port)], cwd=REPO, env=subprocess_env({"SGLANG_SIM_STARTUP_S": "0"}),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    db = tmp_path / "data" / "pitwall.db"
    cfg = tmp_path / "pitwall.toml"
    cfg.write_text(f'[[servers]]\nname = "watched"\nbase_url = "http://127.0.0.1:{port}"\n')
    env = subprocess_env({"PITWALL_DATA_DIR": str(tmp_path / "data"), "PITWALL_DATABASE_URL": f"sqlite:///{db}",
                          "PITWALL_CONFIG": str(cfg), "PITWALL_DEMO": "off", "PITWALL_CANARY_INTERVAL_S": "0"})
    runner = subprocess.Popen([sys.executable, "-m", "cli", "collect"], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    sweep_pid = None
    try:
        engine = make_engine(f"sqlite:///{db}")
        wait_for(lambda: repo.get_server(engine, name="watched"), what="the runner to sync servers")
        run_id, _ = bm.start_sweep(engine, bm.SweepRequest(server="watched", levels=[1], requests=100_000,
                                                           max_new_tokens=256, prompt_set="synthetic"))

        def sweep_child() -> int | None:
            try:
                kids = psutil.Process(runner.pid).children(recursive=True)
            except psutil.Error:
                return None
            return next((k.pid for k in kids if "runner.sweep_child" in " ".join(k.cmdline())), None)

        sweep_pid = wait_for(sweep_child, what="the sweep process")
        wait_for(lambda: repo.get_probe_run(engine, run_id=run_id).status == "running", what="the sweep to run")
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(30)
        wait_for(lambda: _gone(int(sweep_pid)), what="the sweep process to end with its runner")
        run = repo.get_probe_run(engine, run_id=run_id)
        assert run.status == "aborted" and "runner" in (run.error or ""), (run.status, run.error)
    finally:
        for p in (runner, sim):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        if sweep_pid and not _gone(sweep_pid):
            os.kill(sweep_pid, signal.SIGKILL)


# -- SIGTERM: servers stop before the poll threads are joined ------------------------------------


class _StuckCollector:
    """A collector whose poll hangs (a server that stalls mid-read) until released."""

    name = "stuck"
    interval_s = 0.05

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def poll(self, ctx: CollectorContext) -> PollResult:
        self.entered.set()
        self.release.wait(600)
        return PollResult()

    def close(self) -> None:
        pass


def test_stop_stops_servers_even_while_a_poll_hangs(tmp_path: Path, engine) -> None:
    server = _managed(engine, tmp_path)
    supervisor, handlers = runner_parts(_settings(tmp_path), engine)
    stuck = _StuckCollector()
    runner = Runner(engine, [stuck], supervisor=supervisor, intent_handlers=handlers, tick_s=0.05)
    thread = _start(runner)
    try:
        launch = wait_for(lambda: _ready_launch(engine, server.id), what="auto-start")
        assert stuck.entered.wait(30)
        runner.stop()  # what SIGTERM / Ctrl-C does in `pitwall collect`
        wait_for(lambda: _gone(launch.pid), what="the server to be stopped while a poll still hangs")
        wait_for(lambda: repo.get_launch(engine, launch_id=launch.id).status == "stopped", what="the launch closed")
    finally:
        stuck.release.set()
        runner.stop()
        thread.join(60)
    assert not thread.is_alive()


# -- a server adopted while starting that never answers ------------------------------------------


def test_adopted_starting_server_fails_after_its_ready_timeout(tmp_path: Path, engine) -> None:
    server = repo.upsert_server(engine, name="mute", base_url=f"http://127.0.0.1:{free_port()}", managed=True,
                                python=sys.executable, profile=None)
    mute = procs.spawn([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        started = psutil.Process(mute.pid).create_time()
        launch = repo.create_launch(engine, server_id=server.id, profile_name="x", argv=["x"], env={},
                                    pid=mute.pid, status="starting", started_at=started)
        sup = ProcessSupervisor(engine, planner=lambda *a: None, auto_start=False,  # type: ignore[arg-type]
                                ready_timeout_s=1.0, stop_timeout_s=5.0)
        sup.tick()  # adopts it: alive, created when the launch started
        # adopted: it is watched, or (on a host slow enough that the 1-s ready timeout passed before
        # this first tick) already failed by it; a launch not adopted would be closed as "exited"
        status = repo.get_launch(engine, launch_id=launch.id).status
        assert server.id in sup.targets_info() or status == "failed", status

        def failed() -> bool:
            sup.tick()
            return repo.get_launch(engine, launch_id=launch.id).status == "failed"

        wait_for(failed, what="the adopted launch to leave `starting`")
        assert mute.wait(10) is not None  # stopped, not left running
        kinds = set(repo.list_events(engine, server_id=server.id)["kind"])
        assert "warmup_failed" in kinds
    finally:
        procs.stop(mute, timeout_s=0)


# -- pending intents expire ----------------------------------------------------------------------


def test_pending_intents_older_than_the_expiry_are_expired_not_run(engine) -> None:
    ran: list[int] = []
    old = repo.create_intent(engine, kind="probe", server_id=None, payload={}, requested_by="alice")
    repo.update_intent(engine, intent_id=old.id, created_at=time.time() - 3600)
    fresh = repo.create_intent(engine, kind="probe", server_id=None, payload={}, requested_by="bob")

    def handler(intent) -> None:
        ran.append(intent.id)
        repo.update_intent(engine, intent_id=intent.id, state="done", message="ok")

    runner = Runner(engine, [], intent_handlers={"probe": handler}, tick_s=0.02, intent_expiry_s=600)
    runner.run(duration_s=1.0)
    got = repo.get_intent(engine, intent_id=old.id)
    assert got.state == "expired" and "Expired" in got.message
    assert ran == [fresh.id]
    events = repo.list_events(engine, kinds=["intent_expired"])
    assert len(events) == 1 and "alice" in events.iloc[0]["message"]


# -- two runners never supervise one server --------------------------------------------------------


def test_a_runner_that_lost_its_lease_while_stalled_claims_and_starts_nothing(tmp_path: Path, engine) -> None:
    """Runner A holds the lease and stalls; runner B takes it over (A's heartbeat is older than the
    TTL). When A wakes, the launch intent waiting in storage and the auto-start of its managed
    server are not A's any more: it claims nothing, starts nothing, and stops."""
    server = _managed(engine, tmp_path)
    supervisor, handlers = runner_parts(_settings(tmp_path), engine)
    a = Runner(engine, [], supervisor=supervisor, intent_handlers=handlers, tick_s=0.02, holder="host:A")
    a.acquire()
    ok, _ = repo.acquire_lease(engine, scope=a.lease.scope, holder="host:B", pid=os.getpid(), host="elsewhere",
                               ttl_s=0)  # B, after the stall
    assert ok
    intent = launcher.request(engine, kind="launch", server_name="sim", actor="op")
    a.run(duration_s=5.0)  # A wakes up
    assert a.lost_lease
    assert repo.get_intent(engine, intent_id=intent.id).state == "pending"  # left for B
    assert repo.latest_launch(engine, server_id=server.id) is None  # nothing started
    assert [i.id for i in repo.list_intents(engine, server_id=server.id)] == [intent.id]  # no auto-start


# -- an operator's Stop is remembered ------------------------------------------------------------


def test_operator_stop_survives_a_runner_restart(tmp_path: Path, engine) -> None:
    server = _managed(engine, tmp_path)
    settings = _settings(tmp_path)

    def runner() -> tuple[Runner, threading.Thread]:
        sup, handlers = runner_parts(settings, engine)
        r = Runner(engine, [], supervisor=sup, intent_handlers=handlers, tick_s=0.05)
        return r, _start(r)

    r1, t1 = runner()
    try:
        # the auto-start is over when its intent is done: the launch row reads ready a moment
        # before the intent is closed, and a request in that moment is (rightly) refused as busy
        wait_for(lambda: _ready_launch(engine, server.id) and launcher.pending_control(engine, server.id) is None,
                 what="auto-start")
        stop = launcher.request(engine, kind="stop", server_name="sim", actor="alice")
        wait_for(lambda: repo.get_intent(engine, intent_id=stop.id).state == "done", what="the stop")
    finally:
        r1.stop()
        t1.join(60)
    r2, t2 = runner()
    try:
        time.sleep(1.0)  # several first-tick chances to auto-start (it must not)
        assert not repo.list_intents(engine, server_id=server.id, kinds=["launch"], states=["pending", "running"])
        assert _ready_launch(engine, server.id) is None
        assert repo.get_server(engine, name="sim").stopped_by == "alice"
        # a launch by an operator brings it back and forgets the stop
        go = launcher.request(engine, kind="launch", server_name="sim", actor="bob")
        wait_for(lambda: repo.get_intent(engine, intent_id=go.id).state == "done", what="the launch")
        assert repo.get_server(engine, name="sim").stopped_by is None
    finally:
        r2.stop()
        t2.join(60)


# -- auto-restart with a budget ------------------------------------------------------------------


def test_auto_restart_stops_at_its_budget(tmp_path: Path, engine) -> None:
    server = _managed(engine, tmp_path)
    sup, handlers = runner_parts(_settings(tmp_path, auto_restart=True, restart_budget=2, restart_window_s=3600),
                                 engine)
    assert sup.auto_restart and sup.restart_budget == 2
    r = Runner(engine, [], supervisor=sup, intent_handlers=handlers, tick_s=0.05)
    t = _start(r)
    try:
        for crash in range(3):
            launch = wait_for(lambda: _ready_launch(engine, server.id), 120, what=f"ready before crash {crash}")
            os.killpg(launch.pid, signal.SIGKILL)  # it "crashes": the supervisor did not stop it
            wait_for(lambda lid=launch.id: repo.get_launch(engine, launch_id=lid).status == "exited", 120,
                     what="the exit to be recorded")
            if crash < 2:
                wait_for(lambda lid=launch.id: (x := _ready_launch(engine, server.id)) and x.id != lid, 120,
                         what=f"auto-restart {crash + 1}")
        wait_for(lambda: len(repo.list_events(engine, kinds=["restart_budget_exhausted"])) == 1, 120,
                 what="the budget event")
        time.sleep(1.5)  # past the first backoff: no third restart
        assert _ready_launch(engine, server.id) is None
        assert len(repo.list_launches(engine, server_id=server.id)) == 3
    except AssertionError as exc:  # say what the supervisor did, not only what was missing
        events = repo.list_events(engine, server_id=server.id)[["kind", "message"]].to_dict("records")
        intents = [(i.id, i.kind, i.state, i.requested_by, i.message) for i in repo.list_intents(engine, server_id=server.id)]
        raise AssertionError(f"{exc}\nevents: {events}\nintents: {intents}") from None
    finally:
        r.stop()
        t.join(60)
