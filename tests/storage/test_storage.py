"""Storage: schema, pragmas, versioning, batched writes, bucketed reads, rollups, intents, lease."""

from __future__ import annotations

import sqlite3
import time

import numpy as np
import pytest
import sqlalchemy
from sqlalchemy import text

from storage import repo
from storage.db import SchemaError, make_engine
from storage.models import SCHEMA_VERSION


def _rows(server_id: int, metric: str, values, t0: float) -> list[dict]:
    return [
        {"ts": t0 + i, "server_id": server_id, "launch_id": None, "source": "log", "metric": metric, "value": float(v)}
        for i, v in enumerate(values)
    ]


def test_sqlite_pragmas_are_wal_normal_with_busy_timeout(engine):
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA synchronous")).scalar() == 1  # NORMAL
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 10_000


def test_sample_index_exists(engine):
    with engine.connect() as conn:
        cols = [r[2] for r in conn.execute(text("PRAGMA index_info('ix_sample_server_metric_ts')"))]
    assert cols == ["server_id", "metric", "ts"]


def test_schema_version_is_stamped_and_newer_database_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    make_engine(url).dispose()
    con = sqlite3.connect(tmp_path / "a.db")
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with pytest.raises(SchemaError, match="newer than this Pitwall"):
        make_engine(url)


def test_foreign_database_is_refused_not_modified(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE things (x INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(SchemaError, match="not made by Pitwall"):
        make_engine(f"sqlite:///{path}")
    con = sqlite3.connect(path)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"things"}


def test_batched_insert_and_exact_percentiles(engine):
    srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1")
    # values 1..100 -> numpy linear percentiles: p50 = 50.5, p99 = 99.01
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=_rows(srv.id, "probe.ttft_s", range(1, 101), 1000.0))
    vals = repo.sample_values(engine, server_id=srv.id, metric="probe.ttft_s", since=0)
    assert vals.size == 100
    assert np.percentile(vals, 50) == pytest.approx(50.5)
    assert np.percentile(vals, 99) == pytest.approx(99.01)
    # the window is half-open: [1010, 1020) holds values 11..20
    win = repo.sample_values(engine, server_id=srv.id, metric="probe.ttft_s", since=1010, until=1020)
    assert sorted(win.tolist()) == [float(v) for v in range(11, 21)]


def test_bucketed_series_caps_points_and_averages(engine):
    srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1")
    # 3,000 one-second samples, value = i; max_points 150 -> 20-s buckets; first bucket avg of 0..19 = 9.5
    t0 = 1_800_000_000.0  # a multiple of 20, so buckets align with the data
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=_rows(srv.id, "m", range(3000), t0))
    df = repo.bucketed_series(engine, server_id=srv.id, metrics=["m"], since=t0, until=t0 + 3000, max_points=150)
    assert len(df) == 150
    first = df.iloc[0]
    assert first["avg"] == pytest.approx(9.5)
    assert (first["min"], first["max"]) == (0.0, 19.0)
    # 30-s buckets and more are widened to whole minutes (read from Rollup once rolled up)
    wide = repo.bucketed_series(engine, server_id=srv.id, metrics=["m"], since=t0, until=t0 + 3000, max_points=100)
    assert len(wide) == 50 and wide.iloc[0]["avg"] == pytest.approx(29.5)


def test_rollups_are_exact_per_minute_and_idempotent(engine):
    srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1")
    t0 = 1_800_000_000.0 - (1_800_000_000 % 60)  # start of a minute
    # minute 0 holds 0..59 (p50 = 29.5), minute 1 holds 60..119
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=_rows(srv.id, "m", range(120), t0))
    n = repo.compute_rollups(engine, until=t0 + 120, lookback_s=600)
    assert n == 2
    assert repo.compute_rollups(engine, until=t0 + 120, lookback_s=600) == 0
    df = repo.bucketed_series(engine, server_id=srv.id, metrics=["m"], since=t0, until=t0 + 120 * 60 * 24, max_points=100)
    # the window is long enough that buckets are >= 60 s and come from Rollup
    assert df["avg"].iloc[0] == pytest.approx(59.5)  # both minutes fall in one bucket: mean of 0..119


