"""No row blinds the writer: a server whose counters read +Inf makes a rate NaN, SQLite stores
it as NULL, and unchecked, `sample.value NOT NULL` would fail the whole batch and the writer
retry it forever, so every other server would lose its samples, events and saved state.

Here one flush carries a bad server's rows (NaN, +Inf, a string, None, an unknown event kind, a
state with NaN) beside a healthy server's: the healthy rows, event and state land in that same
flush; each (server, reason) leaves ONE collector_error event, written on its own and only once
per episode. A row the checks cannot foresee (a trigger that refuses it) is found by halving
under savepoints. Both on a real SQLite file and on the suite's real PostgreSQL (tests/pg.py).
"""

from __future__ import annotations

import pytest
from pg import pg_url  # noqa: F401  (a fixture: a throwaway PostgreSQL cluster)
from sqlalchemy import text

from collectors.base import EventRow, SampleRow
from runner.writer import Batch, BatchWriter
from storage import repo
from storage.db import make_engine

T0 = 1_800_000_000.0


def _engines(request, tmp_path):  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        return make_engine(f"sqlite:///{tmp_path / 'pitwall.db'}")
    url = request.getfixturevalue("pg_url")
    eng = make_engine(url)
    with eng.begin() as conn:  # the cluster is shared by this module: start from empty tables
        conn.execute(text("TRUNCATE sample, event, collectorstate, server RESTART IDENTITY CASCADE"))
    return eng


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def db(request, tmp_path):
    eng = _engines(request, tmp_path)
    yield eng
    eng.dispose()


def _servers(engine):  # type: ignore[no-untyped-def]
    good = repo.upsert_server(engine, name="healthy", base_url="http://127.0.0.1:1")
    bad = repo.upsert_server(engine, name="hostile", base_url="http://127.0.0.1:2")
    return good.id, bad.id


def _poll(good: int, bad: int, t: float) -> list[Batch]:
    healthy = Batch(
        samples=[SampleRow(t + i, good, "metrics.gen_throughput", 100.0 + i, "metrics") for i in range(5)],
        events=[EventRow(t, good, "health_up", "healthy is up", "info")],
        states={f"metrics:{good}:counters": {"total": 5.0}},
    )
    hostile = Batch(
        samples=[
            SampleRow(t, bad, "metrics.gen_throughput", float("nan"), "metrics"),  # Inf - Inf
            SampleRow(t, bad, "metrics.requests_per_s", float("inf"), "metrics"),
            SampleRow(t, bad, "gpu.0.power_w", "Error: no value", "gpu"),  # type: ignore[arg-type]
            SampleRow(t, bad, "api.x", None, "api"),  # type: ignore[arg-type]
            SampleRow(t, bad, "metrics.num_running_reqs", 3.0, "metrics"),  # a good row of the bad server
        ],
        events=[EventRow(t, bad, "no_such_kind", "?", "warning")],
        states={f"metrics:{bad}:counters": {"total": float("inf")}},
    )
    return [hostile, healthy]


def _aside_events(engine):  # type: ignore[no-untyped-def]
    ev = repo.list_events(engine, kinds=["collector_error"])
    return ev[ev["message"].str.startswith("Set aside")]


def test_a_bad_servers_rows_are_set_aside_and_the_healthy_server_loses_nothing(db):
    good, bad = _servers(db)
    w = BatchWriter(db)
    for b in _poll(good, bad, T0):
        w.put(b)
    written = w.flush()
    assert w.write_failures == 0
    # the healthy server's rows, event and state landed in this very flush
    assert repo.sample_values(db, server_id=good, metric="metrics.gen_throughput", since=0).tolist() == [
        100.0, 101.0, 102.0, 103.0, 104.0]
    assert list(repo.list_events(db, server_id=good)["kind"]) == ["health_up"]
    assert repo.load_state(db, key=f"metrics:{good}:counters") == {"total": 5.0}
    # the hostile server's good row too; its bad rows and its bad state are not stored
    assert repo.sample_values(db, server_id=bad, metric="metrics.num_running_reqs", since=0).tolist() == [3.0]
    assert repo.sample_values(db, server_id=bad, metric="metrics.gen_throughput", since=0).size == 0
    assert repo.load_state(db, key=f"metrics:{bad}:counters") is None
    # one event per (server, reason): NaN/Inf, not a number, empty field, unknown kind, bad state
    aside = _aside_events(db)
    assert len(aside) == 5 and set(aside["server_id"]) == {bad}
    assert written == 5 + 1 + 1 + len(aside)
    by_reason = " | ".join(aside["message"])
    assert "server 'hostile'" in by_reason
    nan = aside[aside["message"].str.contains("NaN or infinite")].iloc[0]
    assert "Set aside 2 rows" in nan["message"]
    assert "metrics.gen_throughput" in nan["message"] and "metrics.requests_per_s" in nan["message"]
    assert "nan" in nan["raw"] and "inf" in nan["raw"]
    assert "event kind" in by_reason and "not a number" in by_reason and "collector state" in by_reason

    # the next polls bring the same bad rows: rows land, no second event (one per episode)
    for k in range(1, 4):
        for b in _poll(good, bad, T0 + 10 * k):
            w.put(b)
        w.flush()
    assert len(_aside_events(db)) == 5
    assert repo.sample_values(db, server_id=good, metric="metrics.gen_throughput", since=0).size == 20
    assert w.rows_set_aside == 4 * 6  # 4 samples, 1 event, 1 state a poll


