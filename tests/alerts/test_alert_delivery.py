"""Alert delivery against a real Alertmanager (prometheus-alertmanager, skipped with the reason
when absent: scripts/system_deps.sh installs it) and a webhook on loopback, over a real SQLite
file: a fault fires once to both and resolves; a relaunch Pitwall started fires nothing; a
silence holds notifications; a receiver that was down gets every alert once it is back."""

from __future__ import annotations

import time

import pytest
from alert_receivers import AM_BINARY, Alertmanager, Webhook, wait_for

from runner.alerts.deliver import Receiver, Sender
from runner.alerts.engine import AlertConfig, AlertEvaluator
from runner.alerts.rules import build_rules
from storage import repo

needs_am = pytest.mark.skipif(AM_BINARY is None, reason="prometheus-alertmanager is not installed "
                              "(scripts/system_deps.sh installs it: apt-get install prometheus-alertmanager)")


def _evaluator(engine, receivers: list[Receiver]) -> AlertEvaluator:
    rules = [r for r in build_rules([]) if r.kind == "event" and r.event in ("crash", "oom", "nccl_timeout",
                                                                          "relaunch_failed")]
    return AlertEvaluator(engine, rules, config=AlertConfig(receivers=tuple(r.name for r in receivers)),
                          slo_targets=lambda _name: {})


def _server(engine, name: str = "prod-a") -> int:
    server = repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:1", managed=True)
    assert server.id is not None
    return server.id


def _event(engine, sid: int, kind: str, ts: float) -> None:
    repo.add_event(engine, kind=kind, server_id=sid, message=f"{kind} for the test", severity="error", ts=ts)


#: a delivery's total deadline: a receiver that is up answers at once, a loaded host may need
#: more; one that is down is refused at once whatever the deadline
POST_S = 20.0

@pytest.fixture
def hook():
    h = Webhook().start()
    yield h
    h.stop()


@pytest.mark.integration
@needs_am
def test_crash_reaches_alertmanager_and_webhook_once_and_resolves(engine, tmp_path, hook) -> None:
    am_hook = Webhook().start()
    am = Alertmanager(tmp_path, am_hook)
    try:
        receivers = [Receiver("alertmanager", am.url), Receiver("webhook", hook.url, token="S3CRET-TOKEN")]
        evaluator, sender = _evaluator(engine, receivers), Sender(engine, receivers, deadline_s=POST_S)
        sid = _server(engine)
        t0 = time.time() - 30  # the passes' clock stays behind the wall clock: endsAt is then past
        _event(engine, sid, "crash", t0 - 1)
        for i in range(3):  # three passes: one notification, not three
            evaluator.evaluate(t0 + i)
            sender.send(t0 + i)
        fired = hook.alerts()
        assert [(a["status"], a["labels"]["alertname"], a["labels"]["server"]) for a in fired] == [
            ("firing", "crash", "prod-a")]
        assert "crash" in fired[0]["annotations"]["summary"]
        assert hook.headers[0]["Authorization"] == "Bearer S3CRET-TOKEN"
        wait_for(lambda: any(a["labels"]["alertname"] == "crash" for a in am.active()), what="Alertmanager to hold it")
        wait_for(lambda: am_hook.alerts(), what="Alertmanager's own notification")
        _event(engine, sid, "server_ready", t0 + 3)
        evaluator.evaluate(t0 + 4)
        sender.send(t0 + 4)
        assert [a["status"] for a in hook.alerts()] == ["firing", "resolved"]
        wait_for(lambda: not am.active(), what="Alertmanager to resolve it")
        wait_for(lambda: any(a["status"] == "resolved" for a in am_hook.alerts()), what="resolved from Alertmanager")
        am_firing = [a for a in am_hook.alerts() if a["status"] == "firing"]
        assert len(am_firing) == 1 and am_firing[0]["labels"]["server"] == "prod-a"
        assert not repo.outbox_summary(engine)  # everything delivered, nothing left queued
        history = repo.list_alerts(engine)
        assert [(h.rule, h.state) for h in history] == [("crash", "resolved")]
    finally:
        am.stop()
        am_hook.stop()


