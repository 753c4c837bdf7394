"""The runner rolls up what it flushed: minutes and quarter hours, each once, reading only new samples."""

from __future__ import annotations

from sqlalchemy import text

from runner import loop as runner_mod
from runner.loop import Runner
from storage import repo


def test_runner_rolls_up_each_minute_and_quarter_once(engine, monkeypatch):
    srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1")
    t0 = 1_800_000_000.0  # the start of a quarter hour
    clock = {"now": t0 + 600.0}
    monkeypatch.setattr(runner_mod.time, "time", lambda: clock["now"])

    def write(a: float, b: float, metric: str = "m") -> None:
        with engine.begin() as conn:
            repo.insert_sample_tuples(conn, rows=[(t0 + i, srv.id, None, "log", metric, float(i)) for i in range(int(a), int(b))])

    runner = Runner(engine, [])
    write(0, 600)
    write(0, 300, metric="x")  # a series that stops early in the quarter (its server went down)
    runner._roll_up()  # first call: looks back an hour; minutes 0-9 are complete
    write(600, 1000)
    clock["now"] = t0 + 1000.0
    runner._roll_up()  # later calls read only what came since: minutes 10-15 and quarter 0
    clock["now"] = t0 + 1000.0 + 3 * 3600  # a long pause: nothing is redone, and the minute and
    runner._roll_up()                        # quarter still open at the pause are closed now
    with engine.connect() as conn:
        minutes = [r[0] for r in conn.execute(text("SELECT ts FROM rollup WHERE metric = 'm' ORDER BY ts"))]
        quarters = conn.execute(text("SELECT metric, ts, count, avg FROM rollup_quarter ORDER BY metric, ts")).all()
    # minutes 0-15 and minute 16 (samples 960-999, complete once the pause passed it)
    assert minutes == [t0 + 60 * i for i in range(17)]
    # x had no samples in the second call's few minutes, and still gets its quarter when it ends;
    # m's second quarter holds samples 900-999: 100 values, mean 949.5
    assert [tuple(q) for q in quarters] == [("m", t0, 900, 449.5), ("m", t0 + 900, 100, 949.5),
                                            ("x", t0, 300, 149.5)]
    assert runner._rolled_until == clock["now"] - runner_mod.ROLLUP_LAG_S
