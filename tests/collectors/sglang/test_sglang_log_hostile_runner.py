"""The hostile log path, runner level: a real `pitwall collect --duration 8` with two servers, the first
whose log_path is a FIFO and the second with a healthy log. The healthy server's log rows are
stored and the FIFO leaves exactly one collector_error naming the server and the path (before
the fix the FIFO's open blocked the log collector's poll for ever: 0 log rows for anyone).

The subprocess wait is a generous deadline, not a speed claim.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pwtest import REPO, free_port, subprocess_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_collect_with_a_fifo_log_path_keeps_the_healthy_server(tmp_path: Path) -> None:
    fifo = tmp_path / "hostile.log"
    os.mkfifo(fifo)
    good = tmp_path / "good.log"
    good.write_text("".join(
        f"[2026-04-08 14:05:2{i}] Decode batch, #running-req: {i}, #token: 10, token usage: "
        "0.10, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n"
        for i in range(1, 6)))
    db = tmp_path / "pitwall.db"
    cfg = tmp_path / "pitwall.toml"
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens: the HTTP collectors fail fast
    cfg.write_text(f'[[servers]]\nname = "hostile"\nbase_url = "{url}"\nlog_path = "{fifo}"\n'
                   f'[[servers]]\nname = "healthy"\nbase_url = "{url}"\nlog_path = "{good}"\n')
    env = subprocess_env({"PITWALL_DATA_DIR": str(tmp_path / "data"),
                          "PITWALL_DATABASE_URL": f"sqlite:///{db}",
                          "PITWALL_CONFIG": str(cfg), "PITWALL_DEMO": "off"})
    proc = subprocess.run([sys.executable, "-m", "cli", "collect", "--duration", "8"],
                          cwd=REPO, env=env, capture_output=True, timeout=90)
    assert proc.returncode == 0, proc.stdout.decode(errors="replace")[-3000:]
    with sqlite3.connect(db) as conn:
        ids = dict(conn.execute("SELECT name, id FROM server").fetchall())
        values = [v for (v,) in conn.execute(
            "SELECT value FROM sample WHERE server_id = ? AND metric = 'log.running_req' "
            "ORDER BY ts", (ids["healthy"],))]
        msgs = [m for (m,) in conn.execute(
            "SELECT message FROM event WHERE kind = 'collector_error' AND server_id = ?",
            (ids["hostile"],))]
    assert values == [1.0, 2.0, 3.0, 4.0, 5.0]
    fifo_msgs = [m for m in msgs if "log" in m and str(fifo) in m]
    assert len(fifo_msgs) == 1 and "FIFO" in fifo_msgs[0] and "'hostile'" in fifo_msgs[0]
