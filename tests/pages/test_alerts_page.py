"""AppTest of the Alerts page, the sidebar's firing count and Overview's alert line.

The alert is real: an `oom` event on a real SQLite file, evaluated by the same evaluator the
runner runs (cli/wiring.py), so the page reads what the runner wrote."""

from __future__ import annotations

import time

from pwtest import run_page

from cli.wiring import build_evaluator
from config.settings import load_settings
from storage import repo
from storage.db import make_engine

PAGE = "dashboard/pages/alerts.py"


def _fire(env) -> None:
    """prod-a with an OOM a second ago and one evaluation pass: `oom` fires on prod-a."""
    engine = make_engine(env["PITWALL_DATABASE_URL"])
    server = repo.upsert_server(engine, name="prod-a", base_url="http://127.0.0.1:1")
    repo.upsert_server(engine, name="prod-b", base_url="http://127.0.0.1:2")
    repo.add_event(engine, kind="oom", server_id=server.id, message="CUDA out of memory", severity="error",
                   ts=time.time() - 1)
    build_evaluator(load_settings(), engine).evaluate()
    engine.dispose()


def _tables(at) -> list:
    return [d.value for d in at.dataframe]


def test_firing_alert_rules_and_silence_lifecycle(app_env):
    _fire(app_env)
    at = run_page(PAGE)
    assert not at.exception, [e.value for e in at.exception]
    tables = _tables(at)
    open_rows = next(t for t in tables if "summary" in t.columns and "resolved (UTC)" not in t.columns)
    row = open_rows[open_rows["rule"] == "oom"].iloc[0]
    assert row["state"] == "firing" and row["server"] == "prod-a" and not row["silenced"]
    assert "server?server=prod-a" in row["server page"]
    rules = next(t for t in tables if "last evaluation (UTC)" in t.columns)
    oom = rules[rules["rule"] == "oom"].iloc[0]
    assert oom["last evaluation (UTC)"] != "never" and oom["active on"] == "prod-a"
    firing = int((open_rows["state"] == "firing").sum())  # the dead man's switch fires too (no samples)
    assert any(f"{firing} firing]" in str(m.value) for m in at.sidebar.markdown), "no firing count in the sidebar"

    # a silence without a reason is refused with what to give; nothing is written
    at.selectbox(key="al_sil_server").set_value("prod-a")
    submit = next(b for b in at.button if b.label == "Silence")
    submit.click().run()
    assert any("needs a reason" in str(e.value) for e in at.error)
    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    assert repo.list_silences(engine) == []

    at.text_input(key="al_sil_reason").input("known OOM, fix deploying")
    next(b for b in at.button if b.label == "Silence").click().run()
    assert not at.exception, [e.value for e in at.exception]
    active = repo.list_silences(engine, active_at=time.time())
    assert len(active) == 1 and active[0].server == "prod-a" and active[0].rule is None
    assert active[0].reason == "known OOM, fix deploying"
    assert [a.action for a in repo.list_audit(engine)][:1] == ["alert_silence"]
    tables = _tables(at)
    open_rows = next(t for t in tables if "summary" in t.columns and "resolved (UTC)" not in t.columns)
    assert bool(open_rows[open_rows["rule"] == "oom"].iloc[0]["silenced"])
    sil = next(t for t in tables if "reason" in t.columns and "by" in t.columns)
    assert list(sil["state"]) == ["active"]

    at.button(key="al_expire").click().run()
    assert repo.list_silences(engine, active_at=time.time()) == []
    assert [a.action for a in repo.list_audit(engine)][:1] == ["alert_unsilence"]
    sil = next(t for t in _tables(at) if "reason" in t.columns and "by" in t.columns)
    assert list(sil["state"]) == ["expired"]
    engine.dispose()


