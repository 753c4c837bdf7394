"""What sits at a server's log_path cannot blind the log collector or show a file the
operator never meant to show. Real FIFOs, symlinks, folders and sockets in tmp_path, a real
multi-server poll: the healthy server's rows come back in the same poll, and each refused path
leaves one event per episode naming the server, the path and what to do."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from collectors.base import CollectorContext, PollResult, ServerTarget
from collectors.log_tail import LogTailer
from collectors.sglang.log import SGLangLogCollector

pytestmark = pytest.mark.timeout(60)  # without the fix a FIFO blocks the poll for ever

TS = "2026-04-08 14:05:21"
SECRET = "SECRET-do-not-show"


def dec(n: int) -> str:
    return (f"[{TS}] Decode batch, #running-req: {n}, #token: {n * 10}, token usage: 0.10, "
            f"cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n")


def srv(sid: int, path: Path | str) -> ServerTarget:
    return ServerTarget(id=sid, name=f"s{sid}", base_url="http://127.0.0.1:1",
                        log_path=str(path), launch_id=sid)


def ctx(servers: list[ServerTarget], state: dict | None = None) -> CollectorContext:
    state = {} if state is None else state
    return CollectorContext(servers=servers, load_state=state.get,
                            save_state=state.__setitem__, now=lambda: 1_800_000_000.0)


def running(res: PollResult, sid: int) -> list[float]:
    return [s.value for s in res.samples if s.metric == "log.running_req" and s.server_id == sid]


def errors(res: PollResult, sid: int) -> list[str]:
    return [e.message for e in res.events if e.kind == "collector_error" and e.server_id == sid]


def secret_file(tmp_path: Path) -> Path:
    """A file the operator never meant to show; it holds a record, so reading it would show."""
    p = tmp_path / "elsewhere" / "shadow"
    p.parent.mkdir()
    p.write_text(f"root:{SECRET}:19000:0:99999:7:::\n" + dec(99))
    return p


def nothing_of(res: PollResult, text: str) -> bool:
    return all(text not in (e.message + (e.raw or "")) for e in res.events)


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "socket", "device"])
def test_a_refused_log_path_is_one_event_and_the_healthy_server_is_read(
        tmp_path: Path, kind: str) -> None:
    bad = tmp_path / "bad.log"
    sock = None
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "symlink":
        bad.symlink_to(secret_file(tmp_path))
    elif kind == "directory":
        bad.mkdir()
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(bad))
    else:
        bad = Path(os.devnull)  # a character device every POSIX system has
    good = tmp_path / "good.log"
    good.write_text(dec(1) + dec(2))
    c = SGLangLogCollector()
    servers = [srv(1, bad), srv(2, good)]  # the bad one first: it must not hold the other
    state: dict = {}
    try:
        first = c.poll(ctx(servers, state))
        assert running(first, 2) == [1.0, 2.0]  # same poll
        assert running(first, 1) == []
        (msg,) = errors(first, 1)
        assert "'s1'" in msg and str(bad) in msg and "set log_path to the log file itself" in msg
        assert errors(first, 2) == []
        with open(good, "a", encoding="utf-8") as f:
            f.write(dec(3))
        second = c.poll(ctx(servers, state))
        assert running(second, 2) == [3.0]
        assert errors(second, 1) == []  # one event per episode, not one per poll
        assert nothing_of(first, SECRET) and nothing_of(second, SECRET)
    finally:
        c.close()
        if sock is not None:
            sock.close()


def test_refusal_names_what_it_is(tmp_path: Path) -> None:
    from collectors.log_tail import LogPathRefused, open_regular

    fifo = tmp_path / "f.log"
    os.mkfifo(fifo)
    link = tmp_path / "l.log"
    link.symlink_to(tmp_path / "whatever")
    with pytest.raises(LogPathRefused, match="FIFO"):
        open_regular(str(fifo))
    with pytest.raises(LogPathRefused, match="symbolic link"):
        open_regular(str(link))
    t = LogTailer(str(fifo))
    assert t.read() == [] and t.refused is not None and "FIFO" in t.refused.why


def test_a_symlinked_parent_folder_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "mnt" / "disk1"
    real.mkdir(parents=True)
    (real / "s.log").write_text(dec(5))
    (tmp_path / "data").symlink_to(real)  # the operator's /data -> /mnt/disk1
    c = SGLangLogCollector()
    res = c.poll(ctx([srv(1, tmp_path / "data" / "s.log")]))
    c.close()
    assert running(res, 1) == [5.0] and res.events == []


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_file_replaced_later_is_drained_then_refused(tmp_path: Path, kind: str) -> None:
    p = tmp_path / "s.log"
    p.write_text(dec(1))
    secret = secret_file(tmp_path)
    c = SGLangLogCollector()
    state: dict = {}
    servers = [srv(1, p)]
    assert running(c.poll(ctx(servers, state)), 1) == [1.0]
    with open(p, "a", encoding="utf-8") as f:  # the writer's last lines, then the swap
        f.write(dec(2))
    os.rename(p, tmp_path / "s.log.1")
    if kind == "symlink":
        p.symlink_to(secret)
    else:
        os.mkfifo(p)
    res = c.poll(ctx(servers, state))
    assert running(res, 1) == [2.0]  # the old file, already open, is finished
    (msg,) = errors(res, 1)
    assert ("symbolic link" if kind == "symlink" else "FIFO") in msg
    again = c.poll(ctx(servers, state))
    assert running(again, 1) == [] and errors(again, 1) == []
    assert nothing_of(res, SECRET) and nothing_of(again, SECRET)
    # fixed by the operator: read again; a later refusal is a new episode, so a new event
    p.unlink()
    p.write_text(dec(3))
    fixed = c.poll(ctx(servers, state))
    assert running(fixed, 1) == [3.0] and fixed.events == []
    p.unlink()
    p.symlink_to(secret)
    assert len(errors(c.poll(ctx(servers, state)), 1)) == 1
    c.close()


def test_a_parent_swapped_for_a_symlink_after_start_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "s.log").write_text(dec(1))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "s.log").write_text(dec(99))
    t = LogTailer(str(logs / "s.log"))
    assert [ln.line_no for ln in t.read()] == [1]
    os.rename(logs, tmp_path / "logs.old")
    logs.symlink_to(elsewhere)  # the folder now points somewhere else
    assert t.read() == []
    assert t.refused is not None and "when collection started" in t.refused.why
    t.close()


def test_a_rotated_name_that_is_a_symlink_is_not_followed_after_restart(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    p.write_text(dec(1))
    t = LogTailer(str(p))
    t.read()
    assert t.state is not None
    saved = t.state
    t.close()
    with open(p, "a", encoding="utf-8") as f:
        f.write(dec(2))
    os.rename(p, tmp_path / "real.1")
    (tmp_path / "s.log.1").symlink_to(tmp_path / "real.1")  # same inode, reached via a link
    p.write_text(dec(3))
    t2 = LogTailer(str(p), saved)
    got = [ln.data for ln in t2.read()]
    t2.close()
    assert got == [dec(3).rstrip("\n").encode()]  # the new file only; the link is not opened


def test_a_slow_or_failing_server_does_not_hold_the_others(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: one server's read blocks (a hung mount) and another's raises; the
    healthy server's rows still come back in the same poll, each bad one is one event, and the
    slow one's lines arrive once its read returns."""
    slow, broken, good = tmp_path / "slow.log", tmp_path / "broken.log", tmp_path / "good.log"
    slow.write_text(dec(7))
    broken.write_text(dec(8))
    good.write_text(dec(1))
    release = threading.Event()
    real_read = LogTailer.read

    def read(self: LogTailer) -> list:
        if self.path == str(slow):
            release.wait(30)
        if self.path == str(broken):
            raise RuntimeError("parser bug")
        return real_read(self)

    monkeypatch.setattr(LogTailer, "read", read)
    c = SGLangLogCollector(read_deadline_s=2.0)  # the good and broken reads meet it on a loaded host
    servers = [srv(1, slow), srv(2, broken), srv(3, good)]
    state: dict = {}
    try:
        first = c.poll(ctx(servers, state))
        assert running(first, 3) == [1.0]
        assert len(errors(first, 1)) == 1 and "took longer than 2 s" in errors(first, 1)[0]
        assert len(errors(first, 2)) == 1 and "RuntimeError" in errors(first, 2)[0]
        with open(good, "a", encoding="utf-8") as f:
            f.write(dec(2))
        second = c.poll(ctx(servers, state))
        assert running(second, 3) == [2.0] and second.events == []  # still slow: no new event
        release.set()
        got: list[float] = []
        until = time.monotonic() + 30  # the stuck read returns in its own thread, collected by a poll
        while not got and time.monotonic() < until:
            got += running(c.poll(ctx(servers, state)), 1)
            time.sleep(0.02)
        assert got == [7.0]
    finally:
        release.set()
        c.close()
