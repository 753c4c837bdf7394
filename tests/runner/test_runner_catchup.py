"""Catch-up: a runner restarted after three hours fills every minute and quarter
rollup of the gap that has raw data, oldest first, each exactly once."""

from __future__ import annotations

from sqlalchemy import text

from runner import loop as runner_mod
from runner.loop import Runner
from storage import repo


def test_a_runner_down_for_three_hours_catches_up_every_minute_and_quarter_once(engine, monkeypatch):
    srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1")
    t0 = 1_800_000_000.0  # the start of a quarter hour
    clock = {"now": t0}
    monkeypatch.setattr(runner_mod.time, "time", lambda: clock["now"])

    def write(a: int, b: int, step: int = 10) -> None:  # one sample every 10 s of series "m"
        with engine.begin() as conn:
            repo.insert_sample_tuples(conn, rows=[(t0 + i, srv.id, None, "log", "m", 1.0) for i in range(a, b, step)])

    first = Runner(engine, [])
    write(0, 1800)  # 30 minutes while the first runner runs
    clock["now"] = t0 + 1800 + runner_mod.ROLLUP_LAG_S
    first._roll_up()
    # the first runner stops. Three hours later a new one starts; the samples of the gap reach
    # storage too (the log tailer reads on from its saved offset), and the new runner catches up
    gap_end = 1800 + 3 * 3600
    write(1800, gap_end + 600)
    clock["now"] = t0 + gap_end + 600 + runner_mod.ROLLUP_LAG_S
    monkeypatch.setattr(runner_mod, "CATCHUP_SLICES_PER_PASS", 1)  # one hour of raw data per pass
    second = Runner(engine, [])
    passes = 0
    while True:
        second._roll_up()
        passes += 1
        if not second.catching_up:
            break
    second._roll_up()  # one more pass: nothing new, nothing doubled
    end = gap_end + 600  # every minute before it is complete
    with engine.connect() as conn:
        minutes = [r[0] for r in conn.execute(text("SELECT ts FROM rollup ORDER BY ts"))]
        counts = {r[0] for r in conn.execute(text("SELECT count FROM rollup"))}
        quarters = conn.execute(text("SELECT ts, count FROM rollup_quarter ORDER BY ts")).all()
        dup_m = conn.execute(text("SELECT ts FROM rollup GROUP BY server_id, metric, ts HAVING COUNT(*) > 1")).all()
        dup_q = conn.execute(text("SELECT ts FROM rollup_quarter GROUP BY server_id, metric, ts HAVING COUNT(*) > 1")).all()
    assert minutes == [t0 + 60 * i for i in range(end // 60)]  # 210 minutes, none missing
    assert counts == {6}  # six samples a minute, each counted once
    assert [(q[0], q[1]) for q in quarters] == [(t0 + 900 * i, 90) for i in range(end // 900)]  # 14 quarters
    assert dup_m == [] and dup_q == []
    # bounded slices: from the watermark (minute 30) to now (minute 220) is 11,400 s: passes of
    # 3,600 s until less than one slice is left (3 passes), the last 600 s in the extra call
    assert passes == 3
