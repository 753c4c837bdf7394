"""Start, stop and relaunch one managed server, with rollback: the lifecycle half of the
supervisor (runner/supervisor.py holds the watching half).

- start: `procs.spawn(plan.argv)` (an argument list, never a shell), in its own session and
  process group, env = os.environ without any PITWALL_* variable + the profile's [env]
  (`procs.child_env`), stdout+stderr appended to the server's ONE log file, created 0600 (it
  holds the engine's startup line of its arguments, API key included; every launch of a server appends to the same file, so the log
  collector's tail has no gap across relaunches; the intent's result records the byte offset
  where a launch starts).
- ready: `GET <base_url>/health` answers 200 or the log shows the engine's ready line; progress
  goes to Intent.progress as {"stage": stopping|starting|loading|ready|rolling back|rolled back|
  failed, "fraction": 0-1, "detail": text} while it waits (log milestones).
- stop: `procs.stop`: SIGTERM to the process group, wait `stop_timeout_s`, then SIGKILL. An
  operator's Stop is remembered on the Server row (auto-start and auto-restart leave it down).
- relaunch = stop + start; when the new profile exits or times out before ready, the last launch
  that reached ready is started again with its exact argv and env (rollback), and the failing log
  excerpt goes into the relaunch_failed event and the Intent message.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import Engine

from collectors.base import CollectorError
from collectors.engines import DEFAULT_ENGINE, get_engine
from collectors.http import auth_headers, get_capped
from runner import launch_logs, procs
from runner.launch_plan import (
    LaunchPlan,
    PlanError,
    Planner,
    read_from,
    reason_line,
    tail_lines,
)
from storage import repo
from storage.files import open_private, private_dir
from storage.kinds import launch_label
from storage.models import Intent, Launch, Server

log = logging.getLogger(__name__)

HEALTH_DEADLINE_S = 1.0  # one readiness /health read in total (connect + head + body), seconds
INFO_DEADLINE_S = 5.0  # one /server_info read in total, seconds


@dataclass
class Managed:
    """A server process this supervisor runs (or adopted from a previous runner)."""

    server_id: int
    launch_id: int
    proc: procs.Proc
    plan: LaunchPlan | None
    log_offset: int
    phase: str = "starting"  # starting | ready | stopping
    ready_deadline: float | None = None  # adopted while starting: wall-clock deadline to be ready
    base_url: str | None = None  # adopted while starting: where to ask /health
    api_key: str | None = None
    engine: str = DEFAULT_ENGINE
    #: adopted: the launch / relaunch intent a previous runner left waiting on this launch
    interrupted: Intent | None = None


class Lifecycle:
    """Mixin of ProcessSupervisor: the parts that start and stop processes."""

    engine: Engine
    planner: Planner
    stop_timeout_s: float
    poll_s: float
    _procs: dict[int, Managed]
    _lock: threading.RLock
    _closing: threading.Event
    _restart_at: dict[int, tuple[float, int]]
    logs_dir: Path | None

    def _launch_name(self, server: Server, launch_id: int | None) -> str:
        """"demo launch 3": a launch by its number among its server's (storage/kinds.py)."""
        number = repo.launch_numbers(self.engine, [launch_id]).get(launch_id) if launch_id is not None else None
        return launch_label(server.name, number)

    def _progress(self, intent_id: int | None, stage: str, fraction: float, detail: str) -> None:
        if intent_id is not None:
            repo.update_intent(self.engine, intent_id=intent_id,
                               progress={"stage": stage, "fraction": round(fraction, 3), "detail": detail})

    def _finish(self, intent_id: int | None, state: str, message: str, result: dict[str, Any] | None = None,
                stage: str | None = None) -> None:
        if intent_id is None:
            return
        fields: dict[str, Any] = {"state": state, "message": message}
        if result is not None:
            fields["result"] = result
        if stage is not None:
            fields["progress"] = {"stage": stage, "fraction": 1.0, "detail": message}
        repo.update_intent(self.engine, intent_id=intent_id, **fields)

    def _note_in_flight(self, intent_id: int | None, **fields: Any) -> None:
        """Record in the intent's result what it is doing now (the launch it spawned, the one it
        replaces), so a runner killed meanwhile leaves the next one enough to tell the truth."""
        if intent_id is None:
            return
        intent = repo.get_intent(self.engine, intent_id=intent_id)
        result = dict(intent.result or {}) if intent is not None else {}
        repo.update_intent(self.engine, intent_id=intent_id, result={**result, **fields})

    def _do_stop_intent(self, intent_id: int, server: Server, requested_by: str) -> None:
        assert server.id is not None
        # remembered before anything else: a runner restart mid-stop must not start it again
        repo.set_server_stopped(self.engine, server_id=server.id, stopped_by=requested_by)
        self._restart_at.pop(server.id, None)
        with self._lock:
            m = self._procs.get(server.id)
        if m is None:
            self._finish(intent_id, "done", f"{server.name} was not running.", stage="stopped")
            return
        self._progress(intent_id, "stopping", 0.1, f"SIGTERM to {server.name} (pid {m.proc.pid})")
        code = self._stop(m, reason="stopped by operator")
        self._finish(intent_id, "done", f"{server.name} stopped (exit code {code}).",
                     {"exit_code": code, "launch_id": m.launch_id}, stage="stopped")

    def _do_start_intent(self, intent_id: int, kind: str, server: Server, profile: str | None,
                         timeout_s: float | None) -> None:
        assert server.id is not None
        with self._lock:
            current = self._procs.get(server.id)
        if kind == "launch" and current is not None:
            self._finish(intent_id, "failed",
                         f"{server.name} is already running ({self._launch_name(server, current.launch_id)}); use relaunch to change its profile.")
            return
        replacing = current is not None
        self._progress(intent_id, "starting", 0.02, "validating the profile")
        try:
            plan = self.planner(server, profile, replacing)
        except PlanError as exc:
            repo.add_event(self.engine, kind=exc.kind, server_id=server.id,
                           message=f"{server.name}: {exc}", raw=exc.detail)
            self._finish(intent_id, "failed", f"Nothing was changed: {exc}", stage="failed")
            return
        if timeout_s:
            plan = LaunchPlan(**{**plan.__dict__, "ready_timeout_s": float(timeout_s)})
        previous = self._last_good(server.id) if replacing else None
        if kind == "relaunch":
            repo.add_event(self.engine, kind="relaunch_started", server_id=server.id,
                           launch_id=current.launch_id if current else None,
                           message=f"{server.name}: relaunch under profile {plan.profile_name} requested")
        t0 = time.monotonic()
        if current is not None:
            self._note_in_flight(intent_id, replaced_launch_id=current.launch_id)
            self._progress(intent_id, "stopping", 0.05, f"stopping {self._launch_name(server, current.launch_id)} (pid {current.proc.pid})")
            self._stop(current, reason=f"relaunched under profile {plan.profile_name}")
        ok, m, why, excerpt = self._start(plan, intent_id)
        if ok:
            assert m is not None
            took = time.monotonic() - t0
            if kind == "relaunch":
                repo.add_event(self.engine, kind="relaunch_done", server_id=server.id, launch_id=m.launch_id,
                               message=f"{server.name}: now running profile {plan.profile_name} ({took:.1f} s from request to ready)")
            self._restart_at.pop(server.id, None)
            self._finish(intent_id, "done", f"{server.name} is ready under profile {plan.profile_name} ({took:.1f} s).",
                         {"launch_id": m.launch_id, "seconds": took, "log_offset": m.log_offset,
                          "replaced_launch_id": current.launch_id if current else None}, stage="ready")
            return
        launch_id = m.launch_id if m else None
        failed_msg = f"Profile {plan.profile_name} failed to come up: {why}"
        exited = m is not None and m.proc.poll() is not None and "not ready within" not in why
        failed_kind = "relaunch_failed" if kind == "relaunch" else "server_exit" if exited else "warmup_failed"
        repo.add_event(self.engine, kind=failed_kind,
                       server_id=server.id, launch_id=launch_id,
                       message=f"{server.name}: {failed_msg}", raw=excerpt)
        last_line = reason_line(excerpt)
        if self._closing.is_set() or previous is None:
            self._finish(intent_id, "failed", f"{failed_msg}. Log: {last_line}",
                         {"launch_id": launch_id, "excerpt": excerpt}, stage="failed")
            return
        # Roll back to the last launch that reached ready, with its exact argv and env.
        self._progress(intent_id, "rolling back", 0.5, f"starting profile {previous.profile_name} again")
        back_plan = LaunchPlan(
            server_id=server.id, server_name=server.name, base_url=plan.base_url,
            argv=list(previous.argv or []), env=dict(previous.env or {}), log_path=plan.log_path,
            profile_name=previous.profile_name, profile_id=previous.profile_id,
            profile_hash=previous.profile_hash, cwd=plan.cwd, api_key=plan.api_key,
            ready_timeout_s=max(plan.ready_timeout_s, 60.0), engine=plan.engine,
        )
        ok_back, m_back, why_back, excerpt_back = self._start(back_plan, intent_id, rollback=True)
        if ok_back:
            assert m_back is not None
            repo.add_event(self.engine, kind="rollback", server_id=server.id, launch_id=m_back.launch_id,
                           message=f"{server.name}: rolled back to profile {previous.profile_name} because "
                                   f"{plan.profile_name} failed ({why})", raw=excerpt)
            self._finish(intent_id, "failed",
                         f"{failed_msg}; rolled back to profile {previous.profile_name}. Log: {last_line}",
                         {"launch_id": launch_id, "rollback_launch_id": m_back.launch_id, "excerpt": excerpt},
                         stage="rolled back")
        else:
            self._finish(intent_id, "failed",
                         f"{failed_msg}; the rollback to profile {previous.profile_name} failed too ({why_back}). "
                         f"{server.name} is down. Log: {last_line}",
                         {"launch_id": launch_id, "excerpt": excerpt, "rollback_excerpt": excerpt_back},
                         stage="failed")

    def _last_good(self, server_id: int) -> Launch | None:
        for launch in repo.list_launches(self.engine, server_id=server_id, limit=50):
            if launch.ready_at is not None and launch.argv:
                return launch
        return None

    # -- processes ------------------------------------------------------------------------------
    def _start(self, plan: LaunchPlan, intent_id: int | None, rollback: bool = False
               ) -> tuple[bool, Managed | None, str, str]:
        """Spawn and wait for ready: (ok, managed, why it failed, log excerpt)."""
        private_dir(Path(plan.log_path).parent)
        if self.logs_dir is not None:  # a fresh file per launch; the last one goes by size later
            try:
                old = launch_logs.rotate(plan.log_path, self.logs_dir)
            except OSError as exc:
                log.warning("cannot rotate %s (appending to it): %s", plan.log_path, exc)
                old = None
            if old is not None:
                repo.relocate_launch_log(self.engine, old=plan.log_path, new=str(old))
        stage = "rolling back" if rollback else "starting"
        with open_private(plan.log_path, "ab") as logf:
            offset = logf.tell()
            env = procs.child_env(plan.env, keep_pitwall=False)  # a server needs no PITWALL_*
            try:
                proc = procs.spawn(plan.argv, stdout=logf, env=env, cwd=plan.cwd)
            except OSError as exc:
                return False, None, f"cannot start {plan.argv[0]}: {exc.strerror}", ""
        t_spawn = time.time()
        launch = repo.create_launch(
            self.engine, server_id=plan.server_id, profile_id=plan.profile_id, profile_name=plan.profile_name,
            profile_hash=plan.profile_hash, argv=list(plan.argv), env=dict(plan.env), pid=proc.pid,
            log_path=plan.log_path, status="starting", started_at=t_spawn,
            for_intent=intent_id, note={"profile": plan.profile_name, "rollback": rollback, "log_offset": offset},
        )
        assert launch.id is not None
        m = Managed(plan.server_id, launch.id, proc, plan, offset)
        with self._lock:
            self._procs[plan.server_id] = m
        self._progress(intent_id, stage, 0.1, f"pid {proc.pid} started")
        deadline = time.monotonic() + plan.ready_timeout_s
        headers = auth_headers(plan.api_key)
        eng = get_engine(plan.engine)
        last_frac = -1.0
        while True:
            code = m.proc.poll()
            text = read_from(plan.log_path, offset)
            if code is not None:
                why = f"the process exited with code {code} before it was ready"
                return self._fail_start(m, code, why, text)
            if eng.ready_line in text or self._healthy(plan.base_url, headers, eng.health_path):
                break
            if time.monotonic() > deadline:
                self._stop(m, reason="not ready in time")
                why = f"not ready within {plan.ready_timeout_s:.0f} s (no /health 200, no ready line)"
                return self._fail_start(m, m.proc.poll(), why, read_from(plan.log_path, offset), stopped=True)
            if self._closing.is_set():
                self._stop(m, reason="runner stopped")
                return self._fail_start(m, m.proc.poll(), "the runner is stopping", text, stopped=True)
            frac, detail = eng.startup_progress(text)
            if frac != last_frac:
                last_frac = frac
                self._progress(intent_id, "loading" if frac > 0.2 else stage, 0.1 + 0.85 * frac, detail)
            time.sleep(self.poll_s)
        ready_at = time.time()
        info = self._server_info(plan.base_url, headers, eng.server_info_paths)
        fields: dict[str, Any] = {"status": "ready", "ready_at": ready_at}
        if info is not None:
            fields["server_args"] = info
            version = eng.version_of(info)
            if version is not None:
                fields["engine_version"] = version
        repo.update_launch(self.engine, launch_id=launch.id, **fields)
        m.phase = "ready"
        repo.add_event(self.engine, kind="server_ready", server_id=plan.server_id, launch_id=launch.id,
                       message=f"{plan.server_name} ready under profile {plan.profile_name} "
                               f"({ready_at - t_spawn:.1f} s after start)")
        return True, m, "", ""

    def _fail_start(self, m: Managed, code: int | None, why: str, text: str, stopped: bool = False
                    ) -> tuple[bool, Managed, str, str]:
        with self._lock:
            if self._procs.get(m.server_id) is m:
                del self._procs[m.server_id]
        if not stopped:
            repo.update_launch(self.engine, launch_id=m.launch_id, status="failed", ended_at=time.time(),
                               exit_code=code, end_reason=why)
        else:
            repo.update_launch(self.engine, launch_id=m.launch_id, status="failed", end_reason=why)
        return False, m, why, tail_lines(text)

    def _healthy(self, base_url: str, headers: dict[str, str], path: str = "/health") -> bool:
        try:
            # A fresh connection per call, closed by us: no keep-alive socket for the server to
            # close at shutdown, which would leave its port in TIME_WAIT for the next launch.
            r = get_capped(None, f"{base_url}{path}", headers=headers, deadline_s=HEALTH_DEADLINE_S)
            return r.status_code == 200
        except (httpx.HTTPError, CollectorError):
            return False

    def _server_info(self, base_url: str, headers: dict[str, str], paths: tuple[str, ...]) -> dict[str, Any] | None:
        for path in paths:
            try:
                r = get_capped(None, f"{base_url}{path}", headers=headers, deadline_s=INFO_DEADLINE_S)
            except (httpx.HTTPError, CollectorError):
                return None
            if r.status_code == 200:
                try:
                    data = r.json()
                except ValueError:
                    return None
                return data if isinstance(data, dict) else None
        return None

    def _stop(self, m: Managed, reason: str) -> int | None:
        """SIGTERM the group, wait, SIGKILL; close the Launch row. Returns the exit code."""
        m.phase = "stopping"
        if m.proc.poll() is None:
            # visible to the runner's collectors (ServerTarget.serving): a planned stop is not
            # an outage to report
            repo.update_launch(self.engine, launch_id=m.launch_id, status="stopping")
        code, killed = procs.stop(m.proc, timeout_s=self.stop_timeout_s)
        if killed:
            reason += f"; killed (SIGKILL) after {self.stop_timeout_s:.0f} s"
        with self._lock:
            if self._procs.get(m.server_id) is m:
                del self._procs[m.server_id]
        repo.update_launch(self.engine, launch_id=m.launch_id, status="stopped", ended_at=time.time(),
                           exit_code=code, end_reason=reason)
        return code
