"""A simulator for the replay tests: a real process on loopback, one per module (a test module
imports the fixture: `from sim_fixture import sim_server`; several conftest.py make `from conftest` ambiguous)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pwtest import REPO, free_port, stop_process, wait_for


@contextlib.contextmanager
def running_sim(args: list[str], log: Path) -> Iterator[str]:
    """`python -m simulator.launch_server ARGS` on a free loopback port until the block ends; its URL."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "simulator.launch_server", *args,
                                 "--host", "127.0.0.1", "--port", str(port), "--sim-startup-s", "1"],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(healthy, 120, what="the simulator")
        yield url
    finally:
        stop_process(proc)


@pytest.fixture(scope="module", name="sim")
def sim_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The module's SIM_ARGS (default: a fast 8B server, 50 model seconds a second)."""
    args = getattr(request.module, "SIM_ARGS", ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "50"])
    with running_sim(args, tmp_path_factory.mktemp("sim") / "sim.log") as url:
        yield url