def test_quarter_rollups_aggregate_their_minutes_and_are_idempotent(engine):
    srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1")
    t0 = 1_800_000_000.0  # a multiple of 900: the start of a quarter hour
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=_rows(srv.id, "m", range(2000), t0))
    # minutes 0..32 are complete at t0 + 1980; quarters 0 and 1 are complete, quarter 2 is not
    assert repo.compute_rollups(engine, until=t0 + 1985, lookback_s=3600) == 33 + 2
    assert repo.compute_rollups(engine, until=t0 + 1985, lookback_s=3600) == 0
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT ts, count, avg, min, max FROM rollup_quarter ORDER BY ts")).all()
    assert [tuple(r) for r in rows] == [(t0, 900, pytest.approx(449.5), 0.0, 899.0),
                                        (t0 + 900, 900, pytest.approx(1349.5), 900.0, 1799.0)]


def test_long_windows_read_quarters_minutes_and_samples_without_gaps(tmp_path):
    """A 15-minute-bucket read stitches RollupQuarter, Rollup and Sample (head and tail) and
    gives the same avg/min/max as reading the raw samples of each bucket."""
    t0 = 1_800_000_000.0
    rng = np.random.default_rng(3)
    values = rng.normal(10.0, 3.0, 3 * 3600 + 437)  # 3 h 7 min 17 s of 1-s samples
    since, until = t0 + 100.0, t0 + values.size  # neither end on a minute or quarter boundary
    got = {}
    for name, rolled_until in (("tiers", t0 + 3 * 3600 + 5 * 60 + 7), ("raw", None)):
        engine = make_engine(f"sqlite:///{tmp_path / name}.db")
        srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1")
        with engine.begin() as conn:
            repo.insert_samples(conn, rows=_rows(srv.id, "m", values, t0))
        if rolled_until is not None:  # quarters up to 3 h, minutes up to 3 h 5 min, raw after
            assert repo.compute_rollups(engine, until=rolled_until, lookback_s=4 * 3600) == 185 + 12
        got[name] = repo.bucketed_series(engine, server_id=srv.id, metrics=["m"], since=since,
                                         until=until, max_points=13)  # 862-s buckets -> 900
        engine.dispose()
    df = got["tiers"]
    assert len(df) == 13 and (df["ts"].diff().dropna() == 900.0).all()
    for _, row in df.iterrows():
        lo, hi = max(row["ts"], since), min(row["ts"] + 900.0, until)
        part = values[int(lo - t0): int(hi - t0)]
        assert row["avg"] == pytest.approx(part.mean()) and (row["min"], row["max"]) == (part.min(), part.max())
    assert df["avg"].to_numpy() == pytest.approx(got["raw"]["avg"].to_numpy())


def test_claim_intent_is_exclusive(engine):
    srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1")
    repo.create_intent(engine, kind="relaunch", server_id=srv.id, payload={"profile": "x"})
    first = repo.claim_next_intent(engine)
    second = repo.claim_next_intent(engine)
    assert first is not None and first.state == "running"
    assert second is None


def test_lease_is_single_holder_until_stale(engine):
    scope = repo.host_scope("h")
    ok, _ = repo.acquire_lease(engine, scope=scope, holder="h:1", pid=1, host="h", ttl_s=15, now=100.0)
    assert ok
    ok2, holder = repo.acquire_lease(engine, scope=scope, holder="h:2", pid=2, host="h", ttl_s=15, now=105.0)
    assert not ok2 and holder is not None and holder.holder == "h:1"
    ok3, _ = repo.acquire_lease(engine, scope=scope, holder="h:2", pid=2, host="h", ttl_s=15, now=116.0)
    assert ok3
    assert not repo.renew_lease(engine, scope=scope, holder="h:1")


