"""The server supervisor: starts, watches, stops and relaunches managed SGLang servers.

Driven by Intents (launch / stop / relaunch) that the runner claims in its "control" lane, so one
server is never launched twice. What to start comes from a *planner* injected by the entry point
(dashboard/services/launcher.py: it resolves the profile, validates flags and env, runs the
guardrails and returns a LaunchPlan (collectors/launch_plan.py), or raises PlanError); this module
only runs processes:

- start: `subprocess.Popen(plan.argv)` (an argument list, never a shell), in its own session and
  process group, env = os.environ + the profile's [env], stdout+stderr appended to the server's
  ONE log file (every launch of a server appends to the same file, so the log collector's tail has
  no gap across relaunches; nothing of Pitwall's is written into it, the Launch row's intent
  result records the byte offset where a launch's output starts).
- ready: `GET <base_url>/health` answers 200 or the log shows SGLang's ready line
  `The server is fired up and ready to roll!`; progress goes to Intent.progress as
  {"stage": stopping|starting|loading|ready|rolling back|rolled back|failed, "fraction": 0-1,
  "detail": text} while it waits (log milestones: weight load, memory pool, CUDA graphs).
- stop: SIGTERM to the process group, wait `stop_timeout_s`, then SIGKILL.
- relaunch = stop + start; when the new profile exits or times out before ready, the last launch
  that reached ready is started again with its exact argv and env (rollback), and the failing log
  excerpt goes into the relaunch_failed event and the Intent message.
- tick(): a managed server that exits on its own is recorded within one tick (server_exit event
  with the exit code and the log tail; classifying crash/OOM is the log collector's job); optional
  auto-restart with exponential backoff (off by default). On the first tick, managed servers that
  have a profile and no live process get a `launch` intent (auto-start); stale Launch rows of a
  previous runner are closed, and live ones are adopted.
- shutdown(): stops the servers this supervisor runs.

Concurrency rule (documented in the Profiles page and `pitwall relaunch --help`): one lifecycle
action per server at a time. A launch/stop/relaunch intent that was requested while another one
for the same server was pending or running is refused (state `cancelled`, message naming the
intent it collided with) instead of running a second relaunch right after the first.

Events: server_ready, server_exit, relaunch_started, relaunch_done, relaunch_failed, rollback,
plus the planner's bad_cli_flag / port_in_use (PlanError.kind).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy.engine import Engine

from collectors.http import auth_headers
from collectors.launch_plan import (
    READY_LINE,
    LaunchPlan,
    PlanError,
    Planner,
    read_from,
    reason_line,
    startup_progress,
    tail_lines,
)
from collectors.sglang.api_parse import SERVER_INFO_PATHS
from storage import repo
from storage.models import Intent, Launch, Server

__all__ = ["CONTROL_KINDS", "LaunchPlan", "PlanError", "Planner", "ProcessSupervisor"]

log = logging.getLogger("pitwall.supervisor")

CONTROL_KINDS = ("launch", "stop", "relaunch")


class _Proc:
    """A server process: a Popen we started, or a psutil handle on one a previous runner left."""

    def __init__(self, popen: subprocess.Popen[bytes] | None = None, pid: int | None = None) -> None:
        self.popen = popen
        self.pid = popen.pid if popen is not None else int(pid or 0)
        self._ps: psutil.Process | None = None
        if popen is None:
            try:
                self._ps = psutil.Process(self.pid)
            except psutil.Error:
                self._ps = None

    def poll(self) -> int | None:
        if self.popen is not None:
            return self.popen.poll()
        if self._ps is None:
            return -1
        try:
            if self._ps.status() == psutil.STATUS_ZOMBIE:
                return -1
            return None if self._ps.is_running() else -1
        except psutil.Error:
            return -1

    def wait(self, timeout: float) -> int | None:
        if self.popen is not None:
            try:
                return self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.poll()
            if code is not None:
                return code
            time.sleep(0.05)
        return None

    def pids(self) -> list[int]:
        try:
            p = psutil.Process(self.pid)
            return [self.pid] + [c.pid for c in p.children(recursive=True)]
        except psutil.Error:
            return [self.pid]


@dataclass
class _Managed:
    server_id: int
    launch_id: int
    proc: _Proc
    plan: LaunchPlan | None
    log_offset: int
    phase: str = "starting"  # starting | ready | stopping
    restarts: int = 0


class ProcessSupervisor:
    """Implements collectors.runner.Supervisor for managed servers."""

    def __init__(
        self,
        engine: Engine,
        planner: Planner,
        *,
        auto_start: bool = True,
        auto_restart: bool = False,
        max_backoff_s: float = 300.0,
        stop_timeout_s: float = 30.0,
        poll_s: float = 0.05,
    ) -> None:
        self.engine = engine
        self.planner = planner
        self.auto_start = auto_start
        self.auto_restart = auto_restart
        self.max_backoff_s = max_backoff_s
        self.stop_timeout_s = stop_timeout_s
        self.poll_s = poll_s
        self._procs: dict[int, _Managed] = {}
        self._lock = threading.RLock()
        self._started = False
        self._closing = threading.Event()
        self._restart_at: dict[int, tuple[float, int]] = {}  # server_id -> (due monotonic, attempt)

    # -- runner protocol ------------------------------------------------------------------------
    def targets_info(self) -> dict[int, tuple[int | None, list[int]]]:
        with self._lock:
            return {sid: (m.launch_id, m.proc.pids()) for sid, m in self._procs.items()}

    def tick(self) -> None:
        if not self._started:
            self._first_tick()  # raises on a locked database: retried on the next tick
            self._started = True
        exited: list[tuple[_Managed, int]] = []
        with self._lock:
            for sid, m in list(self._procs.items()):
                if m.phase != "ready":
                    continue  # starting/stopping processes are watched by the intent in flight
                code = m.proc.poll()
                if code is not None:
                    del self._procs[sid]
                    exited.append((m, code))
        for m, code in exited:
            self._record_exit(m, code)
        self._due_restarts()

    def handle_intent(self, intent: Intent) -> None:
        assert intent.id is not None
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
            self._do_stop_intent(intent.id, server)
        elif intent.kind in ("launch", "relaunch"):
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
                what = f"{other.kind} #{other.id}"
                prof = (other.payload or {}).get("profile")
                if prof:
                    what += f" (profile {prof})"
                return (
                    f"Refused: {what} for this server was already pending or running when this "
                    f"{intent.kind} was requested; one lifecycle action per server at a time. "
                    "Request it again if you still want it."
                )
        return None

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

    def _do_stop_intent(self, intent_id: int, server: Server) -> None:
        assert server.id is not None
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
                         f"{server.name} is already running (launch #{current.launch_id}); use relaunch to change its profile.")
            return
        replacing = current is not None
        self._progress(intent_id, "starting", 0.02, "validating the profile")
        try:
            plan = self.planner(server, profile, replacing)
        except PlanError as exc:
            repo.add_event(self.engine, kind=exc.kind, server_id=server.id, severity="error",
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
            self._progress(intent_id, "stopping", 0.05, f"stopping launch #{current.launch_id} (pid {current.proc.pid})")
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
                         {"launch_id": m.launch_id, "seconds": took, "log_offset": m.log_offset}, stage="ready")
            return
        launch_id = m.launch_id if m else None
        failed_msg = f"Profile {plan.profile_name} failed to come up: {why}"
        exited = m is not None and m.proc.poll() is not None and "not ready within" not in why
        failed_kind = "relaunch_failed" if kind == "relaunch" else "server_exit" if exited else "warmup_failed"
        repo.add_event(self.engine, kind=failed_kind,
                       server_id=server.id, launch_id=launch_id, severity="error",
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
            ready_timeout_s=max(plan.ready_timeout_s, 60.0),
        )
        ok_back, m_back, why_back, excerpt_back = self._start(back_plan, intent_id, rollback=True)
        if ok_back:
            assert m_back is not None
            repo.add_event(self.engine, kind="rollback", server_id=server.id, launch_id=m_back.launch_id,
                           severity="warning",
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
               ) -> tuple[bool, _Managed | None, str, str]:
        """Spawn and wait for ready: (ok, managed, why it failed, log excerpt)."""
        Path(plan.log_path).parent.mkdir(parents=True, exist_ok=True)
        stage = "rolling back" if rollback else "starting"
        with open(plan.log_path, "ab") as logf:
            offset = logf.tell()
            env = {**os.environ, **plan.env}
            try:
                popen = subprocess.Popen(
                    plan.argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=env, cwd=plan.cwd, start_new_session=True,
                )
            except OSError as exc:
                return False, None, f"cannot start {plan.argv[0]}: {exc.strerror}", ""
        t_spawn = time.time()
        launch = repo.create_launch(
            self.engine, server_id=plan.server_id, profile_id=plan.profile_id, profile_name=plan.profile_name,
            profile_hash=plan.profile_hash, argv=list(plan.argv), env=dict(plan.env), pid=popen.pid,
            log_path=plan.log_path, status="starting", started_at=t_spawn,
        )
        assert launch.id is not None
        m = _Managed(plan.server_id, launch.id, _Proc(popen), plan, offset)
        with self._lock:
            self._procs[plan.server_id] = m
        self._progress(intent_id, stage, 0.1, f"pid {popen.pid} started")
        deadline = time.monotonic() + plan.ready_timeout_s
        headers = auth_headers(plan.api_key)
        last_frac = -1.0
        while True:
            code = m.proc.poll()
            text = read_from(plan.log_path, offset)
            if code is not None:
                why = f"the process exited with code {code} before it was ready"
                return self._fail_start(m, code, why, text)
            if READY_LINE in text or self._healthy(plan.base_url, headers):
                break
            if time.monotonic() > deadline:
                self._stop(m, reason="not ready in time")
                why = f"not ready within {plan.ready_timeout_s:.0f} s (no /health 200, no ready line)"
                return self._fail_start(m, m.proc.poll(), why, read_from(plan.log_path, offset), stopped=True)
            if self._closing.is_set():
                self._stop(m, reason="runner stopped")
                return self._fail_start(m, m.proc.poll(), "the runner is stopping", text, stopped=True)
            frac, detail = startup_progress(text)
            if frac != last_frac:
                last_frac = frac
                self._progress(intent_id, "loading" if frac > 0.2 else stage, 0.1 + 0.85 * frac, detail)
            time.sleep(self.poll_s)
        ready_at = time.time()
        info = self._server_info(plan.base_url, headers)
        fields: dict[str, Any] = {"status": "ready", "ready_at": ready_at}
        if info is not None:
            fields["server_args"] = info
            if isinstance(info.get("version"), str):
                fields["sglang_version"] = info["version"]
        repo.update_launch(self.engine, launch_id=launch.id, **fields)
        m.phase = "ready"
        repo.add_event(self.engine, kind="server_ready", server_id=plan.server_id, launch_id=launch.id,
                       message=f"{plan.server_name} ready under profile {plan.profile_name} "
                               f"({ready_at - t_spawn:.1f} s after start)")
        return True, m, "", ""

    def _fail_start(self, m: _Managed, code: int | None, why: str, text: str, stopped: bool = False
                    ) -> tuple[bool, _Managed, str, str]:
        with self._lock:
            if self._procs.get(m.server_id) is m:
                del self._procs[m.server_id]
        if not stopped:
            repo.update_launch(self.engine, launch_id=m.launch_id, status="failed", ended_at=time.time(),
                               exit_code=code, end_reason=why)
        else:
            repo.update_launch(self.engine, launch_id=m.launch_id, status="failed", end_reason=why)
        return False, m, why, tail_lines(text)

    def _healthy(self, base_url: str, headers: dict[str, str]) -> bool:
        try:
            # A fresh connection per call, closed by us: no keep-alive socket for the server to
            # close at shutdown, which would leave its port in TIME_WAIT for the next launch.
            return httpx.get(f"{base_url}/health", headers=headers, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def _server_info(self, base_url: str, headers: dict[str, str]) -> dict[str, Any] | None:
        for path in SERVER_INFO_PATHS:
            try:
                r = httpx.get(f"{base_url}{path}", headers=headers, timeout=5.0)
            except httpx.HTTPError:
                return None
            if r.status_code == 200:
                try:
                    data = r.json()
                except ValueError:
                    return None
                return data if isinstance(data, dict) else None
        return None

    def _stop(self, m: _Managed, reason: str) -> int | None:
        """SIGTERM the group, wait, SIGKILL; close the Launch row. Returns the exit code."""
        m.phase = "stopping"
        pgid = m.proc.pid
        code = m.proc.poll()
        if code is None:
            # visible to the runner's collectors (ServerTarget.serving): a planned stop is not
            # an outage to report
            repo.update_launch(self.engine, launch_id=m.launch_id, status="stopping")
        if code is None:
            _signal_group(pgid, signal.SIGTERM)
            code = m.proc.wait(self.stop_timeout_s)
            if code is None:
                _signal_group(pgid, signal.SIGKILL)
                code = m.proc.wait(10.0)
                reason += f"; killed (SIGKILL) after {self.stop_timeout_s:.0f} s"
        # The leader may be gone while children linger (an SGLang scheduler); sweep the group.
        _signal_group(pgid, signal.SIGKILL)
        with self._lock:
            if self._procs.get(m.server_id) is m:
                del self._procs[m.server_id]
        repo.update_launch(self.engine, launch_id=m.launch_id, status="stopped", ended_at=time.time(),
                           exit_code=code, end_reason=reason)
        return code

    def _record_exit(self, m: _Managed, code: int) -> None:
        server = repo.get_server(self.engine, id=m.server_id)
        name = server.name if server else f"server #{m.server_id}"
        path = (m.plan.log_path if m.plan else None) or (server.log_path if server else None)
        excerpt = tail_lines(read_from(path, m.log_offset)) if path else ""
        _signal_group(m.proc.pid, signal.SIGKILL)  # leftover children of the dead leader
        repo.update_launch(self.engine, launch_id=m.launch_id, status="exited", ended_at=time.time(),
                           exit_code=code, end_reason=f"exited on its own (code {code})")
        repo.add_event(self.engine, kind="server_exit", server_id=m.server_id, launch_id=m.launch_id,
                       severity="error", message=f"{name} exited on its own with code {code}", raw=excerpt or None)
        if self.auto_restart and not self._closing.is_set():
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
                               requested_by="runner (auto-restart)")

    def _pending_control(self, server_id: int) -> bool:
        return bool(repo.list_intents(self.engine, server_id=server_id, states=("pending", "running"),
                                      kinds=CONTROL_KINDS, limit=1))

    def _first_tick(self) -> None:
        """Adopt or close what a previous runner left; auto-start managed servers."""
        for server in repo.list_servers(self.engine):
            if not server.managed or server.id is None:
                continue
            latest = repo.latest_launch(self.engine, server_id=server.id)
            if latest is not None and latest.ended_at is None and latest.id is not None:
                if latest.pid and _same_process(latest.pid, latest.started_at):
                    proc = _Proc(pid=latest.pid)
                    m = _Managed(server.id, latest.id, proc, None, _size(latest.log_path))
                    m.phase = "ready"
                    with self._lock:
                        self._procs[server.id] = m
                    log.info("adopted %s (pid %s) from a previous runner", server.name, latest.pid)
                    continue
                repo.update_launch(self.engine, launch_id=latest.id, status="exited", ended_at=time.time(),
                                   end_reason="process gone when the runner started")
            if self.auto_start and server.profile and not self._pending_control(server.id):
                repo.create_intent(self.engine, kind="launch", server_id=server.id,
                                   payload={"profile": server.profile}, requested_by="runner (auto-start)")


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _same_process(pid: int, started_at: float, slack_s: float = 30.0) -> bool:
    """The launch's process is still this PID: alive, and created when the launch started.

    After a reboot or in a container, PIDs are reused; adopting a stranger would later signal
    its whole process group.
    """
    try:
        p = psutil.Process(pid)
        return (p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                and abs(p.create_time() - started_at) <= slack_s)
    except psutil.Error:
        return False


def _alive(pid: int) -> bool:
    try:
        p = psutil.Process(pid)
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0
