"""A sweep's API key never sits in a file (issue 29): the runner hands the spec to the sweep
process over a pipe, so a SIGKILL leaves no copy of the key in the temporary folder or the data
folder. Real processes: the runner side (tests/runner/sweep_runner_side.py), the real sweep
child it starts, and a loopback server that holds every request open and records its
Authorization header (proof the child has the key)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from pwtest import PY, REPO, subprocess_env

from runner.sweeps import LEFTOVER_PREFIX, purge_leftover_specs

KEY = "sk-sweep-S3CRET-4f9c1e"


class HoldingServer:
    """Answers nothing until released; remembers each request's Authorization header."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _hold(self) -> None:
                outer.seen.append(self.headers.get("Authorization") or "")
                outer.release.wait(120)

            do_GET = do_POST = _hold

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _files_with_key(*roots: Path) -> list[Path]:
    """Files holding the key, the database aside (Server.api_key is where the key lives)."""
    found = []
    for root in roots:
        for p in root.rglob("*"):
            if p.name.startswith("pitwall.db"):
                continue
            try:
                if p.is_file() and not p.is_symlink() and KEY.encode() in p.read_bytes():
                    found.append(p)
            except OSError:
                continue
    return found


def _wait(cond, what: str, timeout_s: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.timeout(180)
def test_a_sigkilled_sweep_leaves_no_file_with_the_api_key(tmp_path):
    tmp, data = tmp_path / "tmp", tmp_path / "data"
    tmp.mkdir()
    data.mkdir()
    server = HoldingServer()
    env = subprocess_env({"TMPDIR": str(tmp), "PITWALL_DATA_DIR": str(data), "PITWALL_CONFIG": ""})
    url = f"sqlite:///{data / 'pitwall.db'}"
    runner = subprocess.Popen([PY, str(REPO / "tests" / "runner" / "sweep_runner_side.py"), url, server.url, KEY],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    child = None
    try:
        _wait(lambda: f"Bearer {KEY}" in server.seen, "the sweep child to send the key")
        kids = psutil.Process(runner.pid).children(recursive=True)
        child = next(k for k in kids if "runner.sweep_child" in " ".join(k.cmdline()))
        assert KEY not in " ".join(child.cmdline())  # not in `ps` either
        assert _files_with_key(tmp, data) == []  # not even while the sweep runs
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        _wait(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE,
              "the orphaned sweep child to exit")
        assert _files_with_key(tmp, data) == []
    finally:
        server.close()
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(10)
        if child is not None and child.is_running():
            child.kill()


def test_spec_folders_an_older_pitwall_left_are_removed(tmp_path):
    old = tmp_path / f"{LEFTOVER_PREFIX}abc123"
    old.mkdir()
    (old / "spec.json").write_text(f'{{"api_key": "{KEY}"}}')
    young = tmp_path / f"{LEFTOVER_PREFIX}young"
    young.mkdir()
    other = tmp_path / "someone-else"
    other.mkdir()
    past = time.time() - 3600
    os.utime(old, (past, past))
    assert purge_leftover_specs(str(tmp_path)) == 1
    assert not old.exists() and young.exists() and other.exists()