def test_state_round_trip(engine):
    with engine.begin() as conn:
        repo.save_state(conn, key="k", value={"offset": 10})
    with engine.begin() as conn:
        repo.save_state(conn, key="k", value={"offset": 20})
    assert repo.load_state(engine, key="k") == {"offset": 20}
    assert repo.load_state(engine, key="missing") is None


def test_events_count_by_kind(engine):
    now = time.time()
    for kind in ("oom", "oom", "crash"):
        repo.add_event(engine, kind=kind, message="m", server_id=1, ts=now)
    assert repo.count_events(engine, server_id=1, since=now - 1) == {"oom": 2, "crash": 1}


def test_v1_database_is_upgraded_in_place(tmp_path):
    """A schema-1 file (no server.retired_at) is upgraded, keeping its rows."""
    path = tmp_path / "v1.db"
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    repo.upsert_server(engine, name="old", base_url="http://127.0.0.1:1")
    engine.dispose()
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE server DROP COLUMN retired_at")
    con.execute("DROP TABLE rollup_quarter")
    con.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    con.commit()
    con.close()
    engine = make_engine(url)
    assert [s.name for s in repo.list_servers(engine)] == ["old"]
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert "retired_at" in [r[1] for r in con.execute("PRAGMA table_info(server)")]
    con.close()


def test_v2_database_gets_quarter_rollups_from_its_minute_history(tmp_path):
    """v2 -> v3 creates RollupQuarter and fills it from the Rollup minutes of complete quarters."""
    path = tmp_path / "v2.db"
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    srv = repo.upsert_server(engine, name="old", base_url="http://127.0.0.1:1")
    t0 = 1_800_000_000.0
    with engine.begin() as conn:  # 40 minutes, value = minute index
        repo.insert_rollups(conn, rows=[
            {"ts": t0 + 60 * i, "server_id": srv.id, "metric": "m", "count": 60, "avg": float(i),
             "min": float(i), "max": float(i)} for i in range(40)])
    engine.dispose()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE rollup_quarter")
    con.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    con.commit()
    con.close()
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT ts, count, avg, min, max FROM rollup_quarter ORDER BY ts")).all()
    # two complete quarters (minutes 0-14 and 15-29); minutes 30-39 wait for the runner
    assert [tuple(r) for r in rows] == [(t0, 900, 7.0, 0.0, 14.0), (t0 + 900, 900, 22.0, 15.0, 29.0)]
    engine.dispose()


def test_servers_that_leave_the_configuration_are_retired_not_deleted(engine):
    repo.upsert_server(engine, name="demo", base_url="http://127.0.0.1:1", managed=True)
    repo.upsert_server(engine, name="prod", base_url="http://127.0.0.1:2")
    assert repo.retire_servers_except(engine, names=["prod"]) == ["demo"]
    assert [s.name for s in repo.list_servers(engine)] == ["prod"]
    assert [s.name for s in repo.list_servers(engine, include_retired=True)] == ["demo", "prod"]
    repo.upsert_server(engine, name="demo", base_url="http://127.0.0.1:1")  # configured again
    assert [s.name for s in repo.list_servers(engine)] == ["demo", "prod"]


@pytest.mark.slow
def test_two_processes_upgrading_one_file_at_once_both_open_it(tmp_path):
    """`pitwall up` opens the database from the runner and the dashboard together: an old file
    is upgraded once, and the process that lost the race opens the upgraded file."""
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "v2.db"
    engine = make_engine(f"sqlite:///{path}")
    srv = repo.upsert_server(engine, name="old", base_url="http://127.0.0.1:1")
    t0 = 1_800_000_000.0
    with engine.begin() as conn:  # 60 series x 7 days of minutes: the backfill takes a while
        repo.insert_rollups(conn, rows=[
            {"ts": t0 + 60 * i, "server_id": srv.id, "metric": f"m{k}", "count": 60, "avg": 1.0,
             "min": 1.0, "max": 1.0} for k in range(60) for i in range(7 * 1440)])
    engine.dispose()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE rollup_quarter")
    con.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    con.commit()
    con.close()
    root = Path(__file__).resolve().parents[2]
    code = f"from storage.db import make_engine; make_engine({f'sqlite:///{path}'!r}); print('ok')"
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=root, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM rollup_quarter").fetchone()[0] == 60 * 7 * 96
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    con.close()


