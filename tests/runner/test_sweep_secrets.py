"""A sweep's API key never sits in a file: the runner hands the spec to the sweep
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
@pytest.mark.integration
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


def test_specs_an_older_pitwall_left_are_removed(tmp_path):
    """Its spec.json (the key) once its sweep has surely read it; the folder once no sweep can
    still run (its stderr.txt is read at the end); a fresh spec and other folders stay."""
    def folder(name: str, age_s: float) -> Path:
        d = tmp_path / name
        d.mkdir()
        for f in ("spec.json", "stderr.txt"):
            (d / f).write_text(f'{{"api_key": "{KEY}"}}' if f == "spec.json" else "")
        past = time.time() - age_s
        for p in (d / "spec.json", d / "stderr.txt", d):
            os.utime(p, (past, past))
        return d

    running = folder(f"{LEFTOVER_PREFIX}running", 3600)
    ancient = folder(f"{LEFTOVER_PREFIX}ancient", 2 * 86400)
    fresh = folder(f"{LEFTOVER_PREFIX}fresh", 1)
    other = folder("someone-else", 2 * 86400)
    assert purge_leftover_specs(str(tmp_path)) == 2
    assert not (running / "spec.json").exists() and (running / "stderr.txt").exists()
    assert not ancient.exists()
    assert (fresh / "spec.json").exists() and (other / "spec.json").exists()
