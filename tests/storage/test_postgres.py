"""The same storage code against a real PostgreSQL server (a throwaway cluster on a Unix socket).

Skips, with the reason, when the PostgreSQL server binaries are absent (Debian package
`postgresql`) or when the test cannot switch to the `postgres` user to run them.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = pytest.mark.integration  # the real PostgreSQL cluster (tests/pg.py)


def test_storage_round_trip_on_postgres(pg_url):
    from storage import repo
    from storage.db import make_engine

    engine = make_engine(pg_url)
    srv = repo.upsert_server(engine, name="pg", base_url="http://127.0.0.1:1", gpu_indices=[0, 1])
    t0 = 1_800_000_000.0
    with engine.begin() as conn:
        # the hot path (driver-level executemany with the driver's paramstyle)
        repo.insert_sample_tuples(conn, rows=[(t0 + i, srv.id, None, "log", "m", float(i)) for i in range(3000)])
    vals = repo.sample_values(engine, server_id=srv.id, metric="m", since=t0)
    assert vals.size == 3000 and np.percentile(vals, 50) == pytest.approx(1499.5)
    # buckets floor, as on SQLite: the first 20-s bucket averages 0..19 = 9.5
    df = repo.bucketed_series(engine, server_id=srv.id, metrics=["m"], since=t0, until=t0 + 3000, max_points=150)
    assert len(df) == 150 and df.iloc[0]["avg"] == pytest.approx(9.5)
    assert repo.compute_rollups(engine, until=t0 + 3000, lookback_s=3600) == 50 + 3  # minutes + quarters
    # 15-minute buckets: three quarters from RollupQuarter, the last 5 minutes from Rollup
    df = repo.bucketed_series(engine, server_id=srv.id, metrics=["m"], since=t0, until=t0 + 3000, max_points=4)
    assert df["avg"].tolist() == pytest.approx([449.5, 1349.5, 2249.5, 2849.5])
    it = repo.create_intent(engine, kind="relaunch", server_id=srv.id, payload={"profile": "x"})
    assert repo.claim_next_intent(engine).id == it.id
    ok, _ = repo.acquire_lease(engine, scope=repo.DB_SCOPE, holder="h:1", pid=1, host="h", ttl_s=15)
    assert ok
    with engine.begin() as conn:
        repo.save_state(conn, key="k", value={"offset": 5})
    assert repo.load_state(engine, key="k") == {"offset": 5}
    assert repo.table_counts(engine)["sample"] == 3000
    engine.dispose()
    time.sleep(0)  # keep the engine disposed before the cluster stops
