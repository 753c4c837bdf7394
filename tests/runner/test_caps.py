"""Read caps under the real runner: a real `pitwall collect --duration 20` against two hostile servers — one
dripping a byte every 0.5 s on every path, one whose /metrics is 300 MiB — exits 0 by itself, within
S plus a few seconds (README: "whatever the servers do"), stays under 400 MiB of RSS, and records
both as collector_error naming the limit.

"Within S plus a few seconds" is measured against a baseline, never against the wall clock alone:
an ordinary `collect --duration 20` (no servers) runs beside it, started at the same moment, and
the hostile run may take at most EXTRA_S longer. A busy host slows both alike; a runner that
waited on the dripping reads at exit (several reads of 10 s each, in a row) would not meet it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_http import HostileServer
from pwtest import collect_beside_baseline, subprocess_env

from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DURATION_S = 20
EXTRA_S = 20.0  # over the baseline: the runner's bounded wait at exit (5 s) plus margin
GIVE_UP_S = DURATION_S + 120.0  # a run is killed (exit code None) after this
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
        (tmp_path / "empty.toml").write_text("")
        plain = subprocess_env({"PITWALL_DATA_DIR": str(tmp_path / "base"),
                                "PITWALL_DATABASE_URL": f"sqlite:///{tmp_path / 'base.db'}",
                                "PITWALL_CONFIG": str(tmp_path / "empty.toml"), "PITWALL_DEMO": "off"})
        (code, took, peak, out), (base_code, base_took, _, base_out) = collect_beside_baseline(
            DURATION_S, env, plain, GIVE_UP_S)
    print(f"collect --duration {DURATION_S}: exit {code} after {took:.1f} s (baseline beside it: "
          f"{base_took:.1f} s), peak RSS {peak / 2**20:.0f} MiB")
    assert base_code == 0, base_out[-3000:]
    assert code == 0, out[-3000:]  # ended by itself, not killed at the give-up
    assert took - base_took < EXTRA_S, f"{took:.1f} s, the baseline beside it {base_took:.1f} s"
    assert peak < RSS_LIMIT, f"peak RSS {peak / 2**20:.0f} MiB"
    engine = make_engine(f"sqlite:///{db}")
    msgs = repo.list_events(engine, kinds=["collector_error"], limit=1000)["message"].tolist()
    engine.dispose()
    assert any("/metrics body passed 16 MiB (limit)" in m for m in msgs), msgs
    assert any("/metrics did not finish within the poll's 10 s deadline (runner.metrics_deadline_s, the limit)" in m for m in msgs), msgs