def test_a_relaunch_pitwall_started_fires_nothing_and_a_failed_one_does(engine, hook) -> None:
    receivers = [Receiver("webhook", hook.url)]
    evaluator, sender = _evaluator(engine, receivers), Sender(engine, receivers)
    sid = _server(engine)
    t0 = time.time()
    intent = repo.create_intent(engine, kind="relaunch", server_id=sid, payload={}, requested_by="operator")
    repo.update_intent(engine, intent_id=intent.id, state="done", created_at=t0 - 6, started_at=t0 - 5,
                       finished_at=t0 - 2)
    _event(engine, sid, "server_exit", t0 - 4)  # the planned stop of the old process
    evaluator.evaluate(t0)
    sender.send(t0)
    assert hook.bodies == [] and repo.list_alerts(engine) == []
    # a failed relaunch of another server: its exit is not inhibited and relaunch_failed fires
    other = _server(engine, "prod-b")
    bad = repo.create_intent(engine, kind="relaunch", server_id=other, payload={}, requested_by="operator")
    repo.update_intent(engine, intent_id=bad.id, state="failed", created_at=t0 - 6, started_at=t0 - 5,
                       finished_at=t0 - 1)
    _event(engine, other, "server_exit", t0 - 4)
    _event(engine, other, "relaunch_failed", t0 - 1)
    evaluator.evaluate(t0 + 1)
    sender.send(t0 + 1)
    assert sorted(a["labels"]["alertname"] for a in hook.alerts()) == ["crash", "relaunch-failed"]
    assert {a["labels"]["server"] for a in hook.alerts()} == {"prod-b"}


def test_a_silence_holds_notifications_until_it_ends(engine, hook) -> None:
    receivers = [Receiver("webhook", hook.url)]
    evaluator, sender = _evaluator(engine, receivers), Sender(engine, receivers)
    sid = _server(engine)
    t0 = time.time()
    silence = repo.add_silence(engine, rule="crash", server="prod-a", ends_at=t0 + 3600, reason="known",
                               created_by="op", starts_at=t0 - 10)
    _event(engine, sid, "crash", t0 - 1)
    evaluator.evaluate(t0)
    sender.send(t0)
    assert hook.bodies == [] and [a.state for a in repo.list_alerts(engine)] == ["firing"]
    assert repo.expire_silence(engine, silence_id=silence.id, actor="op")
    evaluator.evaluate(t0 + 1)
    sender.send(t0 + 1)
    assert [a["status"] for a in hook.alerts()] == ["firing"]


def test_a_receiver_that_was_down_gets_every_alert_when_back(engine) -> None:
    hook = Webhook()  # not listening yet: connection refused
    receivers = [Receiver("webhook", hook.url, format="json")]
    evaluator = _evaluator(engine, receivers)
    sender = Sender(engine, receivers, deadline_s=POST_S, backoff_s=5.0, max_backoff_s=60.0)
    t0 = time.time()
    servers = [_server(engine, f"s{i}") for i in range(3)]
    for i, sid in enumerate(servers):
        _event(engine, sid, ("crash", "oom", "nccl_timeout")[i], t0 - 1)
    # two minutes of the receiver being down, one pass every 15 s (simulated clock)
    for step in range(9):
        now = t0 + 15 * step
        evaluator.evaluate(now)
        assert sender.send(now) == {"webhook": 0}
    queued = repo.outbox_summary(engine)["webhook"]
    assert queued["queued"] == 3 and queued["max_attempts"] >= 2
    assert "SECRETPATH" not in (queued["last_error"] or "")  # the webhook's path is its credential
    hook.start()
    try:
        assert sender.send(t0 + 15 * 9 + 120) == {"webhook": 3}
        got = [(a["labels"]["alertname"], a["labels"]["server"]) for a in hook.alerts()]
        assert got == [("crash", "s0"), ("oom", "s1"), ("nccl-timeout", "s2")]
        assert sender.send(t0 + 15 * 9 + 121) == {"webhook": 0}  # once each
    finally:
        hook.stop()


