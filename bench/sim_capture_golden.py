"""Capture the golden simulator fixtures other parsers test against.

Runs the simulator (8B on H100, --max-total-tokens 1200 so the pool fills and retracts,
--enable-metrics, --decode-log-interval 10), sends a shared-prefix workload of 32 concurrent
/generate requests plus one OpenAI chat request, scrapes /metrics, stops it with SIGTERM and
writes:

- tests/fixtures/sim-0.5.23-llm.log      stdout+stderr of the whole run (startup to shutdown)
- tests/fixtures/sim-0.5.23-metrics.prom /metrics text after the workload

    .venv/bin/python bench/sim_capture_golden.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def workload(base: str) -> str:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as s:
        for _ in range(300):
            try:
                async with s.get(base + "/health") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        prefix = "You are the on-call assistant. Answer briefly. " * 6

        async def one(i: int) -> None:
            body = {"text": prefix + f"Incident {i}: what failed?",
                    "sampling_params": {"max_new_tokens": 80}}
            async with s.post(base + "/generate", json=body) as r:
                await r.read()

        await asyncio.gather(*(one(i) for i in range(32)))
        chat = {"messages": [{"role": "user", "content": "Summarise the incidents."}],
                "max_tokens": 20, "stream": True, "stream_options": {"include_usage": True}}
        async with s.post(base + "/v1/chat/completions", json=chat) as r:
            await r.read()
        async with s.get(base + "/metrics") as r:
            return await r.text()


def main() -> int:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "sim.log"
        with open(log_path, "wb") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "simulator.launch_server", "--model-path",
                 "meta-llama/Llama-3.1-8B-Instruct", "--port", str(port), "--enable-metrics",
                 "--max-total-tokens", "1200", "--decode-log-interval", "10",
                 "--sim-speed", "20", "--sim-startup-s", "2", "--sim-seed", "1"],
                stdout=fh, stderr=subprocess.STDOUT, cwd=REPO,
                env={k: v for k, v in os.environ.items() if k != "SGLANG_LOG_MS"})
        try:
            metrics = asyncio.run(workload(f"http://127.0.0.1:{port}"))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        time.sleep(0.1)
        FIXTURES.mkdir(parents=True, exist_ok=True)
        (FIXTURES / "sim-0.5.23-llm.log").write_text(log_path.read_text())
        (FIXTURES / "sim-0.5.23-metrics.prom").write_text(metrics)
    print(f"wrote {FIXTURES / 'sim-0.5.23-llm.log'} and {FIXTURES / 'sim-0.5.23-metrics.prom'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
