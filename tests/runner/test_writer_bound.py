"""The runner's retry buffer is bounded: past max_retry_rows the oldest samples are dropped, and
ONE collector_error event says how many once the database takes writes again."""

from __future__ import annotations

import runner.writer as writer_mod
from collectors.base import SampleRow
from runner.writer import MAX_RETRY_ROWS, Batch, BatchWriter
from storage import repo


def _batch(start: int, n: int) -> Batch:
    return Batch(samples=[SampleRow(float(i), 1, "m.n", float(i), "test") for i in range(start, start + n)])


def test_retry_buffer_drops_the_oldest_and_says_so_once(engine, monkeypatch):
    assert MAX_RETRY_ROWS == 200_000
    w = BatchWriter(engine, max_retry_rows=10)
    orig = writer_mod.repo.insert_sample_tuples

    def refuse(conn, *, rows):  # type: ignore[no-untyped-def]
        raise RuntimeError("database is locked")

    monkeypatch.setattr(writer_mod.repo, "insert_sample_tuples", refuse)
    for k in range(3):  # 3 polls of 8 samples while writes fail: 24 samples, 10 kept
        w.put(_batch(8 * k, 8))
        assert w.flush() == 0
    assert w.write_failures == 3
    assert w.dropped_rows == 14  # 24 - 10
    monkeypatch.setattr(writer_mod.repo, "insert_sample_tuples", orig)
    assert w.flush() == 11  # 10 samples + the one event
    vals = repo.sample_values(engine, server_id=1, metric="m.n", since=0)
    assert vals.tolist() == [float(i) for i in range(14, 24)]  # the newest ten
    ev = repo.list_events(engine, kinds=["collector_error"])
    assert len(ev) == 1
    msg = ev.iloc[0]["message"]
    assert "Dropped the 14 oldest samples" in msg and "at most 10 samples for retry (limit)" in msg
    w.put(_batch(100, 2))
    assert w.flush() == 2  # no second event
    assert len(repo.list_events(engine, kinds=["collector_error"])) == 1
