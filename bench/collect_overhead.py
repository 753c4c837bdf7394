"""Collection overhead: what each collector costs per poll and as % of one core at its interval.

Measured side by side in one run, against floors:

- /metrics: a ~500-line real SGLang 0.5.23 payload served by `python -m http.server` on 127.0.0.1
  (a separate process, so its CPU is not counted). Rows: raw httpx GET (the floor), GET + parse
  (prometheus_client parser behind our bad-line isolation), the full collector poll (GET, parse,
  aliases, windows, state), prometheus_client's bare parser on the same text (the parse floor),
  and our parse of the same text with one malformed line (the recovery path).
- API: the API collector's poll (/health + /v1/loads; info every 60 s) against static files.
- GPU: the collector's conversion of a recorded H200 frame (replayed), plus the NVML read time
  and CPU measured on the H200 itself (from the recording's `read_s` / `cpu_s`).

Run: `.venv/bin/python bench/collect_overhead.py [--polls 300]`. Times are medians per poll;
"% core" = CPU seconds per poll / interval x 100.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from collectors.base import CollectorContext, ServerTarget  # noqa: E402
from collectors.gpu import GpuCollector  # noqa: E402
from collectors.gpu_record import ReplayBackend, load_recording  # noqa: E402
from collectors.sglang.api import SGLangApiCollector  # noqa: E402
from collectors.sglang.metrics import SGLangMetricsCollector, parse_metrics  # noqa: E402

FIX = REPO / "tests" / "fixtures"


def payload_500() -> str:
    """Whole families of the real 0.5.23 capture, stopping once 500 lines are reached."""
    out: list[str] = []
    for line in (FIX / "sglang-0.5.23-real-cpu-metrics.prom").read_text().splitlines():
        if line.startswith("# HELP") and len(out) >= 500:
            break
        out.append(line)
    return "\n".join(out) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(fn: Callable[[], Any], polls: int) -> tuple[float, float]:
    """(median wall s, median CPU s) per call, after 10 warm-up calls."""
    for _ in range(10):
        fn()
    walls, cpus = [], []
    for _ in range(polls):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


class _State:
    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}

    def ctx(self, servers: list[ServerTarget]) -> CollectorContext:
        return CollectorContext(servers=servers, load_state=self.data.get, save_state=self.data.__setitem__)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--polls", type=int, default=300)
    args = ap.parse_args(argv)
    text = payload_500()
    lines = text.count("\n")
    bad = text.replace("sglang:num_queue_reqs{", "sglang:num_queue_reqs{{", 1)

    with tempfile.TemporaryDirectory() as root:
        d = Path(root)
        (d / "metrics").write_text(text)
        (d / "health").write_text("")
        (d / "v1").mkdir()
        (d / "v1" / "loads").write_text((FIX / "sglang-0.5.23-real-cpu-v1_loads.json").read_text())
        (d / "server_info").write_text((FIX / "sglang-0.5.23-real-cpu-server_info.json").read_text())
        (d / "model_info").write_text((FIX / "sglang-0.5.23-real-cpu-model_info.json").read_text())
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(d)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            client = httpx.Client(timeout=5.0)
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.get(url + "/health")
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            target = ServerTarget(id=1, name="bench", base_url=url)
            mc, ac = SGLangMetricsCollector(), SGLangApiCollector()
            ms, as_ = _State(), _State()
            rows = [
                ("metrics: httpx GET only (floor)", 5.0, measure(lambda: client.get(url + "/metrics").text, args.polls)),
                ("metrics: GET + parse_metrics", 5.0, measure(lambda: parse_metrics(client.get(url + "/metrics").text), args.polls)),
                ("metrics: full collector poll", 5.0, measure(lambda: mc.poll(ms.ctx([target])), args.polls)),
                ("parse: prometheus_client bare (floor)", 5.0, measure(lambda: list(text_string_to_metric_families(text)), args.polls)),
                ("parse: parse_metrics", 5.0, measure(lambda: parse_metrics(text), args.polls)),
                ("parse: parse_metrics, 1 bad line", 5.0, measure(lambda: parse_metrics(bad), args.polls)),
                ("api: full collector poll", 5.0, measure(lambda: ac.poll(as_.ctx([target])), args.polls)),
            ]  # fmt: skip
            mc.close()
            ac.close()
            client.close()
        finally:
            server.terminate()
            server.wait(timeout=10)

    rec = load_recording(FIX / "nvml-h200-matmul.json")
    gc = GpuCollector(backend_factory=lambda: ReplayBackend.from_recording(rec))
    gs = _State()
    gpu_conv = measure(lambda: gc.poll(gs.ctx([ServerTarget(id=1, name="g", base_url="")])), args.polls)
    nvml_read = statistics.median(f["read_s"] for f in rec["frames"])
    nvml_cpu = statistics.median(f["cpu_s"] for f in rec["frames"])
    rows.append(("gpu: conversion of a replayed H200 frame", 2.0, gpu_conv))
    rows.append(("gpu: NVML read on the H200 (recorded)", 2.0, (nvml_read, nvml_cpu)))
    rows.append(("gpu: total per poll (read + conversion)", 2.0, (nvml_read + gpu_conv[0], nvml_cpu + gpu_conv[1])))

    floor_wall = rows[0][2][0]
    print(f"payload: {lines} lines, {len(text)} bytes; {args.polls} polls each; medians")
    print(f"{'what':44} {'wall ms':>9} {'CPU ms':>8} {'x floor':>8} {'interval':>9} {'% core':>7}")
    for name, interval, (wall, cpu) in rows:
        ratio = f"{wall / floor_wall:8.2f}" if name.startswith("metrics") else " " * 8
        print(f"{name:44} {wall * 1e3:9.3f} {cpu * 1e3:8.3f} {ratio} {interval:8.0f}s {cpu / interval * 100:6.3f}%")
    out = {name: {"wall_s": w, "cpu_s": c, "interval_s": i} for name, i, (w, c) in rows}
    results = REPO / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "collect_overhead.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