def test_the_outbox_bound_drops_the_oldest_and_says_so(engine) -> None:
    rows = [{"receiver": "webhook", "fingerprint": f"r:{i}", "status": "firing", "payload": {"n": i}}
            for i in range(5)]
    assert repo.enqueue_notifications(engine, rows=rows, max_rows=3) == {"webhook": 2}
    left = repo.due_notifications(engine, receiver="webhook", now=time.time() + 1)
    assert [r.payload["n"] for r in left] == [2, 3, 4]


def test_slack_text_and_alertmanager_body() -> None:
    from runner.alerts.deliver import render

    payload = {"status": "firing", "labels": {"alertname": "crash", "server": "a", "severity": "critical"},
               "annotations": {"summary": "crash: 1 in the last 60 min"}, "starts_at": 1_700_000_000.0,
               "ends_at": None, "generator_url": "http://127.0.0.1:8501/server?server=a"}
    text = render(Receiver("webhook", "http://x", format="slack"), [payload], now=1_700_000_010.0, expire_s=300)
    assert text == {"text": "[CRITICAL] crash on a: crash: 1 in the last 60 min "
                            "<http://127.0.0.1:8501/server?server=a|Server page>"}
    am = render(Receiver("alertmanager", "http://x"), [payload], now=1_700_000_010.0, expire_s=300)
    assert am[0]["startsAt"] == "2023-11-14T22:13:20Z" and am[0]["endsAt"] == "2023-11-14T22:18:30Z"


def test_a_pass_judges_only_events_up_to_its_own_clock(engine) -> None:
    """A pass at `now` must not see an event written after it began (the supervisor writes
    `server_ready` from another thread while a pass runs): otherwise the episode resolves at a
    time before the event that cleared it."""
    evaluator = _evaluator(engine, [])
    sid = _server(engine)
    t0 = time.time()
    _event(engine, sid, "oom", t0 - 5)
    evaluator.evaluate(t0)
    _event(engine, sid, "server_ready", t0 + 0.5)  # written while the pass at t0 + 0.25 ran
    evaluator.evaluate(t0 + 0.25)
    assert [a.state for a in repo.list_alerts(engine)] == ["firing"]
    evaluator.evaluate(t0 + 1)
    [alert] = repo.list_alerts(engine, since=0.0)
    assert alert.state == "resolved" and alert.resolved_at >= t0 + 0.5


def test_every_default_rule_evaluates_and_metric_drift_fires_only_when_a_figure_lost_its_input(engine, caplog) -> None:
    """Each default rule is judged on a server without raising (a rule the evaluator cannot read
    is a silent hole: it only logs); a drift event that left a figure without input fires
    metric-drift, a rename Pitwall reads through (info) does not."""
    evaluator = AlertEvaluator(engine, build_rules([]), config=AlertConfig(receivers=()), slo_targets=lambda _name: {})
    sid = _server(engine)
    t0 = time.time()
    repo.add_event(engine, kind="metric_drift", server_id=sid, severity="info", ts=t0 - 5,
                   message="sglang:time_per_output_token_seconds is no longer exported; Pitwall now reads "
                           "sglang:inter_token_latency_seconds", severity_reason="a rename Pitwall reads")
    with caplog.at_level("WARNING", logger="pitwall.alerts"):
        evaluator.evaluate(t0)
    assert not [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]

    def drift() -> list[tuple[str, str]]:
        return [(a.rule, a.state) for a in repo.list_alerts(engine) if a.rule == "metric-drift"]

    assert drift() == []
    repo.add_event(engine, kind="metric_drift", server_id=sid, ts=t0 + 1,
                   message="sglang:num_queue_reqs is no longer exported. It fed chart 'Running batch and queue'.")
    evaluator.evaluate(t0 + 2)
    assert drift() == [("metric-drift", "firing")]
