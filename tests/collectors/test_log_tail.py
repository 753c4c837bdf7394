"""LogTailer and SGLangLogCollector on real files: partial lines, rotation, truncation, resume,
no loss and no double count across restarts, and a live writer process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from collectors.base import CollectorContext, PollResult, ServerTarget
from collectors.log_tail import LogTailer, TailState
from collectors.sglang.log import SGLangLogCollector, log_ts, records_to_rows
from collectors.sglang.log_stream import parse_text

TS = "2026-04-08 14:05:21"


def dec(n: int, ts: str = TS, ranks: str = "") -> str:
    return (f"[{ts}{ranks}] Decode batch, #running-req: {n}, #token: {n * 10}, token usage: "
            f"0.10, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n")


def write(p: Path, text: str, mode: str = "a") -> None:
    with open(p, mode, encoding="utf-8") as f:
        f.write(text)


def datas(lines: list[Any]) -> list[bytes]:
    return [ln.data for ln in lines]


# --- tailer ----------------------------------------------------------------------------------

def test_partial_line_is_held_until_its_newline(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, "one\ntwo-part", "w")
    t = LogTailer(str(p))
    assert datas(t.read()) == [b"one"]
    assert datas(t.read()) == []
    write(p, "-done\nthree\n")
    assert datas(t.read()) == [b"two-part-done", b"three"]
    t.close()


def test_rotation_drains_old_file_then_reads_new(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, "a\n", "w")
    t = LogTailer(str(p))
    assert datas(t.read()) == [b"a"]
    with open(p, "a", encoding="utf-8") as old:  # the writer still holds the old file
        os.rename(p, tmp_path / "s.log.1")
        old.write("b\nc-unterminated")
    write(p, "new1\n", "w")
    got = datas(t.read())
    assert got == [b"b", b"c-unterminated", b"new1"]  # nobody will finish the old last line
    t.close()


def test_truncation_restarts_from_zero(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, "aaaa\nbbbb\n", "w")
    t = LogTailer(str(p))
    assert len(t.read()) == 2
    write(p, "x\n", "w")  # copytruncate: same inode, smaller
    assert datas(t.read()) == [b"x"]
    t.close()


def test_truncation_that_regrew_past_offset_is_seen_by_head(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, "[first boot] a\n", "w")
    t = LogTailer(str(p))
    assert len(t.read()) == 1
    write(p, "[second boot] much longer line than before\n", "w")
    assert datas(t.read()) == [b"[second boot] much longer line than before"]
    t.close()


def test_resume_from_saved_state(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, "a\nb\n", "w")
    t = LogTailer(str(p))
    t.read()
    assert t.state is not None
    saved = t.state.to_dict()
    t.close()
    write(p, "c\n")
    t2 = LogTailer(str(p), TailState.from_dict(saved))
    lines = t2.read()
    assert datas(lines) == [b"c"] and lines[0].line_no == 3
    t2.close()


def test_restart_after_rotation_finds_the_rotated_file(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, "a\n", "w")
    t = LogTailer(str(p))
    t.read()
    assert t.state is not None
    saved = t.state.to_dict()
    t.close()  # runner down
    write(p, "b\n")  # written before rotation, never read
    os.rename(p, tmp_path / "s.log.1")
    write(p, "c\n", "w")
    t2 = LogTailer(str(p), TailState.from_dict(saved))
    assert datas(t2.read()) == [b"b", b"c"]  # the rest of the old file, then the new one
    t2.close()


def test_bounded_read_per_call(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, "".join(f"{i:09d}\n" for i in range(100)), "w")  # 10 bytes a line
    t = LogTailer(str(p), max_bytes=105)
    first = t.read()
    assert len(first) == 10  # 105 bytes hold 10 whole lines
    rest: list[bytes] = []
    for _ in range(20):
        rest += datas(t.read())
    assert len(first) + len(rest) == 100 and rest[-1] == b"000000099"
    t.close()


def test_state_from_garbage_is_none() -> None:
    assert TailState.from_dict({"dev": "x"}) is None and TailState.from_dict(None) is None


# --- collector -------------------------------------------------------------------------------

class Store:
    """A runner stand-in: state writes are pending until commit(), as in one transaction."""

    def __init__(self) -> None:
        self.committed: dict[str, dict[str, Any]] = {}
        self.pending: dict[str, dict[str, Any]] = {}
        self.rows = PollResult()

    def ctx(self, servers: list[ServerTarget], now: float = 1_800_000_000.0) -> CollectorContext:
        return CollectorContext(servers=servers, load_state=self.committed.get,
                                save_state=self.pending.__setitem__, now=lambda: now)

    def commit(self, res: PollResult) -> None:
        self.committed.update(self.pending)
        self.pending.clear()
        self.rows.extend(res)

    def rollback(self) -> None:
        self.pending.clear()


def running(rows: PollResult) -> list[float]:
    return [s.value for s in rows.samples if s.metric == "log.running_req"]


def server(p: Path) -> ServerTarget:
    return ServerTarget(id=7, name="s", base_url="http://127.0.0.1:1", log_path=str(p),
                        launch_id=3)


def test_collector_rows_and_restart_without_double_count(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, dec(1) + dec(2), "w")
    store, srv = Store(), server(p)
    c = SGLangLogCollector()
    store.commit(c.poll(store.ctx([srv])))
    c.close()
    write(p, dec(3))
    c2 = SGLangLogCollector()  # a restarted runner: new instance, same database
    store.commit(c2.poll(store.ctx([srv])))
    store.commit(c2.poll(store.ctx([srv])))
    assert running(store.rows) == [1.0, 2.0, 3.0]
    s = store.rows.samples[0]
    assert (s.server_id, s.launch_id, s.source) == (7, 3, "log")
    assert s.ts == log_ts(TS, 0.0)
    c2.close()


def test_uncommitted_poll_is_read_again(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, dec(1), "w")
    store, srv = Store(), server(p)
    c = SGLangLogCollector()
    store.commit(c.poll(store.ctx([srv])))
    write(p, dec(2))
    c.poll(store.ctx([srv]))
    store.rollback()  # the runner failed to write those rows and that state
    store.commit(c.poll(store.ctx([srv])))  # rewinds to the committed offset
    assert running(store.rows) == [1.0, 2.0]
    c.close()


def test_kill_during_traceback_yields_one_crash(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, dec(1) + f"[{TS} TP0] Scheduler hit an exception: Traceback (most recent call "
          "last):\n  File \"x.py\", line 1\n", "w")
    store, srv = Store(), server(p)
    c = SGLangLogCollector()
    store.commit(c.poll(store.ctx([srv])))
    assert [e.kind for e in store.rows.events] == []  # the group is still open
    c.close()  # killed here; the saved offset is the group's first line
    write(p, "ValueError: boom\n" + dec(2))
    c2 = SGLangLogCollector()
    store.commit(c2.poll(store.ctx([srv])))
    assert [e.kind for e in store.rows.events] == ["crash"]
    crash = store.rows.events[0]
    assert crash.raw is not None and crash.raw.endswith("ValueError: boom")
    assert crash.severity == "critical"  # storage/kinds.py EVENT_KINDS: a crash is critical
    assert running(store.rows) == [1.0, 2.0]
    c2.close()


def test_idle_file_flushes_a_finished_traceback(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: x\n", "w")
    store, srv = Store(), server(p)
    c = SGLangLogCollector()
    kinds = []
    for _ in range(4):
        res = c.poll(store.ctx([srv]))
        store.commit(res)
        kinds += [e.kind for e in res.events]
    assert kinds == ["crash"]
    c.close()


def test_missing_log_is_one_error_event_then_silence(tmp_path: Path) -> None:
    d = tmp_path / "dir-not-file"
    d.mkdir()
    store, srv = Store(), server(d)
    c = SGLangLogCollector()
    a = c.poll(store.ctx([srv]))
    b = c.poll(store.ctx([srv]))
    assert [e.kind for e in a.events] == ["collector_error"] and b.events == []
    c.close()


def test_rows_arithmetic_cache_hit_and_dp_aggregation() -> None:
    text = (
        # prefill windows: (cached 100, new 300) + (cached 300, new 100) -> 400 / 800 = 0.5
        f"[{TS}] Prefill batch, #new-seq: 1, #new-token: 300, #cached-token: 100, "
        "#running-req: 0, #queue-req: 0\n"
        f"[{TS}] Prefill batch, #new-seq: 1, #new-token: 100, #cached-token: 300, "
        "#running-req: 0, #queue-req: 0\n"
        # DP ranks: running 3 + 7 = 10; token usage mean (0.2 + 0.4) / 2 = 0.3
        f"[{TS} DP0 TP0] Decode batch, #running-req: 3, token usage: 0.20, #queue-req: 1\n"
        f"[{TS} DP1 TP8] Decode batch, #running-req: 7, token usage: 0.40, #queue-req: 2\n"
        f"[{TS}] KV cache pool is full. Retract requests. #retracted_reqs: 5, "
        "#new_token_ratio: 0.7 -> 0.9\n"
    )
    srv = ServerTarget(id=1, name="s", base_url="http://127.0.0.1:1")
    res = records_to_rows(parse_text(text), srv, now=0.0)
    got = {(s.metric): s.value for s in res.samples}
    assert got["log.cache_hit_rate"] == 0.5
    assert got["log.running_req.dp0"] == 3 and got["log.running_req.dp1"] == 7
    assert got["log.running_req"] == 10 and got["log.queue_req"] == 3
    assert abs(got["log.token_usage"] - 0.3) < 1e-12
    assert got["log.retracted_req"] == 5
    assert [e.kind for e in res.events] == ["decode_retract"]
    assert "log.cache_hit_rate" not in {
        s.metric for s in records_to_rows(parse_text(
            f"[{TS}] Prefill batch, #new-token: 0, #cached-token: 0, #queue-req: 0\n"),
            srv, now=0.0).samples}  # 0 / 0: no sample, never 0


def test_timestamps() -> None:
    assert log_ts("04:40:55", 0.0) is None  # no date: caller uses now
    assert log_ts("2026-04-08T14:05:21Z", 0.0) == 1775657121.0
    assert log_ts("2026-04-08 14:05:21,500", 0.0) == log_ts("2026-04-08 14:05:21", 0.0) + 0.5
    now = log_ts("2026-01-02 00:00:00", 0.0)
    assert now is not None
    dec31 = log_ts("12-31 23:00:00", now)  # diffusion form: last year, not 11 months ahead
    assert dec31 is not None and now - 2 * 86400 < dec31 < now  # 25 h before


WRITER = textwrap.dedent("""
    import random, sys, time
    path, n = sys.argv[1], int(sys.argv[2])
    rnd = random.Random(5)
    with open(path, "a", encoding="utf-8") as f:
        for i in range(n):
            line = ("[2026-04-08 14:05:21] Decode batch, #running-req: %d, #token: 1, "
                    "token usage: 0.10, cuda graph: True, gen throughput (token/s): 1.00, "
                    "#queue-req: 0\\n" % i)
            cut = rnd.randrange(len(line))
            f.write(line[:cut]); f.flush()  # a partial line is visible to the tailer
            if rnd.random() < 0.05:
                time.sleep(0.002)
            f.write(line[cut:]); f.flush()
