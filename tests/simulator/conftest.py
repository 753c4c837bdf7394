"""Fixtures that start real simulator processes on free loopback ports and always stop them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
READY_LINE = "The server is fired up and ready to roll!"
FAST = ["--sim-speed", "50", "--sim-startup-s", "1"]
#: how long a wait for a log line or an exit may take: a simulator starting on a loaded 2-core
#: host (Python imports, the warm-up request) needs seconds; a generous deadline, no speed claim
WAIT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"simulator exited {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not in log after {timeout_s} s:\n{self.log()[-3000:]}")

    def wait_exit(self, timeout_s: float = WAIT_S) -> int:
        return self.proc.wait(timeout=timeout_s)

    def client(self, **kw: object) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=30.0, **kw)  # type: ignore[arg-type]


StartSim = Callable[..., Sim]


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[StartSim]:
    sims: list[Sim] = []

    def start(*args: str, wait_ready: bool = True, port: int | None = None,
              model: str = "meta-llama/Llama-3.1-8B-Instruct", env: dict[str, str] | None = None
              ) -> Sim:
        port = port or free_port()
        log_path = tmp_path / f"sim-{port}-{len(sims)}.log"
        cmd = [sys.executable, "-m", "simulator.launch_server", "--model-path", model,
               "--host", "127.0.0.1", "--port", str(port), *args]
        fh = open(log_path, "wb")  # noqa: SIM115 - closed with the process below
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO,
                                env={**os.environ, **(env or {})})
        fh.close()
        sim = Sim(proc, port, log_path)
        sims.append(sim)
        if wait_ready:
            sim.wait_for(READY_LINE)
        return sim

    yield start
    for sim in sims:
        if sim.proc.poll() is None:
            sim.proc.send_signal(signal.SIGTERM)
            try:
                sim.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                sim.proc.kill()
                sim.proc.wait(timeout=5)
