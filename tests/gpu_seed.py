"""H200 recordings (tests/fixtures/nvml-h200-*.json) stored into a database through the GPU
collector, one frame a second, as the runner stores them: the seed of the GPU-wall tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectors.base import CollectorContext, ServerTarget
from collectors.gpu import GpuCollector
from collectors.gpu_record import ReplayBackend, load_recording
from storage import repo

FIXTURES = Path(__file__).resolve().parent / "fixtures"
T0 = 1_800_000_000.0


def store_recording(engine: Any, fixture: str, *, queue: float | None = None, t0: float = T0,
                    server_id: int = 1) -> None:
    """Replay `fixture` through the GPU collector into `engine` for `server_id`; `queue`: also a
    `metrics.num_running_reqs` sample of that value with every frame (requests running)."""
    rec = load_recording(FIXTURES / fixture)
    backend = ReplayBackend.from_recording(rec)
    collector = GpuCollector(backend_factory=lambda: backend)
    server = ServerTarget(id=server_id, name="h200", base_url="http://127.0.0.1:1")
    _poll_and_store(engine, collector, server, [t0 + frame["t"] for frame in rec["frames"]], queue)


def _poll_and_store(engine: Any, collector: Any, server: ServerTarget, stamps: list[float],
                    queue: float | None) -> None:
    """Poll `collector` once at each of `stamps` and store its samples and `gpu:info` state."""
    state: dict[str, dict] = {}
    rows = []
    for ts in stamps:
        ctx = CollectorContext(servers=[server], load_state=state.get, save_state=state.__setitem__,
                               now=lambda ts=ts: ts)
        rows += [{"ts": s.ts, "server_id": s.server_id, "launch_id": None, "source": s.source,
                  "metric": s.metric, "value": s.value} for s in collector.poll(ctx).samples]
        if queue is not None:
            rows.append({"ts": ts, "server_id": server.id, "launch_id": None, "source": "metrics",
                         "metric": "metrics.num_running_reqs", "value": queue})
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
        repo.save_state(conn, key="gpu:info", value=state["gpu:info"])


MIG_FIXTURE = "dcgm-exporter-4.1.1-4.0.4-h20-mig.prom"


def store_dcgm(engine: Any, fixture: str = MIG_FIXTURE, *, frames: int = 30, t0: float = T0,
               server_id: int = 1, gpu_indices: list[int] | None = None,
               queue: float | None = None) -> None:
    """Serve `fixture` (a dcgm-exporter payload) on a loopback port and poll it `frames` times,
    one a second from `t0`, through the GPU collector built as `gpu.dcgm_url` builds it; store
    its samples and `gpu:info` for `server_id` (claiming `gpu_indices`, else every GPU). The
    default is GPU 0 in MIG mode (GI 1 = 3g.48gb: DRAM 63 %, tensor 21 %; GI 3 = 2g.24gb: idle)
    beside whole card GPU 1 (DRAM 71 %, tensor 40 %). `queue`: as in store_recording."""
    import http.server
    import threading

    from collectors.registry import build_collectors

    body = (FIXTURES / fixture).read_bytes()

    class Exporter(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        [collector], errors = build_collectors(
            {}, names={"gpu"}, gpu={"dcgm_url": f"http://127.0.0.1:{srv.server_address[1]}/metrics"})
        assert not errors, errors
        server = ServerTarget(id=server_id, name="mig", base_url="http://127.0.0.1:1",
                              gpu_indices=list(gpu_indices or []))
        _poll_and_store(engine, collector, server, [t0 + k for k in range(frames)], queue)
        collector.close()
    finally:
        srv.shutdown()
        srv.server_close()
