"""A runner killed with SIGKILL mid-write leaves a sound database with every committed batch."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from pwtest import PY, subprocess_env


def test_sigkill_keeps_every_committed_batch(tmp_path: Path) -> None:
    db = tmp_path / "kill.db"
    proc = subprocess.Popen(
        [PY, str(Path(__file__).with_name("sigkill_writer.py")), f"sqlite:///{db}"],
        stdout=subprocess.PIPE,
        env=subprocess_env(),
        text=True,
    )
    committed = 0
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    try:
        while committed < 20_000 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("committed "):
                committed = int(line.split()[1])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert committed >= 20_000, "the writer did not get far enough to test anything"

    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows, max_seq = con.execute(
            "SELECT COUNT(*), MAX(value) FROM sample WHERE metric = 'firehose.seq'"
        ).fetchone()
        total = con.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
        total += con.execute("SELECT COUNT(*) FROM event").fetchone()[0]
    finally:
        con.close()
    # every row reported as committed (firehose + the runner's own self.* samples) is there,
    # and the firehose sequence has no holes
    assert total >= committed
    assert max_seq == rows
