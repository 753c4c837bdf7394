"""Alerts under the real runner: `pitwall collect` manages a simulator started with a
`--sim-fault` (SGLANG_SIM_FAULT in its profile), its 0.5-second canary drives requests, the
fault kills the server (or, for slow-prefill, slows its TTFT), the `crash` / `oom` alert fires, auto-restart brings the server back
(`server_ready`) and the alert resolves. Detection latencies are printed (run with -s), never
asserted: CI is a busy machine.

`alerting.inhibit_grace_s` is 1 s here so a fault right after the planned first launch counts.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from alert_receivers import AM_BINARY, Alertmanager, Webhook
from pwtest import PY, REPO, free_port, sim_profile, stop_group, subprocess_env, wait_for

from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
FAST_ENV = {"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "0.5", "SGLANG_SIM_SEED": "1"}


def _collect(tmp_path, fault: str, *, alerting: str = "", extra: str = ""):
    folder = tmp_path / "profiles"
    folder.mkdir()
    sim_profile(folder, "faulty", "max-running-requests = 8", {**FAST_ENV, "SGLANG_SIM_FAULT": fault})
    port = free_port()
    (tmp_path / "pitwall.toml").write_text(
        f'[runner]\nauto_restart = true\nrestart_budget = 10\n'
        f'[alerting]\neval_interval_s = 0.5\ninhibit_grace_s = 1.0\n{alerting}'
        f'{extra}'
        f'[[servers]]\nname = "sim"\nbase_url = "http://127.0.0.1:{port}"\nmanaged = true\nprofile = "faulty"\n'
        f'python = "{sys.executable}"\nlog_path = "{tmp_path / "sim.log"}"\n', encoding="utf-8")
    env = subprocess_env({
        "PITWALL_DATA_DIR": str(tmp_path / "data"),
        "PITWALL_DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}",
        "PITWALL_CONFIG": str(tmp_path / "pitwall.toml"), "PITWALL_DEMO": "off",
        "PITWALL_PROFILES_DIR": str(folder), "PITWALL_CANARY_INTERVAL_S": "0.5",
    })
    log = open(tmp_path / "collect.log", "w")  # noqa: SIM115 - closed by the caller
    proc = subprocess.Popen([PY, "-m", "cli", "collect"], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log, env["PITWALL_DATABASE_URL"]


@pytest.mark.parametrize(("fault", "rule", "kinds"), [
    ("crash-after=3", "crash", ("crash", "server_exit")),
    ("oom-after=3", "oom", ("oom", "prefill_oom")),
])
def test_fault_fires_its_alert_and_resolves_when_the_server_is_back(tmp_path, fault, rule, kinds):
    hook = Webhook().start()
    proc, log, url = _collect(tmp_path, fault, alerting=f'webhook_url = "{hook.url}"\n')
    try:
        engine = make_engine(url)
        fired = wait_for(lambda: [a for a in repo.list_alerts(engine) if a.rule == rule and a.fired_at],
                         timeout=180, what=f"the {rule} alert firing", poll_s=0.25)[-1]
        events = repo.list_events(engine, kinds=list(kinds), since=0.0, limit=100)
        assert len(events), f"{rule} fired without a {kinds} event"
        first = float(events["ts"].min())
        resolved = wait_for(lambda: next((a for a in repo.list_alerts(engine, since=0.0)
                                          if a.id == fired.id and a.state == "resolved"), None),
                            timeout=180, what=f"the {rule} alert resolving", poll_s=0.25)
        ready = repo.list_events(engine, kinds=["server_ready"], since=first, limit=100)
        assert len(ready), "resolved without the server being ready again"
        back = float(ready["ts"].min())
        print(f"\n{fault}: fired {fired.fired_at - first:.2f} s after the {kinds[0]} event; "
              f"resolved {resolved.resolved_at - back:.2f} s after server_ready")
        assert resolved.resolved_at >= back
        # the webhook got this alert once firing and once resolved (a crash loop would re-fire:
        # the first episode is what this test judges)
        _wait(lambda: [a["status"] for a in hook.alerts() if a["labels"]["alertname"] == rule][:2]
              == ["firing", "resolved"], f"the webhook: {rule} firing then resolved")
        engine.dispose()
    finally:
        stop_group(proc)
        log.close()
        hook.stop()


@pytest.mark.skipif(AM_BINARY is None, reason="needs prometheus-alertmanager (Debian package; "
                    "scripts/system_deps.sh installs it)")
def test_slow_ttft_fires_once_at_both_receivers_and_resolves_when_it_clears(tmp_path):
    """A prefill slowdown (`--sim-fault slow-prefill`, clearing by itself after 12 requests) makes
    the canary's TTFT cross a threshold rule: the alert reaches the webhook and, through a real
    Alertmanager, its receiver, once each; it resolves once the slowdown has passed."""
    hook, am_hook = Webhook().start(), Webhook().start()
    am = Alertmanager(tmp_path, am_hook)
    # 25 model seconds of extra prefill at 50x speed: about 0.5 s of TTFT per canary request
    fault = "slow-prefill=25,slow-after=6,slow-for=12"
    rule = ('[[alerts]]\nname = "slow-ttft"\nkind = "threshold"\nmetric = "canary.ttft_s"\nop = ">"\n'
            'value = 0.3\nwindow_s = 1.5\nfor_s = 0.5\n')
    receivers = (f'webhook_url = "{hook.url}"\nalertmanager_url = "{am.url}"\ndefaults = false\n')
    proc, log, url = _collect(tmp_path, fault, alerting=receivers, extra=rule)
    try:
        engine = make_engine(url)
        fired = wait_for(lambda: [a for a in repo.list_alerts(engine) if a.rule == "slow-ttft" and a.fired_at],
                         timeout=180, what="the slow-ttft alert firing", poll_s=0.25)[-1]
        resolved = wait_for(lambda: next((a for a in repo.list_alerts(engine, since=0.0)
                                          if a.id == fired.id and a.state == "resolved"), None),
                            timeout=180, what="the slow-ttft alert resolving", poll_s=0.25)
        slow = repo.sample_points(engine, server_id=fired.server_id, metric="canary.ttft_s", since=0.0)
        first_slow = next(float(t) for t, v in zip(*slow, strict=True) if v > 0.3)
        print(f"\nslow-ttft: fired {fired.fired_at - first_slow:.2f} s after the first canary TTFT "
              f"over 0.3 s; resolved at {resolved.resolved_at - fired.fired_at:.2f} s after firing")
        _wait(lambda: [a["status"] for a in hook.alerts()] == ["firing", "resolved"], "webhook: firing then resolved")
        _wait(lambda: {a["status"] for a in am_hook.alerts()} == {"firing", "resolved"},
              "Alertmanager's receiver: firing then resolved")
        assert [a["labels"]["alertname"] for a in hook.alerts()] == ["slow-ttft", "slow-ttft"]
        assert [a["status"] for a in am_hook.alerts() if a["status"] == "firing"] == ["firing"]  # once
        engine.dispose()
    finally:
        stop_group(proc)
        log.close()
        am.stop()
        hook.stop()
        am_hook.stop()


def _wait(predicate, what: str) -> None:
    wait_for(lambda: predicate() or None, timeout=60, what=what, poll_s=0.25)
