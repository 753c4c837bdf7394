"""The one process-group helper: every process Pitwall starts or signals goes through here.

- `spawn(argv, ...)` starts an argument list (never a shell string) in its own session and
  process group, so a stop reaches the whole tree (an inference server's scheduler and detokenizer
  children too) and a signal to Pitwall's own group does not.
- `Proc` wraps a child we started (Popen) or one a previous runner left (adopted by PID, checked
  against its start time so a reused PID is never signalled).
- `stop(proc)`: SIGTERM to the group, wait, SIGKILL; then sweep the group once more (a leader
  can exit while children linger).
- `run_capture(argv, ...)`: a short-lived child with a total deadline and capped output (profile
  validation with the engine's own parser); the whole group is killed at the deadline.
- `exit_with_parent(pid)`: called inside a child we started, ends it when the runner that
  started it dies, even by SIGKILL (no sweep outlives its runner).
- `child_env(extra, keep_pitwall=...)`: the environment of a child: Pitwall's own secrets
  (`PITWALL_PASSWORD`, `PITWALL_VIEWER_PASSWORD`, API keys: any PITWALL_* name that
  storage/redact.py calls secret) never reach one; an inference server gets no PITWALL_* at all,
  a child that is Pitwall (runner, sweep) keeps the non-secret ones (PITWALL_DATABASE_URL...).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from storage.redact import secret_name

OUTPUT_CAP_BYTES = 256 * 1024  # run_capture keeps at most this much of stdout and of stderr


def child_env(extra: Mapping[str, str] | None = None, *, keep_pitwall: bool,
              base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default os.environ) without Pitwall's secrets, then `extra` on top.

    keep_pitwall=False (inference servers, an engine's parser): every PITWALL_* variable is dropped.
    keep_pitwall=True (the runner, a sweep process): PITWALL_* variables stay except secret
    ones (PITWALL_PASSWORD and the like). `extra` (a profile's [env], the database URL of a
    sweep) is added as given: what a profile asks for, it gets.
    """
    src = os.environ if base is None else base
    env = {
        k: v for k, v in src.items()
        if not k.startswith("PITWALL_") or (keep_pitwall and not secret_name(k))
    }
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


class Proc:
    """A process group leader: a Popen we started, or a psutil handle on one we adopted."""

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
        """The exit code (-1 when an adopted process is gone), or None while it runs."""
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
        """The leader and every descendant (what NVML lists as the server's GPU processes)."""
        try:
            p = psutil.Process(self.pid)
            return [self.pid] + [c.pid for c in p.children(recursive=True)]
        except psutil.Error:
            return [self.pid]


def spawn(
    argv: list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: IO[Any] | int | None = subprocess.DEVNULL,
    stderr: IO[Any] | int | None = subprocess.STDOUT,
    stdin: IO[Any] | int | None = subprocess.DEVNULL,
) -> Proc:
    """Start `argv` as the leader of a new session and process group. Raises OSError."""
    popen = subprocess.Popen(  # noqa: S603 - an argument list, never a shell
        argv, env=dict(env) if env is not None else None, cwd=cwd, stdout=stdout, stderr=stderr,
        stdin=stdin, start_new_session=True,
    )
    return Proc(popen)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send `sig` to a process group; a group that is gone (or not ours) is ignored."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(proc: Proc, *, timeout_s: float, kill_wait_s: float = 10.0) -> tuple[int | None, bool]:
    """SIGTERM the group, wait up to timeout_s, then SIGKILL; returns (exit code, was killed).

    The group is swept with SIGKILL at the end either way: a leader that exited on SIGTERM
    can leave children (a server's scheduler) behind.
    """
    killed = False
    code = proc.poll()
    if code is None:
        signal_group(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout_s)
        if code is None:
            killed = True
            signal_group(proc.pid, signal.SIGKILL)
            code = proc.wait(kill_wait_s)
    signal_group(proc.pid, signal.SIGKILL)
    return code, killed


@dataclass(frozen=True)
class Captured:
    returncode: int | None  # None: killed at the deadline
    stdout: str
    stderr: str
    timed_out: bool


def run_capture(
    argv: list[str], *, timeout_s: float, env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None, cap_bytes: int = OUTPUT_CAP_BYTES,
) -> Captured:
    """Run a short child to completion with a total deadline; keep the last `cap_bytes` of
    each stream. At the deadline the whole group is killed. Raises OSError if it cannot start."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = spawn(argv, env=env, cwd=cwd, stdout=out, stderr=err)
        code = proc.wait(timeout_s)
        timed_out = code is None
        if timed_out:
            stop(proc, timeout_s=0.0, kill_wait_s=5.0)
        texts = []
        for f in (out, err):
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - cap_bytes))
            texts.append(f.read().decode("utf-8", "replace"))
    return Captured(None if timed_out else code, texts[0], texts[1], timed_out)


def same_process(pid: int, started_at: float, slack_s: float = 30.0) -> bool:
    """The PID is alive and was created when `started_at` says (PIDs are reused after a reboot
    or in a container; adopting a stranger would later signal its whole process group)."""
    try:
        p = psutil.Process(pid)
        return (p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                and abs(p.create_time() - started_at) <= slack_s)
    except psutil.Error:
        return False


def alive(pid: int) -> bool:
    try:
        p = psutil.Process(pid)
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def exit_with_parent(parent_pid: int, on_orphaned: Callable[[], None], *, poll_s: float = 0.5) -> threading.Thread:
    """In a child: when `parent_pid` dies (the child is re-parented), call `on_orphaned` and end
    this process with exit code 3. A daemon thread; returns it."""

    def watch() -> None:
        while True:
            if os.getppid() != parent_pid or not alive(parent_pid):
                try:
                    on_orphaned()
                finally:
                    os._exit(3)
            time.sleep(poll_s)

    t = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    t.start()
    return t


def log_size(path: str | Path | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0
