"""Sweeps in the runner: the probe lane's intent handler and the one way a sweep process starts.

Flow (pages never do slow work: README.md, "How it fits together"):
1. The Benchmarks page (dashboard/services/views/benchmarks.py `start_sweep`) stores a `pending`
   ProbeRun whose `spec` is the probe's SweepSpec dict, and an Intent(kind="probe",
   payload={"run_id": N}).
2. The runner's probe lane calls `Sweeps.handle(intent)`: for a managed server it waits until the
   server is ready (READY_WAIT_S), then starts ONE process, `python -m runner.sweep_child` (an
   argument list via runner/procs.py, never a shell string), and while it runs copies
   ProbeRun.progress (0..1, finished requests / planned requests) into Intent.progress.
3. The sweep process dies with its runner (--parent-pid): a runner killed by SIGKILL leaves no
   sweep behind, and the run says why it was aborted. On a clean stop, `close()` stops every
   sweep and marks its run aborted.

Secrets stay out of `ps` and off the disk: the spec, with the server's API key, goes to the
child over its stdin (a pipe: `--spec -`), never into a file, so a SIGKILL of the runner or the
sweep leaves no copy of the key behind (the child's stderr goes to an anonymous temporary file,
unlinked from the start). The database URL (it may carry a PostgreSQL password) travels in the
child's PITWALL_DATABASE_URL, never in its argv; the child's environment has none of Pitwall's
own secrets (`procs.child_env`). Spec folders an older Pitwall left in the temporary folder
(`pitwall-sweep-*`, a key in their spec.json after a SIGKILL) are removed when the probe lane
starts (`purge_leftover_specs`).

The handler settles the intent itself (done, or failed with one readable sentence).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from runner import procs
from storage import repo
from storage.models import Intent, Server

REPO_ROOT = Path(__file__).resolve().parent.parent
POLL_S = 1.0
READY_WAIT_S = 660.0  # longer than the supervisor's longest ready timeout (600 s)
SWEEP_TIMEOUT_S = 6 * 3600.0
ABORTED_BY_STOP = "The runner stopped during the sweep; start it again."
LEFTOVER_PREFIX = "pitwall-sweep-"  # the spec folders of Pitwall before the spec went by pipe
LEFTOVER_AGE_S = 60.0  # an older runner's spec this young may not have been read by its child yet


def sweep_argv(spec_path: str | Path, db_url: str | None, run_id: int | None = None,
               parent_pid: int | None = None) -> list[str]:
    """The argument list of a sweep process (no shell); `spec_path` "-" reads the spec from stdin."""
    argv = [sys.executable, "-m", "runner.sweep_child", "--spec", os.fspath(spec_path)]
    if db_url:
        argv += ["--db", db_url]
    if run_id is not None:
        argv += ["--run-id", str(run_id)]
    if parent_pid is not None:
        argv += ["--parent-pid", str(parent_pid)]
    return argv


class Sweeps:
    """Runs sweep processes for one runner; `handle` is the probe lane's intent handler."""

    def __init__(self, engine: Engine, db_url: str, *, timeout_s: float = SWEEP_TIMEOUT_S,
                 ready_wait_s: float = READY_WAIT_S) -> None:
        self.engine = engine
        self.db_url = db_url
        self.timeout_s = timeout_s
        self.ready_wait_s = ready_wait_s
        self._active: dict[int, procs.Proc] = {}
        self._lock = threading.Lock()
        purge_leftover_specs()

    # -- the one sweep runner ---------------------------------------------------------------------
    def run(self, *, run_id: int, spec: dict[str, Any],
            on_progress: Callable[[float, str], None] | None = None) -> tuple[int | None, str]:
        """Run the stored ProbeRun `run_id` with `spec` in its own process; wait for it.

        Returns (exit code or None when stopped at the deadline, last stderr line). A run the
        process left pending or running is failed here with that reason.
        """
        # stderr: an anonymous file (unlinked at once), read back below; no folder to leave behind
        with tempfile.TemporaryFile() as err:
            # the database URL by environment, not argv: `ps` shows argv to every user
            env = procs.child_env({"PITWALL_DATABASE_URL": self.db_url} if self.db_url else {},
                                  keep_pitwall=True)
            proc = procs.spawn(sweep_argv("-", None, run_id, os.getpid()), env=env,
                               cwd=REPO_ROOT, stderr=err, stdin=subprocess.PIPE)
            _feed(proc, json.dumps(spec).encode("utf-8"))  # the API key: a pipe, never a file
            with self._lock:
                self._active[run_id] = proc
            try:
                code, why = self._wait(proc, run_id, on_progress)
            finally:
                with self._lock:
                    self._active.pop(run_id, None)
            err.seek(0)
            lines = err.read().decode("utf-8", errors="replace").strip().splitlines()
        tail = why or (lines[-1] if lines else "")
        row = repo.get_probe_run(self.engine, run_id=run_id)
        if row is not None and row.status in ("pending", "running"):
            repo.update_probe_run(self.engine, run_id=run_id, status="failed", finished_at=time.time(),
                                  error=tail or f"the sweep process exited with code {code}")
        return code, tail

    def _wait(self, proc: procs.Proc, run_id: int,
              on_progress: Callable[[float, str], None] | None) -> tuple[int | None, str]:
        deadline = time.monotonic() + self.timeout_s
        last = -1.0
        while True:
            code = proc.wait(POLL_S)
            if code is not None:
                return code, ""
            if time.monotonic() > deadline:
                procs.stop(proc, timeout_s=5.0)
                return None, f"the sweep did not finish within {self.timeout_s:.0f} s and was stopped"
            run = repo.get_probe_run(self.engine, run_id=run_id)
            frac = float(run.progress or 0.0) if run else 0.0
            if on_progress is not None and frac != last:
                last = frac
                on_progress(frac, run.status if run else "running")

    def stop_all(self) -> int:
        """Stop every sweep process still running and mark its run aborted; returns how many."""
        with self._lock:
            active = dict(self._active)
        for run_id, proc in active.items():
            if proc.poll() is None:
                procs.stop(proc, timeout_s=10.0)
                repo.update_probe_run(self.engine, run_id=run_id, status="aborted", finished_at=time.time(),
                                      error=ABORTED_BY_STOP)
        return len(active)

    close = stop_all  # the runner calls close() on every handler at shutdown

    # -- the probe intent -----------------------------------------------------------------------
    def handle(self, intent: Intent) -> None:
        assert intent.id is not None
        run_id = int((intent.payload or {}).get("run_id") or 0)
        run = repo.get_probe_run(self.engine, run_id=run_id) if run_id else None
        if run is None or not run.spec:
            msg = f"Probe intent {intent.id} names no stored sweep (run {run_id}); start it again."
            repo.update_intent(self.engine, intent_id=intent.id, state="failed", message=msg)
            return
        spec = dict(run.spec)
        server = repo.get_server(self.engine, id=run.server_id) if run.server_id is not None else None
        if server is not None and server.managed:
            waited = self._wait_until_ready(intent.id, server)
            if waited is None:
                msg = (f"Sweep {run_id} did not start: {server.name} is not ready (it is starting, "
                       "stopped or failed); start it, then run the sweep again.")
                repo.update_probe_run(self.engine, run_id=run_id, status="failed", error=msg, finished_at=time.time())
                repo.update_intent(self.engine, intent_id=intent.id, state="failed", message=msg)
                return
            if run.launch_id != waited:
                spec["launch_id"] = waited
                repo.update_probe_run(self.engine, run_id=run_id, launch_id=waited, spec=spec)
        if server is not None and server.api_key:
            spec["api_key"] = server.api_key  # used by the sweep process only; never stored

        intent_id = intent.id

        def progress(frac: float, status: str) -> None:
            repo.update_intent(self.engine, intent_id=intent_id, progress={
                "stage": status, "fraction": frac, "detail": f"run {run_id}"})

        code, tail = self.run(run_id=run_id, spec=spec, on_progress=progress)
        final = repo.get_probe_run(self.engine, run_id=run_id)
        status = final.status if final else "failed"
        if status in ("done", "aborted"):
            msg = f"Sweep {run_id} {status}."
            if status == "aborted" and final is not None and final.error:
                msg = f"Sweep {run_id} aborted: {final.error}"
            repo.update_intent(self.engine, intent_id=intent.id, state="done", message=msg,
                               progress={"stage": status, "fraction": 1.0, "detail": f"run {run_id}"},
                               result={"run_id": run_id, "status": status})
            return
        final_err = (final.error if final and final.error else None) or tail or f"exit code {code}"
        repo.update_intent(self.engine, intent_id=intent.id, state="failed", message=f"Sweep {run_id} failed: {final_err}",
                           result={"run_id": run_id, "status": "failed"})

    def _wait_until_ready(self, intent_id: int, server: Server) -> int | None:
        """For a managed server: wait while its launch is starting; the ready launch id, or None."""
        assert server.id is not None
        deadline = time.monotonic() + self.ready_wait_s
        while True:
            launch = repo.latest_launch(self.engine, server_id=server.id)
            status = launch.status if launch is not None and launch.ended_at is None else None
            if status == "ready":
                return launch.id if launch is not None else None
            lifecycle_queued = bool(repo.list_intents(
                self.engine, server_id=server.id, states=("pending", "running"), kinds=("launch", "relaunch"), limit=1))
            if (status not in ("starting", "stopping") and not lifecycle_queued) or time.monotonic() > deadline:
                return None
            repo.update_intent(self.engine, intent_id=intent_id, progress={
                "stage": "waiting", "fraction": 0.0, "detail": f"waiting for {server.name} to be ready"})
            time.sleep(0.5)