""")


def test_live_writer_process_loses_nothing_across_restarts(tmp_path: Path) -> None:
    p = tmp_path / "live.log"
    p.touch()
    n = 1500
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(p), str(n)])
    store, srv = Store(), server(p)
    c = SGLangLogCollector(max_bytes_per_poll=8192)
    deadline = time.monotonic() + 60
    polls = 0
    try:
        while time.monotonic() < deadline:
            done = proc.poll() is not None
            res = c.poll(store.ctx([srv]))
            polls += 1
            if polls % 7 == 0:
                store.rollback()  # killed before the commit: rows and state both lost
                c.close()
                c = SGLangLogCollector(max_bytes_per_poll=8192)
            else:
                store.commit(res)
                if polls % 5 == 0:  # killed after the commit
                    c.close()
                    c = SGLangLogCollector(max_bytes_per_poll=8192)
            if done and len(running(store.rows)) >= n:
                break
            time.sleep(0.001)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        c.close()
    assert running(store.rows) == [float(i) for i in range(n)]


def test_collector_restart_across_rotation_loses_nothing(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    write(p, dec(1), "w")
    store, srv = Store(), server(p)
    c = SGLangLogCollector()
    store.commit(c.poll(store.ctx([srv])))
    c.close()  # runner down while the server logs on and logrotate runs
    write(p, dec(2))
    os.rename(p, tmp_path / "s.log.1")
    write(p, dec(3), "w")
    c2 = SGLangLogCollector()
    for _ in range(3):
        store.commit(c2.poll(store.ctx([srv])))
    assert running(store.rows) == [1.0, 2.0, 3.0]
    c2.close()


def test_an_unterminated_huge_line_is_cut_and_never_read_again(tmp_path) -> None:
    """A 64 MiB line written in pieces. Its first LINE_CAP bytes come back once; every
    poll moves the offset to the end of what is there (nothing is read twice), across a restart
    from the saved state too; the line after it is read normally."""
    from collectors.log_tail import LINE_CAP, LogTailer, TailState

    path = tmp_path / "huge.log"
    path.write_bytes(b"first line\n")
    tailer = LogTailer(str(path), max_bytes=4 << 20)
    assert [ln.data for ln in tailer.read()] == [b"first line"]
    piece = b"x" * (4 << 20)
    got: list[bytes] = []
    for i in range(16):  # 16 x 4 MiB = 64 MiB, no newline yet
        with open(path, "ab") as f:
            f.write(piece)
        got += [ln.data for ln in tailer.read()]
        assert tailer.state is not None and tailer.state.offset == path.stat().st_size  # all seen
        if i == 7:  # the runner restarts mid-line: it resumes from the saved state
            saved = TailState.from_dict(tailer.state.to_dict())
            tailer.close()
            tailer = LogTailer(str(path), saved, max_bytes=4 << 20)
    assert got == [b"x" * LINE_CAP]  # the head, once
    with open(path, "ab") as f:
        f.write(b"tail of the huge line\nsecond line\n")
    assert [ln.data for ln in tailer.read()] == [b"second line"]
    assert tailer.state.skipping == 0 and tailer.state.line_no == 3


def test_a_long_terminated_line_is_cut_to_the_cap(tmp_path) -> None:
    from collectors.log_tail import LINE_CAP, LogTailer

    path = tmp_path / "long.log"
    path.write_bytes(b"y" * (LINE_CAP + 10) + b"\nshort\n")
    lines = LogTailer(str(path)).read()
    assert [len(ln.data) for ln in lines] == [LINE_CAP, 5]
