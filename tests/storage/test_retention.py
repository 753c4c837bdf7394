"""Retention (storage/repo/retention.py): exactly what the policy says leaves, nothing else, in
batches; a new SQLite file shrinks afterwards; the same on a real PostgreSQL (fixture pg_url)."""

from __future__ import annotations

import pytest
from sqlalchemy import event, insert, text

from storage import models, repo
from storage.db import incremental_vacuum, make_engine

T = 1_800_000_000.0  # "now": a whole quarter hour (1.8e9 / 900 = 2,000,000)
D = 86_400.0
POLICY = {"samples_days": 1, "rollups_days": 2, "quarters_days": 3, "probes_days": 4, "events_days": 5}


def _agg(ts: float, sid: int, metric: str) -> dict:
    return {"ts": ts, "server_id": sid, "metric": metric, "count": 1, "avg": 1.0, "min": 1.0, "max": 1.0}


def _seed(engine) -> None:  # type: ignore[no-untyped-def]
    """Rows on both sides of each cutoff. Expected removals (plan and pass):

    sample (cutoff T-1D, lowered per series to newest rollup minute + 60):
      s1 'm': T-D-120, T-D-60 | T-D+60, T-10      newest rollup T-120 -> cutoff T-D    -> 2 go
      s2 'm': T-D-600 | T-D-300, T-D-30          newest rollup T-D-360 -> T-D-300     -> 1 goes
      s3 'x': T-2D                               no rollup at all -> kept              -> 0
      8 rows, 3 go
    rollup (cutoff T-2D, lowered to newest quarter + 900):
      s1: T-2D-120, T-2D-60 | T-120              newest quarter T-1800 -> T-2D         -> 2 go
      s2: T-3D | T-D-360                         newest quarter T-3D-900 -> T-3D       -> 0 (T-3D is not < T-3D)
      5 rows, 2 go
    rollup_quarter (cutoff T-3D): s1 T-4D | T-1800; s2 T-3D-900 -> 3 rows, 2 go
    event (cutoff T-5D): T-6D (no server), T-5D-1 | T-5D+1, T      -> 4 rows, 2 go
    proberun (cutoff T-4D by created_at): A T-4D-10 (3 requests) | B T-1 (2 requests)
      proberun 2 rows, 1 goes; proberequest 5 rows, 3 go
    """
    s = [(T - D - 120, 1, "m"), (T - D - 60, 1, "m"), (T - D + 60, 1, "m"), (T - 10, 1, "m"),
         (T - D - 600, 2, "m"), (T - D - 300, 2, "m"), (T - D - 30, 2, "m"), (T - 2 * D, 3, "x")]
    r = [(T - 2 * D - 120, 1, "m"), (T - 2 * D - 60, 1, "m"), (T - 120, 1, "m"), (T - 3 * D, 2, "m"),
         (T - D - 360, 2, "m")]
    q = [(T - 4 * D, 1, "m"), (T - 1800, 1, "m"), (T - 3 * D - 900, 2, "m")]
    with engine.begin() as conn:
        conn.execute(insert(models.Sample.__table__),
                     [{"ts": ts, "server_id": sid, "metric": m, "source": "log", "value": 1.0} for ts, sid, m in s])
        conn.execute(insert(models.Rollup.__table__), [_agg(*x) for x in r])
        conn.execute(insert(models.RollupQuarter.__table__), [_agg(*x) for x in q])
        conn.execute(insert(models.Event.__table__),
                     [{"ts": ts, "server_id": sid, "kind": "k", "severity": "info", "message": ""}
                      for ts, sid in ((T - 6 * D, None), (T - 5 * D - 1, 1), (T - 5 * D + 1, 1), (T, 1))])
        for created, n in ((T - 4 * D - 10, 3), (T - 1, 2)):
            run_id = conn.execute(insert(models.ProbeRun.__table__).values(
                url="http://x", api="openai", created_at=created)).inserted_primary_key[0]
            conn.execute(insert(models.ProbeRequest.__table__),
                         [{"run_id": run_id, "level": 1.0, "seq": i} for i in range(n)])


EXPECTED = {"sample": (8, 3), "rollup": (5, 2), "rollup_quarter": (3, 2), "event": (4, 2),
            "proberequest": (5, 3), "proberun": (2, 1)}


def _counts(engine) -> dict[str, int]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar()) for t in EXPECTED}


