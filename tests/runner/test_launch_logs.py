"""Launch logs by size (runner/launch_logs.py, retention.launch_logs_mb): each launch's log is
rotated aside, the oldest ended ones leave first down to the budget, a live log never does, and
the About table shows the bytes and what goes next. Real files, a real SQLite database."""

from __future__ import annotations

import os

from dashboard.services.views.health import retention_table
from runner import launch_logs
from runner.loop import Runner
from storage import repo

NOW = 1_800_000_000.0
MB = launch_logs.MB


def _file(path, size_mb: float, age_s: float):  # type: ignore[no-untyped-def]
    path.write_bytes(b"x" * int(size_mb * MB))
    os.utime(path, (NOW - age_s, NOW - age_s))
    return path


def test_rotate_moves_a_used_log_aside_and_repoints_ended_launches(tmp_path, engine):
    logs = tmp_path / "logs"
    logs.mkdir()
    live = logs / "a.log"
    assert launch_logs.rotate(live, logs) is None  # nothing there yet
    live.write_bytes(b"first launch\n")
    srv = repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1", log_path=str(live))
    ended = repo.create_launch(engine, server_id=srv.id, log_path=str(live), started_at=NOW - 60, ended_at=NOW - 5)
    old = launch_logs.rotate(live, logs, now=NOW)
    assert old is not None and old.name == "a.log.20270115T080000Z" and old.read_bytes() == b"first launch\n"
    assert not live.exists()
    assert repo.relocate_launch_log(engine, old=str(live), new=str(old)) == 1
    assert repo.get_launch(engine, launch_id=ended.id).log_path == str(old)
    # a log outside Pitwall's logs folder (an operator's path) is never rotated
    elsewhere = tmp_path / "b.log"
    elsewhere.write_bytes(b"theirs\n")
    assert launch_logs.rotate(elsewhere, logs) is None and elsewhere.exists()


def test_oldest_ended_logs_go_first_down_to_the_budget_never_a_live_one(tmp_path, engine):
    """Budget 5 MB. Files (MB, age): a.log 4 live (the server's), a.log.1 3 (3 days),
    a.log.2 2 (2 days), b.log.1 1 (1 day), a.log.3 2 (written 60 s ago: still draining).
    Total 12 MB: a.log.1 goes (9 MB), a.log.2 goes (7 MB), b.log.1 goes (6 MB); the live and the
    fresh one stay although the folder is still over budget (6 MB)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    live = _file(logs / "a.log", 4, 3600)
    _file(logs / "a.log.1", 3, 3 * 86400)
    _file(logs / "a.log.2", 2, 2 * 86400)
    _file(logs / "b.log.1", 1, 86400)
    _file(logs / "a.log.3", 2, 60)
    repo.upsert_server(engine, name="a", base_url="http://127.0.0.1:1", log_path=str(live))
    live_paths = repo.live_log_paths(engine)
    assert live_paths == {str(live)}
    plan = launch_logs.plan(logs, live=live_paths, budget_mb=5, now=NOW)
    assert [(f.path.name, f.goes_next) for f in plan] == [
        ("a.log.1", True), ("a.log.2", True), ("b.log.1", True), ("a.log", False), ("a.log.3", False)]
    table = retention_table(engine, {"launch_logs_mb": 5}, now=NOW, logs_dir=logs)
    row = table[table["table"] == "launch logs (files)"].iloc[0]
    assert (row["rows"], row["size"], row["kept"], row["removed next"]) == (5, "11.4 MiB", "5 MB", 3)

    runner = Runner(engine, [], retention={"launch_logs_mb": 5}, logs_dir=logs)
    try:
        assert runner.retain_logs(NOW) == (3, 6 * MB)
        assert runner.retain_logs(NOW) == (0, 0)  # nothing else may go
    finally:
        runner._pool.shutdown()
    assert sorted(p.name for p in logs.iterdir()) == ["a.log", "a.log.3"]
    assert live.stat().st_size == 4 * MB


def test_zero_keeps_every_log(tmp_path, engine):
    logs = tmp_path / "logs"
    logs.mkdir()
    _file(logs / "a.log.1", 3, 3 * 86400)
    assert not any(f.goes_next for f in launch_logs.plan(logs, live=set(), budget_mb=0, now=NOW))
    runner = Runner(engine, [], retention={"launch_logs_mb": 0}, logs_dir=logs)
    try:
        assert runner.retain_logs(NOW) == (0, 0)
    finally:
        runner._pool.shutdown()
    assert (logs / "a.log.1").exists()
