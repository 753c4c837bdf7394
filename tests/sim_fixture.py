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
def _serving(module: str, args: list[str], log: Path, url: str, path: str, what: str) -> Iterator[str]:
    """`python -m MODULE ARGS` until the block ends, once GET url+path answers 200; yields url."""
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, stdout=out, stderr=subprocess.STDOUT)

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}{path}", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(healthy, 120, what=what)
        yield url
    finally:
        stop_process(proc)


@contextlib.contextmanager
def running_sim(args: list[str], log: Path) -> Iterator[str]:
    """`python -m simulator.launch_server ARGS` on a free loopback port until the block ends; its URL."""
    port = free_port()
    with _serving("simulator.launch_server", [*args, "--host", "127.0.0.1", "--port", str(port), "--sim-startup-s", "1"],
                  log, f"http://127.0.0.1:{port}", "/health", "the simulator") as url:
        yield url


@pytest.fixture(scope="module", name="sim")
def sim_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The module's SIM_ARGS (default: a fast 8B server, 50 model seconds a second)."""
    args = getattr(request.module, "SIM_ARGS", ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "50"])
    with running_sim(args, tmp_path_factory.mktemp("sim") / "sim.log") as url:
        yield url


@contextlib.contextmanager
def running_pd(tmp: Path, *, prefill: list[str] = (), decode: list[str] = (),  # type: ignore[assignment]
               model: str = "meta-llama/Llama-3.1-8B-Instruct") -> Iterator[dict[str, str]]:
    """A disaggregated service on loopback: a prefill and a decode simulator (one bootstrap port)
    behind the router look-alike (`simulator.launch_router --pd-disaggregation`); yields the URLs
    {"prefill", "decode", "router", "router_metrics"}."""
    boot, rport, mport = free_port(), free_port(), free_port()
    common = ["--model-path", model, "--sim-speed", "50", "--enable-metrics", "--decode-log-interval", "5",
              f"--disaggregation-bootstrap-port={boot}"]
    with running_sim([*common, "--disaggregation-mode=prefill", *prefill], tmp / "prefill.log") as p_url, \
            running_sim([*common, "--disaggregation-mode=decode", *decode], tmp / "decode.log") as d_url:
        router = ["--pd-disaggregation", f"--prefill={p_url}", f"--decode={d_url}", "--host=127.0.0.1",
                  f"--port={rport}", "--prometheus-host=127.0.0.1", f"--prometheus-port={mport}"]
        with _serving("simulator.launch_router", router, tmp / "router.log", f"http://127.0.0.1:{rport}",
                      "/readiness", "the router") as url:
            yield {"prefill": p_url, "decode": d_url, "router": url,
                   "router_metrics": f"http://127.0.0.1:{mport}/metrics"}