def _check_policy(engine) -> None:  # type: ignore[no-untyped-def]
    _seed(engine)
    plan = {p["table"]: p for p in repo.retention_plan(engine, policy=POLICY, now=T)}
    assert {t: (p["rows"], p["to_remove"]) for t, p in plan.items()} == EXPECTED
    assert plan["sample"]["oldest"] == T - 2 * D and plan["sample"]["cutoff"] == T - D
    assert plan["proberequest"]["oldest"] == T - 4 * D - 10
    deleted = repo.apply_retention(engine, policy=POLICY, now=T, batch_rows=2)
    assert deleted == {t: gone for t, (_, gone) in EXPECTED.items()}
    assert _counts(engine) == {t: rows - gone for t, (rows, gone) in EXPECTED.items()}
    with engine.connect() as conn:
        kept = sorted(float(x) for x in conn.execute(text("SELECT ts FROM sample")).scalars())
    assert kept == sorted([T - D + 60, T - 10, T - D - 300, T - D - 30, T - 2 * D])
    assert all(p["to_remove"] == 0 for p in repo.retention_plan(engine, policy=POLICY, now=T))
    # 0 keeps forever: nothing planned, nothing deleted
    forever = dict.fromkeys(POLICY, 0)
    assert all(p["to_remove"] == 0 and p["cutoff"] is None
               for p in repo.retention_plan(engine, policy=forever, now=T + 100 * D))
    assert not any(repo.apply_retention(engine, policy=forever, now=T + 100 * D).values())


def test_retention_removes_exactly_the_policy_on_sqlite(tmp_path):
    _check_policy(make_engine(f"sqlite:///{tmp_path / 'r.db'}"))


@pytest.mark.integration
def test_retention_removes_exactly_the_policy_on_postgres(pg_url):
    _check_policy(make_engine(pg_url))
    sizes = repo.table_sizes(make_engine(pg_url), ["sample"])
    assert sizes["sample"] is not None and sizes["sample"] > 0


def _deletes(engine) -> list[str]:  # type: ignore[no-untyped-def]
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute",
                 lambda _c, _cur, stmt, *_a: seen.append(stmt) if stmt.lstrip().upper().startswith("DELETE") else None)
    return seen


def test_runner_pass_deletes_in_batches(tmp_path):
    """35 old samples, batches of 10: 10 + 10 + 10 + 5 = 4 DELETE statements, one transaction each."""
    from runner.loop import Runner

    engine = make_engine(f"sqlite:///{tmp_path / 'b.db'}")
    with engine.begin() as conn:
        conn.execute(insert(models.Sample.__table__),
                     [{"ts": T - 2 * D + i, "server_id": 1, "metric": "m", "source": "log", "value": 1.0}
                      for i in range(35)])
        conn.execute(insert(models.Rollup.__table__), [_agg(T - 60, 1, "m")])
    seen = _deletes(engine)
    runner = Runner(engine, [], retention={"samples_days": 1}, retention_batch_rows=10, retention_batches=50)
    try:
        assert runner.retain(T) == {"sample": 35, "rollup": 0, "rollup_quarter": 0, "event": 0,
                                    "proberequest": 0, "proberun": 0}
    finally:
        runner._pool.shutdown()
    assert len(seen) == 4
    # a pass with a budget of 2 batches stops after 20 rows; the next pass carries on
    with engine.begin() as conn:
        conn.execute(insert(models.Sample.__table__),
                     [{"ts": T - 2 * D + i, "server_id": 1, "metric": "m", "source": "log", "value": 1.0}
                      for i in range(35)])
    assert repo.apply_retention(engine, policy={"samples_days": 1}, now=T, batch_rows=10, max_batches=2)["sample"] == 20
    assert repo.retention_plan(engine, policy={"samples_days": 1}, now=T)[0]["to_remove"] == 15


def test_new_sqlite_file_shrinks_after_retention(tmp_path):
    path = tmp_path / "v.db"
    engine = make_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() == 2  # INCREMENTAL, set on creation
    with engine.begin() as conn:
        conn.execute(insert(models.Sample.__table__),
                     [{"ts": T - 2 * D + i, "server_id": 1, "metric": "m" * 40, "source": "log", "value": float(i)}
                      for i in range(50_000)])
        conn.execute(insert(models.Rollup.__table__), [_agg(T - 60, 1, "m" * 40)])
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    full = path.stat().st_size
    assert repo.apply_retention(engine, policy={"samples_days": 1}, now=T, max_batches=100)["sample"] == 50_000
    assert incremental_vacuum(engine, pages_per_step=100, max_steps=1000) == 0
    assert path.stat().st_size < full / 4, (full, path.stat().st_size)
    assert repo.table_sizes(engine, ["sample"])["sample"] in (None, *range(0, full // 4))
