"""Alert rules edited on the Alerts page reach the runner without a restart: the evaluator that
cli/wiring.py builds re-reads the stored edits at every pass. Real SQLite
file, real settings from a pitwall.toml, the same evaluator the runner runs."""

from __future__ import annotations

import time

import pytest

from cli.wiring import build_evaluator
from config.settings import load_settings
from dashboard.services.alerts import rule_edits
from runner.alerts.rules import AlertRuleError, build_rules, merge_edits
from storage import repo

QUEUE_RULE = ('[[alerts]]\nname = "queue-deep"\nkind = "threshold"\nmetric = "queue_max"\nop = ">"\n'
              'value = 50\nwindow_s = 60\n')


@pytest.fixture
def settings(tmp_path):
    (tmp_path / "pitwall.toml").write_text(QUEUE_RULE, encoding="utf-8")
    return load_settings(env={"PITWALL_CONFIG": str(tmp_path / "pitwall.toml"), "PITWALL_DEMO": "off",
                              "PITWALL_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)


def _queue(engine, depth: float) -> int:
    server = repo.upsert_server(engine, name="prod-a", base_url="http://127.0.0.1:1")
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=[{"ts": time.time() - 5, "server_id": server.id, "launch_id": None,
                                         "source": "log", "metric": "log.queue_req", "value": depth}])
    return int(server.id or 0)


def test_an_edited_threshold_changes_the_next_verdict(settings, engine):
    _queue(engine, 30.0)
    evaluator = build_evaluator(settings, engine)  # built once, like the runner's
    first = evaluator.evaluate()["queue-deep"]["servers"]["prod-a"]
    assert first["active"] is False and first["value"] == 30.0

    rule_edits.edit_rule(settings, engine, name="queue-deep", change={"value": 20.0}, actor="alice")
    second = evaluator.evaluate()["queue-deep"]["servers"]["prod-a"]
    assert second["active"] is True, second

    rule_edits.edit_rule(settings, engine, name="queue-deep", change={"enabled": False}, actor="alice")
    assert "queue-deep" not in evaluator.evaluate()
    audit = [(a.action, a.target, a.detail) for a in repo.list_audit(engine)]
    assert ("alert_rule_edit", "queue-deep", {"before": {"value": 50.0}, "after": {"value": 20.0}}) in audit

    assert rule_edits.remove_edit(settings, engine, name="queue-deep", actor="alice") == "reverted to pitwall.toml"
    third = evaluator.evaluate()["queue-deep"]["servers"]["prod-a"]
    assert third["active"] is False


def test_an_added_rule_is_evaluated_and_deleted(settings, engine):
    _queue(engine, 30.0)
    evaluator = build_evaluator(settings, engine)
    assert "queue-shallow" not in evaluator.evaluate()
    rule_edits.add_rule(settings, engine, actor="bob", text=(
        'name = "queue-shallow"\nkind = "threshold"\nmetric = "queue_max"\nop = "<"\nvalue = 40\nseverity = "info"'))
    assert evaluator.evaluate()["queue-shallow"]["servers"]["prod-a"]["active"] is True
    origins = {r.name: o for r, o in rule_edits.effective(settings, engine)}
    assert origins["queue-shallow"] == "added on page" and origins["queue-deep"] == "pitwall.toml"
    assert origins["crash"] == "default"
    assert rule_edits.remove_edit(settings, engine, name="queue-shallow", actor="bob") == "deleted"
    assert "queue-shallow" not in evaluator.evaluate()
    assert [a.action for a in repo.list_audit(engine)][:2] == ["alert_rule_delete", "alert_rule_add"]


@pytest.mark.parametrize(("name", "change", "needle"), [
    ("queue-deep", {"for_s": -5.0}, "must be >= 0"),
    ("crash", {"severity": "loud"}, "severity is 'loud'"),
    ("crash", {"value": 3.0}, "only threshold rules have a value"),
    ("crash", {"metric": "x"}, "cannot be changed here"),
    ("nope", {"for_s": 1.0}, "no alert rule 'nope'"),
])
def test_bad_edits_give_the_parsers_message_and_store_nothing(settings, engine, name, change, needle):
    with pytest.raises(AlertRuleError, match=needle):
        rule_edits.edit_rule(settings, engine, name=name, change=change, actor="alice")
    assert repo.load_state(engine, key="alerts:rules") is None and repo.list_audit(engine) == []


@pytest.mark.parametrize(("text", "needle"), [
    ('name = "x"\nkind = "threshold"\nop = ">"', "metric is missing"),
    ('name = "crash"\nkind = "event"\nevent = "oom"', "exists already"),
    ('name = "x"\nkind = ', "not valid TOML"),
    ('name = "x"\nkind = "event"\nevent = "boom"', "event is 'boom'"),
])
def test_bad_new_rules_are_refused(settings, engine, text, needle):
    with pytest.raises(AlertRuleError, match=needle):
        rule_edits.add_rule(settings, engine, text=text, actor="alice")
    assert repo.load_state(engine, key="alerts:rules") is None


def test_stale_edits_yield_to_the_file():
    """An edit of a rule the file no longer has is skipped; an added rule whose name the file now
    uses gives way to the file's."""
    edits = {"changed": {"gone": {"for_s": 1.0}}, "added": {"queue-deep": {"name": "queue-deep", "kind": "event",
                                                                          "event": "oom"}}}
    file_rules = [{"name": "queue-deep", "kind": "threshold", "metric": "queue_max", "value": 5}]
    rules = build_rules(merge_edits(file_rules, edits))
    assert next(r for r in rules if r.name == "queue-deep").kind == "threshold"
    assert not any(r.name == "gone" for r in rules)
