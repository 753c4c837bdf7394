"""Read caps under the real runner: a real `pitwall collect --duration 20` against two hostile servers — one
dripping a byte every 0.5 s on every path, one whose /metrics is 300 MiB — exits 0 within S plus a
few seconds, stays under 400 MiB of RSS, and records both as collector_error naming the limit.

The subprocess wait (35 s) is a generous deadline, not a speed claim beyond the issue's bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_http import HostileServer
from pwtest import collect_measured, subprocess_env

from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

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
        code, took, peak, out = collect_measured(DURATION_S, env, EXIT_WITHIN_S)
    print(f"collect --duration {DURATION_S}: exit {code} after {took:.1f} s, "
          f"peak RSS {peak / 2**20:.0f} MiB")
    assert code == 0, out[-3000:]
    assert took < EXIT_WITHIN_S
    assert peak < RSS_LIMIT, f"peak RSS {peak / 2**20:.0f} MiB"
    engine = make_engine(f"sqlite:///{db}")
    msgs = repo.list_events(engine, kinds=["collector_error"], limit=1000)["message"].tolist()
    engine.dispose()
    assert any("/metrics body passed 16 MiB (limit)" in m for m in msgs), msgs
    assert any("/metrics did not finish within the poll's 10 s deadline (runner.metrics_deadline_s, the limit)" in m for m in msgs), msgs
