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
    state: dict[str, dict] = {}
    rows = []
    for frame in rec["frames"]:
        ts = t0 + frame["t"]
        ctx = CollectorContext(servers=[server], load_state=state.get, save_state=state.__setitem__,
                               now=lambda ts=ts: ts)
        rows += [{"ts": s.ts, "server_id": s.server_id, "launch_id": None, "source": s.source,
                  "metric": s.metric, "value": s.value} for s in collector.poll(ctx).samples]
        if queue is not None:
            rows.append({"ts": ts, "server_id": server_id, "launch_id": None, "source": "metrics",
                         "metric": "metrics.num_running_reqs", "value": queue})
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
        repo.save_state(conn, key="gpu:info", value=state["gpu:info"])