def _refuse_poison(engine) -> None:  # type: ignore[no-untyped-def]
    """A trigger that refuses one metric: a row the writer's checks cannot foresee."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(text("CREATE TRIGGER poison BEFORE INSERT ON sample WHEN NEW.metric = 'poison' "
                              "BEGIN SELECT RAISE(ABORT, 'poison refused'); END"))
        else:
            conn.execute(text(
                "CREATE OR REPLACE FUNCTION poison() RETURNS trigger AS $$ BEGIN "
                "IF NEW.metric = 'poison' THEN RAISE EXCEPTION 'poison refused' USING ERRCODE = 'check_violation'; "
                "END IF; RETURN NEW; END $$ LANGUAGE plpgsql"))
            conn.execute(text("DROP TRIGGER IF EXISTS poison ON sample"))
            conn.execute(text("CREATE TRIGGER poison BEFORE INSERT ON sample FOR EACH ROW EXECUTE FUNCTION poison()"))


def test_a_row_the_database_refuses_is_isolated_and_the_rest_lands_in_the_same_flush(db):
    good, bad = _servers(db)
    _refuse_poison(db)
    w = BatchWriter(db)
    samples = [SampleRow(T0 + i, good, "metrics.x", float(i), "metrics") for i in range(100)]
    samples.insert(37, SampleRow(T0, bad, "poison", 1.0, "metrics"))
    w.put(Batch(samples=samples, events=[EventRow(T0, good, "health_up", "up", "info")],
                states={"log:1:offset": {"offset": 42}}))
    try:
        w.flush()
        assert w.write_failures == 0
        assert repo.sample_values(db, server_id=good, metric="metrics.x", since=0).size == 100
        assert repo.load_state(db, key="log:1:offset") == {"offset": 42}
        assert len(repo.list_events(db, kinds=["health_up"])) == 1
        aside = _aside_events(db)
        assert len(aside) == 1 and aside.iloc[0]["server_id"] == bad
        assert "database refused the row" in aside.iloc[0]["message"] and "poison" in aside.iloc[0]["message"]
    finally:
        with db.begin() as conn:
            conn.execute(text("DROP TRIGGER IF EXISTS poison" + (" ON sample" if db.dialect.name != "sqlite" else "")))


def test_a_database_failure_still_keeps_the_batch_and_the_aside_event_waits_for_it(tmp_path, monkeypatch):
    import runner.writer as writer_mod

    eng = make_engine(f"sqlite:///{tmp_path / 'pitwall.db'}")
    good, bad = _servers(eng)
    w = BatchWriter(eng)
    orig = writer_mod.repo.insert_sample_tuples

    def locked(conn, *, rows):  # type: ignore[no-untyped-def]
        raise RuntimeError("database is locked")

    monkeypatch.setattr(writer_mod.repo, "insert_sample_tuples", locked)
    for b in _poll(good, bad, T0):
        w.put(b)
    assert w.flush() == 0 and w.write_failures == 1
    assert len(repo.list_events(eng)) == 0
    monkeypatch.setattr(writer_mod.repo, "insert_sample_tuples", orig)
    w.flush()  # the kept batch lands, and the events about the rows set aside after it
    assert repo.sample_values(eng, server_id=good, metric="metrics.gen_throughput", since=0).size == 5
    assert len(_aside_events(eng)) == 5
    eng.dispose()


def test_text_a_database_cannot_hold_is_set_aside_in_keys_and_cleaned_in_events(db):
    import numpy as np

    good, bad = _servers(db)
    w = BatchWriter(db)
    w.put(Batch(
        samples=[
            SampleRow(T0, bad, "metrics.a\x00b", 1.0, "metrics"),  # PostgreSQL refuses NUL
            SampleRow(T0, bad, "metrics." + "x" * 5000, 1.0, "metrics"),  # over-long key
            SampleRow(T0, bad, "metrics.\udc80", 1.0, "metrics"),  # a lone surrogate: not UTF-8
            SampleRow(T0, bad, "metrics.big", 10**400, "metrics"),  # no float holds it
            SampleRow(T0, 2**40, "metrics.id", 1.0, "metrics"),  # past PostgreSQL's INTEGER
            SampleRow(T0, good, "metrics.f32", np.float32(0.5), "metrics"),  # type: ignore[arg-type]
        ],
        events=[EventRow(T0, good, "crash", "bad\x00byte \udc80 " + "y" * 10_000, "critical", raw="r\x00")],
        states={"log:7:offset": {(1, 2): 3}},  # type: ignore[dict-item]
    ))
    w.flush()
    assert w.write_failures == 0
    assert repo.sample_values(db, server_id=good, metric="metrics.f32", since=0).tolist() == [0.5]
    crash = repo.list_events(db, kinds=["crash"])
    assert len(crash) == 1
    msg = crash.iloc[0]["message"]
    assert "\x00" not in msg and msg.startswith("bad\ufffdbyte") and msg.endswith("[cut]") and len(msg) == 4000
    assert w.rows_set_aside == 6
    assert repo.load_state(db, key="log:7:offset") is None
    aside = _aside_events(db)
    assert set(aside["server_id"].dropna()) == {bad, 7}
