"""The probe lane's sweep processes (runner/sweeps.py): stopped with the runner, and the one
sweep runner fills the stored run."""

from __future__ import annotations

import sys

from runner import procs
from runner.sweeps import Sweeps
from storage import repo


def test_stop_all_kills_the_process_and_aborts_the_run(engine):
    srv = repo.upsert_server(engine, name="s", base_url="http://127.0.0.1:9")
    run = repo.create_probe_run(engine, server_id=srv.id, url=srv.base_url, api="generate", status="running")
    proc = procs.spawn([sys.executable, "-c", "import time; time.sleep(60)"])
    sweeps = Sweeps(engine, "sqlite://")
    sweeps._active[run.id] = proc
    try:
        assert sweeps.stop_all() == 1
        assert proc.poll() is not None
        got = repo.get_probe_run(engine, run_id=run.id)
        assert got.status == "aborted" and "runner stopped" in got.error
    finally:
        procs.stop(proc, timeout_s=0)