def test_silences_need_an_operator_sign_in(app_env, monkeypatch):
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret-operator")
    _fire(app_env)
    at = run_page(PAGE)
    assert not at.exception, [e.value for e in at.exception]
    labels = {b.label for b in at.button}
    assert "Silence" not in labels and "Expire now" not in labels
    assert "Save rule" not in labels and "Add rule" not in labels
    assert any("Sign in as an operator" in str(m.value) for m in [*at.markdown, *at.caption, *at.subheader]) or \
        any(ti.label.lower().startswith("password") for ti in at.text_input)


def test_overview_card_shows_the_firing_alert(app_env):
    _fire(app_env)
    at = run_page("dashboard/pages/overview.py")
    assert not at.exception, [e.value for e in at.exception]
    errors = [str(e.value) for e in at.error]
    assert any("**oom**" in e for e in errors), errors


def test_nothing_firing_reads_so(app_env):
    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    repo.upsert_server(engine, name="prod-a", base_url="http://127.0.0.1:1")
    engine.dispose()
    at = run_page(PAGE)
    assert not at.exception, [e.value for e in at.exception]
    assert any("Nothing is firing" in str(s.value) for s in at.success)
    assert not any("firing]" in str(m.value) for m in at.sidebar.markdown)


def _rules_table(at):
    return next(t for t in _tables(at) if "last evaluation (UTC)" in t.columns)


def test_operator_edits_and_adds_rules_audited(app_env):
    _fire(app_env)
    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    at = run_page(PAGE)
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="al_rule_pick").set_value("kv-cache-full").run()

    # a bad value gets the [[alerts]] parser's message and nothing is stored
    at.number_input(key="al_rule_for_kv-cache-full").set_value(-5.0)
    next(b for b in at.button if b.label == "Save rule").click().run()
    assert any("must be >= 0" in str(e.value) for e in at.error), [e.value for e in at.error]
    assert repo.load_state(engine, key="alerts:rules") is None
    assert not [a for a in repo.list_audit(engine) if a.action.startswith("alert_rule")]

    at.number_input(key="al_rule_for_kv-cache-full").set_value(600.0)
    at.number_input(key="al_rule_value_kv-cache-full").set_value(0.9)
    next(b for b in at.button if b.label == "Save rule").click().run()
    assert not at.exception, [e.value for e in at.exception]
    audit = repo.list_audit(engine)[0]
    assert audit.action == "alert_rule_edit" and audit.target == "kv-cache-full"
    assert audit.detail == {"before": {"for_s": 300.0, "value": 0.98}, "after": {"for_s": 600.0, "value": 0.9}}
    row = _rules_table(at).set_index("rule").loc["kv-cache-full"]
    assert row["from"] == "page edit" and row["for"] == "10 min" and row["what"] == "kv_usage >= 0.9"

    # a new rule as TOML: a bad one is refused with the parser's message, a good one is listed
    at.text_area(key="al_rule_new").input('name = "queue-deep"\nkind = "threshold"\nop = ">"')
    next(b for b in at.button if b.label == "Add rule").click().run()
    assert any("metric is missing" in str(e.value) for e in at.error), [e.value for e in at.error]
    assert "queue-deep" not in set(_rules_table(at)["rule"])
    at.text_area(key="al_rule_new").input('name = "queue-deep"\nkind = "threshold"\nmetric = "queue_max"\n'
                                          'value = 64\nenabled = false')
    next(b for b in at.button if b.label == "Add rule").click().run()
    assert not at.exception, [e.value for e in at.exception]
    row = _rules_table(at).set_index("rule").loc["queue-deep"]
    assert row["from"] == "added on page" and not bool(row["on"])
    assert repo.list_audit(engine)[0].action == "alert_rule_add"

    at.selectbox(key="al_rule_pick").set_value("queue-deep").run()
    at.button(key="al_rule_remove").click().run()
    assert "queue-deep" not in set(_rules_table(at)["rule"])
    assert repo.list_audit(engine)[0].action == "alert_rule_delete"
    engine.dispose()
