"""A runner that stops takes its sweep subprocesses with it (they run in their own session)."""

from __future__ import annotations

import subprocess
import sys

from dashboard.services import benchmarks as bm
from storage import repo


def test_stop_active_sweeps_kills_the_process_and_aborts_the_run(engine):
    srv = repo.upsert_server(engine, name="s", base_url="http://127.0.0.1:9")
    run = repo.create_probe_run(engine, server_id=srv.id, url=srv.base_url, api="generate", status="running")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    with bm._ACTIVE_LOCK:
        bm._ACTIVE[run.id] = proc
    try:
        assert bm.stop_active_sweeps(engine) == 1
        assert proc.poll() is not None
        got = repo.get_probe_run(engine, run_id=run.id)
        assert got.status == "aborted" and "runner stopped" in got.error
    finally:
        with bm._ACTIVE_LOCK:
            bm._ACTIVE.pop(run.id, None)
        if proc.poll() is None:
            proc.kill()
