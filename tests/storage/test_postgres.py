"""The same storage code against a real PostgreSQL server (a throwaway cluster on a Unix socket).

Skips, with the reason, when the PostgreSQL server binaries are absent (Debian package
`postgresql`) or when the test cannot switch to the `postgres` user to run them.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
RUNUSER = shutil.which("runuser")


def _as_postgres(*argv: str, **kw) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    cmd = list(argv) if os.geteuid() != 0 else [RUNUSER or "runuser", "-u", "postgres", "--", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory):
    if not PG_BIN:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    if os.geteuid() == 0 and not RUNUSER:
        pytest.skip("runuser is missing; cannot run PostgreSQL as a non-root user")
    bindir = PG_BIN[-1]
    # pytest's tmp dirs are private to root; the cluster needs a folder postgres can reach
    root = Path(tempfile.mkdtemp(prefix="pitwall-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    res = _as_postgres(f"{bindir}/initdb", "-D", str(data), "-A", "trust", "-U", "pitwall")
    if res.returncode != 0:
        pytest.skip(f"initdb failed: {res.stderr.strip()[:200]}")
    res = _as_postgres(
        f"{bindir}/pg_ctl", "-D", str(data), "-w", "-l", str(root / "log"),
        "-o", f"-k {sock} -c listen_addresses='' -c fsync=off", "start",
    )
    if res.returncode != 0:
        pytest.skip(f"pg_ctl start failed: {res.stderr.strip()[:200]}")
    try:
        yield f"postgresql+psycopg://pitwall@/postgres?host={sock}"
    finally:
        _as_postgres(f"{bindir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


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
    ok, _ = repo.acquire_lease(engine, holder="h:1", pid=1, host="h", ttl_s=15)
    assert ok
    with engine.begin() as conn:
        repo.save_state(conn, key="k", value={"offset": 5})
    assert repo.load_state(engine, key="k") == {"offset": 5}
    assert repo.table_counts(engine)["sample"] == 3000
    engine.dispose()
    time.sleep(0)  # keep the engine disposed before the cluster stops
