"""Issue 17 acceptance: a real `pitwall collect --duration 20` against two hostile servers — one
dripping a byte every 0.5 s on every path, one whose /metrics is 300 MiB — exits 0 within S plus a
few seconds, stays under 400 MiB of RSS, and records both as collector_error naming the limit.

The subprocess wait (35 s) is a generous deadline, not a speed claim beyond the issue's bound.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from hostile_http import HostileServer
from pwtest import REPO, subprocess_env

from storage import repo
from storage.db import make_engine

pytestmark = pytest.mark.timeout(120)

DURATION_S = 20
EXIT_WITHIN_S = 35.0
RSS_LIMIT = 400 * 1024 * 1024


def test_collect_is_bounded_by_deadlines_and_caps(tmp_path: Path) -> None:
    db = tmp_path / "pitwall.db"
    with HostileServer("drip", drip_s=0.5) as drip, HostileServer("big") as big:
        cfg = tmp_path / "pitwall.toml"
        cfg.write_text(
            f'[[servers]]\nname = "drip"\nbase_url = "{drip.url}"\n'
            f'[[servers]]\nname = "big"\nbase_url = "{big.url}"\n'
        )
        env = subprocess_env({"PITWALL_DATA_DIR": str(tmp_path / "data"),
                              "PITWALL_DATABASE_URL": f"sqlite:///{db}",
                              "PITWALL_CONFIG": str(cfg), "PITWALL_DEMO": "off"})
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "dashboard", "collect", "--duration", str(DURATION_S)],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        ps = psutil.Process(proc.pid)
        peak = 0
        while proc.poll() is None and time.monotonic() - t0 < EXIT_WITHIN_S:
            try:
                peak = max(peak, ps.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.2)
        took = time.monotonic() - t0
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate(timeout=10)[0].decode(errors="replace")
    print(f"collect --duration {DURATION_S}: exit {proc.returncode} after {took:.1f} s, "
          f"peak RSS {peak / 2**20:.0f} MiB")
    assert proc.returncode == 0, out[-3000:]
    assert took < EXIT_WITHIN_S
    assert peak < RSS_LIMIT, f"peak RSS {peak / 2**20:.0f} MiB"
    engine = make_engine(f"sqlite:///{db}")
    msgs = repo.list_events(engine, kinds=["collector_error"], limit=1000)["message"].tolist()
    engine.dispose()
    assert any("/metrics body passed 16 MiB (limit)" in m for m in msgs), msgs
    assert any("/metrics did not finish within the poll's 10 s deadline (runner.metrics_deadline_s, the limit)" in m for m in msgs), msgs