def _feed(proc: procs.Proc, data: bytes) -> None:
    """Write `data` to the child's stdin and close it, in a thread: a spec larger than the pipe
    buffer must not hold the probe lane while the child starts (its deadline still applies). A
    child gone before reading it fails on its own, with a line on stderr."""
    pipe = proc.popen.stdin if proc.popen is not None else None
    if pipe is None:
        return

    def write() -> None:
        try:
            pipe.write(data)
        except OSError:  # BrokenPipeError: the child exited first
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    threading.Thread(target=write, name="sweep-spec", daemon=True).start()


def purge_leftover_specs(tmp_dir: str | None = None, *, min_age_s: float = LEFTOVER_AGE_S) -> int:
    """Remove the keys an older Pitwall left in this user's `pitwall-sweep-*` folders of the
    temporary folder (its spec.json, API key included, stayed there after a SIGKILL): a spec
    older than `min_age_s` is deleted (its sweep read it when it started), a whole folder older
    than the longest sweep (SWEEP_TIMEOUT_S + READY_WAIT_S) too. Returns how many specs went;
    never raises."""
    root = Path(tmp_dir or tempfile.gettempdir())
    removed = 0
    try:
        found = [p for p in root.iterdir() if p.name.startswith(LEFTOVER_PREFIX)]
    except OSError:
        return 0
    now = time.time()
    for folder in found:
        try:
            st = folder.lstat()
            if folder.is_symlink() or not folder.is_dir() or st.st_uid != os.getuid():
                continue
            spec = folder / "spec.json"
            if spec.is_file() and not spec.is_symlink() and now - spec.lstat().st_mtime >= min_age_s:
                spec.unlink()
                removed += 1
            if now - st.st_mtime > SWEEP_TIMEOUT_S + READY_WAIT_S:
                shutil.rmtree(folder)
        except OSError:
            continue
    return removed
