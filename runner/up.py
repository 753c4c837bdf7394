"""Starting Pitwall's own processes: `pitwall up` (the runner and Streamlit together, stopped
together) and the detached runner that `streamlit run app.py` starts when none is alive.

Both go through runner/procs.py: own session and process group, argument lists, and a stop that
reaches the whole tree. The runner's environment has none of Pitwall's secrets
(`procs.child_env`: it checks no password); the dashboard keeps them (it signs operators in). `up` stops the dashboard first, then gives the runner `runner_stop_s` to
stop every managed server it runs (SIGTERM; the runner stops servers before anything else), then
SIGKILLs what is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from runner import procs

REPO_ROOT = Path(__file__).resolve().parent.parent
RUNNER_STOP_TIMEOUT_S = 120.0


def runner_argv() -> list[str]:
    return [sys.executable, "-m", "cli", "collect"]


def start_detached(cwd: str | os.PathLike[str] = REPO_ROOT, env: Mapping[str, str] | None = None) -> int:
    """Start `python -m cli collect` in its own session; it outlives the caller. Returns
    its PID. Safe when one may already run: the runner's lease lets only one collect."""
    return procs.spawn(runner_argv(), cwd=cwd, env=procs.child_env(base=env, keep_pitwall=True),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid


def up(app_argv: list[str], env: Mapping[str, str], *, cwd: str | os.PathLike[str] = REPO_ROOT,
       runner_stop_s: float = RUNNER_STOP_TIMEOUT_S, on_started: str | None = None) -> int:
    """Run the runner and the dashboard until a signal (SIGINT, SIGTERM, SIGHUP) or until one
    of them exits; stop both. Returns 0 on a signal, 1 when a child exited on its own."""
    runner = procs.spawn(runner_argv(), env=procs.child_env(base=env, keep_pitwall=True), cwd=cwd,
                         stdout=None, stderr=None, stdin=None)
    app = procs.spawn(app_argv, env=env, cwd=cwd, stdout=None, stderr=None, stdin=None)
    stopping = False

    def _on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # SIGHUP: the terminal closed
        signal.signal(sig, _on_signal)
    if on_started:
        print(on_started, flush=True)
    code = 0
    try:
        while not stopping:
            if runner.poll() is not None:
                print(f"pitwall: the runner exited with code {runner.poll()}; stopping.", file=sys.stderr)
                code = 1
                break
            if app.poll() is not None:
                print(f"pitwall: the dashboard exited with code {app.poll()}; stopping.", file=sys.stderr)
                code = 1
                break
            time.sleep(0.2)
    finally:
        procs.stop(app, timeout_s=15.0, kill_wait_s=5.0)
        # the runner stops every managed server first (SIGTERM, up to 30 s each, then SIGKILL)
        procs.stop(runner, timeout_s=runner_stop_s, kill_wait_s=5.0)
    return code