def test_v3_database_gets_lease_generation_and_stop_memory(tmp_path):
    """v3 -> v4 adds RunnerLease.generation and Server.stopped_by/stopped_at, keeping rows (v7
    then replaces RunnerLease by the per-scope Lease)."""
    path = tmp_path / "v3.db"
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    repo.upsert_server(engine, name="old", base_url="http://127.0.0.1:1")
    engine.dispose()
    con = sqlite3.connect(path)
    for table, column in (("server", "stopped_by"), ("server", "stopped_at")):
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    # the v3 single-row lease, as v3 made it (v7 drops it for the per-scope Lease)
    con.execute("CREATE TABLE runnerlease (id INTEGER PRIMARY KEY, holder VARCHAR NOT NULL, pid INTEGER NOT NULL, "
                "host VARCHAR NOT NULL, started_at FLOAT NOT NULL, heartbeat_at FLOAT NOT NULL)")
    con.execute("INSERT INTO runnerlease VALUES (1, 'old:1', 1, 'old', 0, 0)")
    con.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    con.commit()
    con.close()
    engine = make_engine(url)
    assert "runnerlease" not in sqlalchemy.inspect(engine).get_table_names()
    [srv] = repo.list_servers(engine)
    assert srv.name == "old" and srv.stopped_by is None
    ok, lease = repo.acquire_lease(engine, scope=repo.DB_SCOPE, holder="a", pid=1, host="h", ttl_s=15)
    assert ok and lease is not None and lease.generation == 1


def test_v4_database_gets_probe_request_detail(tmp_path):
    """v4 -> v5 adds ProbeRequest.detail, keeping the requests already stored."""
    path = tmp_path / "v4.db"
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    run_id = repo.create_probe_run(engine, url="http://127.0.0.1:1", api="images").id
    with engine.begin() as conn:
        repo.insert_probe_requests(conn, rows=[{"run_id": run_id, "level": 1, "ok": True, "e2e_s": 1.5}])
    engine.dispose()
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE proberequest DROP COLUMN detail")
    con.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    con.commit()
    con.close()
    engine = make_engine(url)
    df = repo.probe_requests(engine, run_id=run_id)
    assert list(df["e2e_s"]) == [1.5] and df["detail"].isna().all()
    with engine.begin() as conn:
        repo.insert_probe_requests(conn, rows=[{"run_id": run_id, "level": 1, "ok": True,
                                                "detail": {"peak_memory_mb": 61234.0}}])
    df = repo.probe_requests(engine, run_id=run_id)
    assert df["detail"].iloc[1] == {"peak_memory_mb": 61234.0}


def test_v7_database_keeps_each_launch_version_as_engine_version(tmp_path):
    """v7 -> v8: Launch's engine-named version column becomes Launch.engine_version, values copied."""
    path = tmp_path / "v7.db"
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    srv = repo.upsert_server(engine, name="old", base_url="http://127.0.0.1:1")
    launch = repo.create_launch(engine, server_id=srv.id, profile_name="p", engine_version="0.5.23")
    engine.dispose()
    con = sqlite3.connect(path)  # the v7 shape: the version under its old column name
    con.execute("ALTER TABLE launch RENAME COLUMN engine_version TO sglang_version")
    con.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
    con.commit()
    con.close()
    engine = make_engine(url)
    got = repo.get_launch(engine, launch_id=launch.id)
    assert got is not None and got.engine_version == "0.5.23"
    engine.dispose()
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert "sglang_version" not in [r[1] for r in con.execute("PRAGMA table_info(launch)")]
    con.close()
