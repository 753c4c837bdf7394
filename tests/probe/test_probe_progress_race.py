"""The sweep's final progress wins over a progress write still in flight when the sweep ends.

The progress writer writes from a worker thread; cancelling it at the end of a sweep does not stop
a write that thread has already started. Here that write is held (a slow database: the write
waits on an event) until the sweep has stored its final state, then let through; the stored run
must still say progress 1.0. The interleaving is forced by events, not by timing: the server
answers the sweep's only request once the progress write has started, and the held write is
released by the final write.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from collectors.probe import store
from collectors.probe.cli import open_engine
from collectors.probe.sweep import SweepSpec, run_sweep
from collectors.probe.workloads import WorkloadSpec
from storage import repo

pytestmark = pytest.mark.timeout(60)
CHUNK = b'data: {"text": " hi", "output_ids": [7], "meta_info": {"prompt_tokens": 2, "completion_tokens": 1}}\n\n'


class _Gate:
    """The events of the forced interleaving."""

    def __init__(self) -> None:
        self.started = threading.Event()  # a progress write has begun (and is held)
        self.release = threading.Event()  # the final write has landed: let the held write through
        self.landed = threading.Event()  # the held write has been executed


@pytest.fixture()
def gate() -> _Gate:
    return _Gate()


@pytest.fixture()
def server(gate: _Gate) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            gate.started.wait(30)  # answer once the progress writer is inside its write
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(CHUNK + b"data: [DONE]\n\n")

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        gate.release.set()
        httpd.shutdown()
        httpd.server_close()


def test_a_late_progress_write_never_overwrites_the_final_one(
    server: str, gate: _Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'p.db'}")
    real = repo.update_probe_run

    def slow_db(engine: Any, *, run_id: int, **fields: Any) -> None:
        progress_only = "progress" in fields and not {"status", "started_at", "finished_at"} & set(fields)
        if progress_only and not gate.started.is_set():
            gate.started.set()
            gate.release.wait(30)  # held until the sweep has stored its final state
            real(engine, run_id=run_id, **fields)
            gate.landed.set()
            return
        real(engine, run_id=run_id, **fields)
        if "finished_at" in fields:
            gate.release.set()

    monkeypatch.setattr(repo, "update_probe_run", slow_db)
    spec = SweepSpec(url=server, levels=[1], requests=1, warmup=0, discover_model=False,
                     workload=WorkloadSpec(max_new_tokens=1))
    report = asyncio.run(run_sweep(spec, engine=engine))
    assert gate.landed.wait(30), "the held progress write never ran"
    run = store.get_run(engine, run_id=report.run_id)
    assert run is not None and run["status"] == "done"
    assert run["progress"] == 1.0  # the held write (progress 0.0) landed after it and changed nothing
