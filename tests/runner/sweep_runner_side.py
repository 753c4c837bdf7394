"""Helper process for test_sweep_secrets: the runner side of one sweep (runner/sweeps.py), whose
server holds an API key. argv: DATABASE_URL BASE_URL API_KEY. Runs until killed."""

from __future__ import annotations

import sys

from runner.sweeps import Sweeps
from storage import repo
from storage.db import make_engine


def main() -> None:
    url, base, key = sys.argv[1:4]
    engine = make_engine(url)
    srv = repo.upsert_server(engine, name="keyed", base_url=base, api_key=key)
    run = repo.create_probe_run(engine, server_id=srv.id, url=base, api="generate", status="pending")
    spec = {"url": base, "api_key": key, "levels": [1], "requests": 3, "warmup": 0,
            "discover_model": False, "timeout_s": 600.0}
    print(f"run {run.id}", flush=True)
    Sweeps(engine, url).run(run_id=int(run.id or 0), spec=spec)


if __name__ == "__main__":
    main()
