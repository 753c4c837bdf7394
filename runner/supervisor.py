"""The server supervisor: watches managed servers and carries out their lifecycle intents.

Driven by Intents (launch / stop / relaunch) that the runner claims in its control lane, so one
server is never launched twice. What to start comes from a *planner* injected by the entry point
(launching/launcher.py: it resolves the profile, validates flags and env, runs the
guardrails and returns a LaunchPlan (runner/launch_plan.py), or raises PlanError); starting and
stopping is runner/lifecycle.py, through runner/procs.py.

- tick(): a managed server that exits on its own is recorded within one tick (server_exit event
  with the exit code and the log tail; classifying crash/OOM is the log collector's job). With
  `auto_restart`, it is started again with exponential backoff, at most `restart_budget` times
  per `restart_window_s`; past the budget a `restart_budget_exhausted` event says it stays down.
- First tick: stale Launch rows of a previous runner are closed; live processes are adopted (a
  PID whose start time matches the launch). One adopted while still `starting` is watched until
  /health answers (server_ready) or its ready timeout passes (stopped, `failed`, warmup_failed).
  Managed servers with a profile and no live process get a `launch` intent (auto-start), unless
  an operator's Stop is remembered on the Server row.
- Fencing: before it starts, stops or restarts anything, the supervisor checks that the runner
  still holds its host lease generation (`set_fence`); a runner that lost it does nothing.
- A fleet: with `host` (runner.host) only that host's servers are adopted and auto-started;
  intents reach it only for them (claims are host-scoped, storage/repo/intents.py).
- shutdown(): stops the servers this supervisor runs, in parallel.

Concurrency rule (documented in the Profiles page and `pitwall relaunch --help`): one lifecycle
action per server at a time. A launch/stop/relaunch intent that was requested while another one
for the same server was pending or running is refused (state `cancelled`, message naming the
intent it collided with) instead of running a second relaunch right after the first.

Events: server_ready, server_exit, relaunch_started, relaunch_done, relaunch_failed, rollback,
warmup_failed, restart_budget_exhausted, plus the planner's bad_cli_flag / port_in_use.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.engine import Engine

from collectors.engines import get_engine
from collectors.http import auth_headers
from runner import procs
from runner.launch_plan import LaunchPlan, PlanError, Planner, read_from, tail_lines
from runner.lifecycle import Lifecycle, Managed
from storage import repo
from storage.kinds import CONTROL_KINDS, request_label
from storage.models import Intent

__all__ = ["CONTROL_KINDS", "LaunchPlan", "PlanError", "Planner", "ProcessSupervisor"]

log = logging.getLogger("pitwall.supervisor")

ADOPTED_HEALTH_EVERY_S = 2.0
AUTO_RESTART_BY = "runner (auto-restart)"  # requested_by of the launch intents auto-restart writes
AUTO_START_BY = "runner (auto-start)"  # ... and of the ones auto-start writes


def restarts_used(engine: Engine, server_id: int, window_s: float, now: float | None = None) -> int:
    """Auto-restarts of this server within the last `window_s` seconds, read from storage (the
    launch intents auto-restart wrote), so the budget survives a runner restart and the Profiles
    page shows the same count the supervisor uses."""
    since = (time.time() if now is None else now) - window_s
    return sum(1 for i in repo.list_intents(engine, server_id=server_id, kinds=("launch",), limit=200)
               if i.requested_by == AUTO_RESTART_BY and i.created_at >= since)


class ProcessSupervisor(Lifecycle):
    """Implements runner.loop.Supervisor for managed servers."""

    def __init__(
        self,
        engine: Engine,
        planner: Planner,
        *,
        auto_start: bool = True,
        auto_restart: bool = False,
        restart_budget: int = 3,
        restart_window_s: float = 3600.0,
        max_backoff_s: float = 300.0,
        stop_timeout_s: float = 30.0,
        ready_timeout_s: float = 600.0,
        poll_s: float = 0.05,
        logs_dir: Path | None = None,
        host: str | None = None,
    ) -> None:
        self.engine = engine
        self.host = host  # runner.host: only this host's servers are adopted and auto-started (None: all)
        self.logs_dir = logs_dir  # Pitwall's own logs folder: each launch's log there is rotated
        self.planner = planner
        self.auto_start = auto_start
        self.auto_restart = auto_restart
        self.restart_budget = restart_budget
        self.restart_window_s = restart_window_s
        self.max_backoff_s = max_backoff_s
        self.stop_timeout_s = stop_timeout_s
        self.ready_timeout_s = ready_timeout_s
        self.poll_s = poll_s
        self._procs: dict[int, Managed] = {}
        self._lock = threading.RLock()
        self._started = False
        self._closing = threading.Event()
        self._restart_at: dict[int, tuple[float, int]] = {}  # server_id -> (due monotonic, attempt)
        self._fence: Callable[[], bool] = lambda: True
        self._last_health = 0.0

    # -- runner protocol ------------------------------------------------------------------------
    def set_fence(self, fence: Callable[[], bool]) -> None:
        """`fence()` is True while this runner still holds its lease generation."""
        self._fence = fence

    def targets_info(self) -> dict[int, tuple[int | None, list[int]]]:
        with self._lock:
            return {sid: (m.launch_id, m.proc.pids()) for sid, m in self._procs.items()}

    def tick(self) -> None:
        if not self._fence():
            return  # another runner holds the lease: nothing here is ours to start or stop
        if not self._started:
            self._first_tick()  # raises on a locked database: retried on the next tick
            self._started = True
        exited: list[tuple[Managed, int]] = []
        adopted_starting: list[Managed] = []
        with self._lock:
            for sid, m in list(self._procs.items()):
                if m.phase == "adopted-starting":
                    adopted_starting.append(m)
                if m.phase not in ("ready", "adopted-starting"):
                    continue  # starting/stopping processes are watched by the intent in flight
                code = m.proc.poll()
                if code is not None:
                    del self._procs[sid]
                    exited.append((m, code))
        for m, code in exited:
            self._record_exit(m, code)
        if adopted_starting and time.monotonic() - self._last_health >= ADOPTED_HEALTH_EVERY_S:
            self._last_health = time.monotonic()
            for m in adopted_starting:
                if m.proc.poll() is None:
                    self._watch_adopted_start(m)
        self._due_restarts()

    def handle_intent(self, intent: Intent) -> None:
        assert intent.id is not None
        if not self._fence():
            self._finish(intent.id, "failed", "This runner lost its lease to another runner; request it again.")
            return
        refusal = self._collision(intent)
        if refusal is not None:
            repo.update_intent(self.engine, intent_id=intent.id, state="cancelled", message=refusal,
                               progress={"stage": "refused", "fraction": 1.0, "detail": refusal})
            return
        server = repo.get_server(self.engine, id=intent.server_id) if intent.server_id is not None else None
        if server is None or not server.managed:
            what = "does not exist" if server is None else "is not managed by Pitwall (managed = false)"
            self._finish(intent.id, "failed", f"Server #{intent.server_id} {what}; nothing was started or stopped.")
            return
        payload = intent.payload or {}
        if intent.kind == "stop":
            self._do_stop_intent(intent.id, server, intent.requested_by)
        elif intent.kind in ("launch", "relaunch"):
            if server.stopped_by and not payload.get("auto_restart"):
                assert server.id is not None
                repo.set_server_stopped(self.engine, server_id=server.id, stopped_by=None)
            self._do_start_intent(intent.id, intent.kind, server, payload.get("profile"), payload.get("timeout_s"))
        else:
            self._finish(intent.id, "failed", f"Unknown intent kind {intent.kind!r}.")

    def shutdown(self) -> None:
        self._closing.set()
        with self._lock:
            managed = list(self._procs.values())
        # in parallel: N servers that each take a while to exit cost the slowest, not the sum
        threads = [threading.Thread(target=self._stop, args=(m, "runner stopped")) for m in managed]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    # -- intents --------------------------------------------------------------------------------
    def _collision(self, intent: Intent) -> str | None:
        """The refusal message when another lifecycle intent for this server overlapped this one."""
        if intent.server_id is None:
            return None
        for other in repo.list_intents(self.engine, server_id=intent.server_id, kinds=CONTROL_KINDS, limit=20):
            if other.id is None or intent.id is None or other.id >= intent.id:
                continue
            if other.state in ("pending", "running") or (
                other.state in ("done", "failed")
                and other.finished_at is not None
                and other.finished_at >= intent.created_at
            ):
                what = request_label(other.id, other.kind)
                prof = (other.payload or {}).get("profile")
                if prof:
                    what += f" (profile {prof})"
                return (
                    f"Refused: {what} for this server was already pending or running when this "
                    f"{intent.kind} was requested; one lifecycle action per server at a time. "
                    "Request it again if you still want it."
                )
        return None

    # -- watching -------------------------------------------------------------------------------
    def _record_exit(self, m: Managed, code: int) -> None:
        server = repo.get_server(self.engine, id=m.server_id)
        name = server.name if server else f"server #{m.server_id}"
        path = (m.plan.log_path if m.plan else None) or (server.log_path if server else None)
        excerpt = tail_lines(read_from(path, m.log_offset)) if path else ""
        procs.stop(m.proc, timeout_s=0.0)  # leftover children of the dead leader
        repo.update_launch(self.engine, launch_id=m.launch_id, status="exited", ended_at=time.time(),
                           exit_code=code, end_reason=f"exited on its own (code {code})")
        repo.add_event(self.engine, kind="server_exit", server_id=m.server_id, launch_id=m.launch_id,
                       message=f"{name} exited on its own with code {code}", raw=excerpt or None)
        if not self.auto_restart or self._closing.is_set() or (server is not None and server.stopped_by):
            return
        used = restarts_used(self.engine, m.server_id, self.restart_window_s)
        if used >= self.restart_budget:
            self._restart_at.pop(m.server_id, None)
            repo.add_event(
                self.engine, kind="restart_budget_exhausted", server_id=m.server_id, launch_id=m.launch_id,
                message=(f"{name} exited again after {used} auto-restart(s) within "
                         f"{self.restart_window_s / 60:.0f} min; its auto-restart budget "
                         f"({self.restart_budget}) is used up and it stays down. "
                         "Read its log, fix the profile, then launch it again."),
            )
            return
        _, attempt = self._restart_at.get(m.server_id, (0.0, 0))
        delay = min(2.0 ** attempt, self.max_backoff_s)
        self._restart_at[m.server_id] = (time.monotonic() + delay, attempt + 1)

    def _due_restarts(self) -> None:
        now = time.monotonic()
        for sid, (due, attempt) in list(self._restart_at.items()):
            if now < due or self._pending_control(sid):
                continue
            with self._lock:
                if sid in self._procs:
                    continue
            # Keep the attempt count (backoff grows) until a launch reaches ready.
            self._restart_at[sid] = (float("inf"), attempt)
            launch = repo.latest_launch(self.engine, server_id=sid)
            repo.create_intent(self.engine, kind="launch", server_id=sid,
                               payload={"profile": launch.profile_name if launch else None, "auto_restart": attempt},
                               requested_by=AUTO_RESTART_BY)

    def _pending_control(self, server_id: int) -> bool:
        return bool(repo.list_intents(self.engine, server_id=server_id, states=("pending", "running"),
                                      kinds=CONTROL_KINDS, limit=1))

    def _watch_adopted_start(self, m: Managed) -> None:
        """An adopted launch that was still starting: ready when /health answers 200, failed
        (and stopped) once its ready deadline passes."""
        headers = auth_headers(m.api_key)
        eng = get_engine(m.engine)
        if m.base_url and self._healthy(m.base_url, headers, eng.health_path):
            ready_at = time.time()
            info = self._server_info(m.base_url, headers, eng.server_info_paths)
            fields: dict[str, object] = {"status": "ready", "ready_at": ready_at}
            if info is not None:
                fields["server_args"] = info
            repo.update_launch(self.engine, launch_id=m.launch_id, **fields)
            m.phase = "ready"
            repo.add_event(self.engine, kind="server_ready", server_id=m.server_id, launch_id=m.launch_id,
                           message=f"server #{m.server_id} ready (adopted from a previous runner while starting)")
            if m.interrupted is not None:
                self._interrupted_ready(m.interrupted, m.launch_id)
                m.interrupted = None
            return
        if m.ready_deadline is not None and time.time() > m.ready_deadline:
            why = (f"not ready within {self.ready_timeout_s:.0f} s of its start (adopted from a previous "
                   "runner while starting; no /health 200)")
            self._stop(m, reason=why)
            repo.update_launch(self.engine, launch_id=m.launch_id, status="failed", end_reason=why)
            repo.add_event(self.engine, kind="warmup_failed", server_id=m.server_id, launch_id=m.launch_id,
                           message=f"server #{m.server_id}: {why}")
            if m.interrupted is not None:
                self._interrupted_failed(m.interrupted, m.launch_id, why)
                m.interrupted = None

    # -- intents a killed runner left waiting on a launch ----------------------------------------
    def _interrupted_intents(self) -> dict[int, Intent]:
        """{launch id: the launch / relaunch intent a previous runner left running, waiting on
        that launch} for this host (runner/loop.py keeps them running for us to resolve)."""
        out: dict[int, Intent] = {}
        for intent in repo.list_intents(self.engine, states=("running",), kinds=("launch", "relaunch"), limit=500):
            lid = repo.in_flight_launch(intent)
            if lid is not None and (self.host is None or intent.host == self.host):
                out[lid] = intent
        return out

    def _interrupted_ready(self, intent: Intent, launch_id: int) -> None:
        """The launch the interrupted intent waited on is ready: record that, honestly."""
        assert intent.id is not None
        server = repo.get_server(self.engine, id=intent.server_id) if intent.server_id is not None else None
        name = server.name if server else f"server #{intent.server_id}"
        result = dict(intent.result or {})
        profile = result.get("profile") or "?"
        how = ("the runner carrying it out was interrupted (killed) while the server started; "
               f"{self._launch_name(server, launch_id) if server else 'its launch'} came up ready and was "
               "adopted by the runner that started next")
        if result.get("rollback"):  # the new profile had failed; the rollback is what came up
            self._finish(intent.id, "failed", f"Profile {(intent.payload or {}).get('profile')} failed to come up, "
                         f"so {name} was rolled back to profile {profile}; {how}.",
                         {**result, "rollback_launch_id": launch_id}, stage="rolled back")
            return
        if intent.kind == "relaunch":
            repo.add_event(self.engine, kind="relaunch_done", server_id=intent.server_id, launch_id=launch_id,
                           message=f"{name}: now running profile {profile} ({how})")
        self._finish(intent.id, "done", f"{name} is ready under profile {profile}; {how}.",
                     {**result, "interrupted": True}, stage="ready")

    def _interrupted_failed(self, intent: Intent, launch_id: int | None, why: str) -> None:
        assert intent.id is not None
        server = repo.get_server(self.engine, id=intent.server_id) if intent.server_id is not None else None
        what = (self._launch_name(server, launch_id) if server is not None and launch_id is not None
                else "the launch it started")
        self._finish(intent.id, "failed", f"The runner carrying this out was interrupted (killed) while "
                     f"{what} was starting, and {why}; request it again.",
                     {**(intent.result or {}), "interrupted": True}, stage="failed")

    def _close_replaced(self, server_id: int, latest_id: int) -> None:
        """Launches of this server before `latest_id` left open by a runner killed mid-relaunch:
        their process is gone (or is ended now); they were stopped by that relaunch."""
        server = repo.get_server(self.engine, id=server_id)
        latest = self._launch_name(server, latest_id) if server is not None else "a later launch"
        for launch in repo.list_launches(self.engine, server_id=server_id, limit=20):
            if launch.id is None or launch.id == latest_id or launch.ended_at is not None:
                continue
            if launch.pid and procs.same_process(launch.pid, launch.started_at):
                procs.stop(procs.Proc(pid=launch.pid), timeout_s=self.stop_timeout_s)
            repo.update_launch(self.engine, launch_id=launch.id, status="stopped", ended_at=time.time(),
                               end_reason=f"replaced by {latest}; the runner was interrupted "
                                          "before it recorded the stop")

    def _first_tick(self) -> None:
        """Adopt or close what a previous runner left; auto-start managed servers.

        A launch / relaunch the previous runner was carrying out when it died (SIGKILL) is
        finished here from what its server did: done when the launch it spawned is ready now
        or becomes ready (relaunch_done), failed when that launch is gone or never gets ready;
        a launch it replaced and left open is recorded as stopped."""
        interrupted = self._interrupted_intents()
        for server in repo.list_servers(self.engine, host=self.host):
            if not server.managed or server.id is None:
                continue
            latest = repo.latest_launch(self.engine, server_id=server.id)
            if latest is not None and latest.ended_at is None and latest.id is not None:
                intent = interrupted.pop(latest.id, None)
                self._close_replaced(server.id, latest.id)
                if latest.pid and procs.same_process(latest.pid, latest.started_at):
                    m = Managed(server.id, latest.id, procs.Proc(pid=latest.pid), None, procs.log_size(latest.log_path))
                    if latest.status == "starting":
                        m.phase = "adopted-starting"
                        m.ready_deadline = latest.started_at + self.ready_timeout_s
                        m.base_url, m.api_key = server.base_url.rstrip("/"), server.api_key
                        m.engine = server.engine
                        m.interrupted = intent
                    else:
                        m.phase = "ready"
                    with self._lock:
                        self._procs[server.id] = m
                    if intent is not None and m.phase == "ready":
                        self._interrupted_ready(intent, latest.id)
                    log.info("adopted %s (pid %s, %s) from a previous runner", server.name, latest.pid, latest.status)
                    continue
                repo.update_launch(self.engine, launch_id=latest.id, status="exited", ended_at=time.time(),
                                   end_reason="process gone when the runner started")
                if intent is not None:
                    self._interrupted_failed(intent, latest.id, "its process was gone when the runner started again")
            if server.stopped_by:
                log.info("%s stays down: stopped by %s", server.name, server.stopped_by)
                continue
            if self.auto_start and server.profile and not self._pending_control(server.id):
                repo.create_intent(self.engine, kind="launch", server_id=server.id,
                                   payload={"profile": server.profile}, requested_by=AUTO_START_BY)
        for lid, intent in interrupted.items():  # its launch is not the latest of a server of ours
            self._interrupted_failed(intent, lid, "that launch is no longer this server's current one")

