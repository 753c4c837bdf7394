"""Runner: failure isolation with backoff, atomic rows + state, lease, intents, self collector."""

from __future__ import annotations

import threading
import time

import pytest

from collectors.base import CollectorContext, PollResult, SampleRow
from runner.loop import LeaseHeld, Runner
from storage import repo


class Counter:
    name = "counter"
    interval_s = 0.05

    def __init__(self) -> None:
        self.polls = 0

    def poll(self, ctx: CollectorContext) -> PollResult:
        state = ctx.load_state("counter") or {"n": 0}
        n = state["n"] + 1
        ctx.save_state("counter", {"n": n})
        self.polls += 1
        return PollResult(samples=[SampleRow(ctx.now(), 1, "counter.n", float(n), "log")])

    def close(self) -> None:
        pass


class Broken:
    name = "broken"
    interval_s = 0.05

    def __init__(self) -> None:
        self.calls: list[float] = []

    def poll(self, ctx: CollectorContext) -> PollResult:
        self.calls.append(time.monotonic())
        raise RuntimeError("scrape failed: connection refused")

    def close(self) -> None:
        pass


def _run(runner: Runner, until, timeout: float = 20.0) -> None:
    t = threading.Thread(target=runner.run, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        time.sleep(0.02)
    runner.stop()
    t.join(10)
    assert not t.is_alive()


def test_failing_collector_is_isolated_and_backs_off(engine):
    good, bad = Counter(), Broken()
    runner = Runner(engine, [good, bad], tick_s=0.01, flush_s=0.05, max_backoff_s=0.4)
    _run(runner, lambda: good.polls >= 30 and len(bad.calls) >= 4)
    assert good.polls >= 30
    events = repo.list_events(engine, kinds=["collector_error"])
    # a call still failing when the runner stops may not have had its event written yet
    assert len(bad.calls) - 1 <= len(events) <= len(bad.calls)
    assert "scrape failed" in events.iloc[0]["message"]
    gaps = [b - a for a, b in zip(bad.calls, bad.calls[1:], strict=False)]
    # backoff doubles from interval_s * 2 = 0.1 s up to max_backoff_s: retry n waits at least
    # 0.1 * 2**n s, less the pool thread's start (a lower bound: a busy host only ever makes a retry
    # later, so the gaps are not compared with each other)
    due = [min(bad.interval_s * 2 ** (n + 1), 0.4) for n in range(len(gaps))]
    assert all(g >= d - 0.05 for g, d in zip(gaps, due, strict=True)), (gaps, due)
    assert {m.rsplit("(", 1)[1] for m in events["message"]} >= {"retrying in 0.1 s)", "retrying in 0.2 s)"}


def test_rows_and_state_are_written_together(engine):
    good = Counter()
    runner = Runner(engine, [good], tick_s=0.01, flush_s=0.05)
    _run(runner, lambda: good.polls >= 10)
    vals = repo.sample_values(engine, server_id=1, metric="counter.n", since=0)
    # the stored state equals the last value written: no sample without its state, or vice versa
    assert repo.load_state(engine, key="counter") == {"n": int(vals.max())}
    assert sorted(vals.tolist()) == [float(i) for i in range(1, len(vals) + 1)]


def test_second_runner_is_refused_with_the_holder(engine):
    first = Runner(engine, [], holder="hostA:111")
    first.acquire()
    second = Runner(engine, [], holder="hostA:222")
    with pytest.raises(LeaseHeld, match="hostA:111"):
        second.acquire()


def test_intents_run_once_each_in_their_lane(engine):
    seen: list[int] = []

    def handler(intent):  # type: ignore[no-untyped-def]
        seen.append(intent.id)
        repo.update_intent(engine, intent_id=intent.id, state="done")

    a = repo.create_intent(engine, kind="relaunch", server_id=1)
    b = repo.create_intent(engine, kind="relaunch", server_id=1)
    runner = Runner(engine, [], intent_handlers={"relaunch": handler}, tick_s=0.01)
    _run(runner, lambda: len(seen) >= 2)
    assert seen == [a.id, b.id]
    assert all(i.state == "done" for i in repo.list_intents(engine))


def test_handler_exception_fails_the_intent_not_the_runner(engine):
    def handler(intent):  # type: ignore[no-untyped-def]
        raise ValueError("profile 'x' not found")

    it = repo.create_intent(engine, kind="probe", server_id=1)
    runner = Runner(engine, [], intent_handlers={"probe": handler}, tick_s=0.01)
    # one read per poll: two reads could straddle the claim (pending, then running) and stop early
    _run(runner, lambda: repo.get_intent(engine, intent_id=it.id).state not in ("pending", "running"))
    got = repo.get_intent(engine, intent_id=it.id)
    assert got.state == "failed" and "profile 'x' not found" in got.message


def test_self_collector_records_runner_health(engine):
    runner = Runner(engine, [], tick_s=0.01, flush_s=0.05)
    runner._slots[-1].collector.interval_s = 0.05  # the built-in self collector
    _run(runner, lambda: bool(repo.latest_samples(engine, server_id=0, metrics=["self.loop_lag_s"])))
    got = repo.latest_samples(engine, server_id=0, metrics=["self.cpu_pct", "self.loop_lag_s", "self.rows_per_s"])
    assert set(got) == {"self.cpu_pct", "self.loop_lag_s", "self.rows_per_s"}
    assert got["self.loop_lag_s"][1] >= 0


def test_locked_database_keeps_rows_and_retries(engine, tmp_path):
    """A writer holding the database locked past busy_timeout loses nothing: rows wait and land."""
    import sqlite3

    from storage import db as storage_db

    good = Counter()
    runner = Runner(engine, [good], tick_s=0.01, flush_s=0.05)
    path = storage_db.sqlite_path(str(engine.url))
    assert path is not None
    import runner.loop as runner_mod

    orig = runner_mod.repo.insert_sample_tuples

    def short_wait(conn, *, rows):  # type: ignore[no-untyped-def]
        conn.exec_driver_sql("PRAGMA busy_timeout=50")
        return orig(conn, rows=rows)

    runner_mod.repo.insert_sample_tuples = short_wait
    try:
        t = threading.Thread(target=runner.run, daemon=True)
        t.start()
        deadline = time.monotonic() + 20
        while good.polls < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        # a second connection takes the write lock; sample writes wait only 50 ms for it
        blocker = sqlite3.connect(path, timeout=0.1)
        blocker.execute("BEGIN IMMEDIATE")
        deadline = time.monotonic() + 20
        while runner.write_failures < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert runner.write_failures >= 2
        blocker.rollback()
        blocker.close()
        polls_when_released = good.polls
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            vals = repo.sample_values(engine, server_id=1, metric="counter.n", since=0)
            if vals.size >= polls_when_released:
                break
            time.sleep(0.05)
        runner.stop()
        t.join(10)
    finally:
        runner_mod.repo.insert_sample_tuples = orig
    vals = repo.sample_values(engine, server_id=1, metric="counter.n", since=0)
    # every poll made while the database was locked landed afterwards, in order, once
    assert sorted(vals.tolist()) == [float(i) for i in range(1, len(vals) + 1)]
    assert len(vals) >= polls_when_released


def test_a_poll_that_raises_after_saving_state_does_not_advance_it(engine):
    """State saved by a poll that then fails is dropped with its rows (no silent skip)."""

    class SavesThenFails:
        name = "offsets"
        interval_s = 0.02

        def __init__(self) -> None:
            self.calls = 0

        def poll(self, ctx: CollectorContext) -> PollResult:
            self.calls += 1
            state = ctx.load_state("offsets") or {"offset": 0}
            offset = state["offset"] + 100
            ctx.save_state("offsets", {"offset": offset})
            if self.calls == 1:
                raise RuntimeError("second server failed after the first was read")
            return PollResult(samples=[SampleRow(ctx.now(), 1, "offsets.offset", float(offset), "log")])

        def close(self) -> None:
            pass

    col = SavesThenFails()
    runner = Runner(engine, [col], tick_s=0.01, flush_s=0.02, max_backoff_s=0.05)
    _run(runner, lambda: col.calls >= 5)
    vals = sorted(repo.sample_values(engine, server_id=1, metric="offsets.offset", since=0).tolist())
    # the failed first poll's advance is not kept: the first written offset is 100, not 200
    assert vals[0] == 100.0
    assert repo.load_state(engine, key="offsets") == {"offset": int(vals[-1])}
