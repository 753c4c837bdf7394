"""The real router, sglang-router 0.3.2 (`make sglang-cpu` builds it beside SGLang:
scripts/sglang_cpu/build_router.sh), in front of the real SGLang 0.5.23 CPU server: requests
through it reach the server, and Pitwall's figures from its metrics port (smg_* families, no HELP
lines) match the router's own counters: requests/s over the window, the worker's health 1 and its
circuit breaker closed, by the worker's URL. PD through it cannot run here: the CPU build refuses
the `fake` transfer backend on a prefill server, and the real backends need RDMA or CUDA
(tests/real_sglang/test_real_sglang_gpu_only.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pwtest import stop_process
from real_sglang_helpers import rs

from collectors.base import ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.metrics import snapshot
from storage import series_keys as sk

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]
TIMEOUT = httpx.Timeout(300.0)


def _router_python() -> str:
    env_file = rs.default_env_dir() / "router" / "pitwall-sglang-router.env"
    if not env_file.is_file():
        reason = f"the real router is not built ({env_file} missing): run `make sglang-cpu`"
        if os.environ.get("PITWALL_REQUIRE_REAL_SGLANG") == "1":
            pytest.fail(reason + " (PITWALL_REQUIRE_REAL_SGLANG=1 forbids skipping)")
        pytest.skip(reason)
    values = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    return values["ROUTER_PYTHON"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _counter(text: str, name: str) -> float:
    return sum(s.value for s in parse_metrics(text).samples if s.name == name)


def test_pitwall_reads_the_real_routers_metrics_as_the_router_counts(real_server: Any, tmp_path: Path) -> None:
    python = _router_python()
    port, mport = _free_port(), _free_port()
    log = (tmp_path / "router.log").open("wb")
    proc = subprocess.Popen([python, "-m", "sglang_router.launch_router", f"--worker-urls={real_server.base_url}",
                             "--host=127.0.0.1", f"--port={port}", "--prometheus-host=127.0.0.1",
                             f"--prometheus-port={mport}", "--policy=round_robin", "--log-level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    url, murl = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{mport}/metrics"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/readiness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "router.log").read_text()[-2000:]
            time.sleep(0.5)
        target = ServerTarget(1, "router", url, role="router", metrics_url=murl)
        before = httpx.get(murl, timeout=10).text
        state = snapshot(target, parse_metrics(before), None, 0.0).state
        answers = [httpx.post(f"{url}/generate", timeout=TIMEOUT, json={
            "text": "Through the router.", "sampling_params": {"max_new_tokens": 4, "temperature": 0}}) for _ in range(3)]
        after = httpx.get(murl, timeout=10).text
    finally:
        stop_process(proc, 30.0)
        log.close()
    assert all(a.status_code == 200 and a.json()["meta_info"]["completion_tokens"] == 4 for a in answers)
    assert "# HELP" not in after and "smg_router_requests_total" in after  # 0.3.2's exporter
    routed = _counter(after, "smg_router_requests_total") - _counter(before, "smg_router_requests_total")
    assert routed == 3
    values = {r.metric: r.value for r in snapshot(target, parse_metrics(after), state, 10.0).rows}
    assert values[sk.METRICS_ROUTER_REQUESTS_PER_S] == routed / 10.0
    worker = real_server.base_url.rstrip("/")
    assert values[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_HEALTH) + worker] == 1.0
    assert values[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_CB) + worker] == 0.0
