"""AppTest of dashboard/pages/profiles.py: list, diff, validate, auth rules, relaunch intent + audit."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dashboard.components import auth
from dashboard.components.auth import check_password

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "app.py")
PAGE = "dashboard/pages/profiles.py"
PROFILE = 'name = "{n}"\nmodel_path = "org/m"\nentrypoint = "simulator.launch_server"\n[flags]\nmax-running-requests = {m}\n'


@pytest.fixture
def page_env(data_env, tmp_path, monkeypatch):
    monkeypatch.setenv("PITWALL_MANAGED_RUNNER", "1")  # never start a runner from a test
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "one.toml").write_text(PROFILE.format(n="one", m=8))
    (folder / "two.toml").write_text(PROFILE.format(n="two", m=16))
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    from launching import profiles
    from storage import repo
    from storage.db import make_engine

    engine = make_engine(data_env["PITWALL_DATABASE_URL"])
    srv = repo.upsert_server(engine, name="sim", base_url="http://127.0.0.1:9", managed=True,
                             python=sys.executable, profile="one")
    row = profiles.mirror(engine, profiles.load_file(folder / "one.toml"))
    repo.create_launch(engine, server_id=srv.id, profile_id=row.id, profile_name="one", profile_hash=row.content_hash,
                       argv=["py"], env={}, pid=None, status="ready", ready_at=1.0, started_at=0.0)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield engine
    engine.dispose()
    st.cache_data.clear()
    st.cache_resource.clear()


def _run() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["server"] = "sim"
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _text(at: AppTest) -> str:
    kinds = ("markdown", "caption", "info", "warning", "error", "success", "title")
    return "\n".join(str(getattr(el, "value", "")) for k in kinds for el in getattr(at, k))


def _buttons(at: AppTest) -> list[str]:
    return [b.label for b in at.button]


def _enabled(at: AppTest) -> set[str]:
    """Labels of the buttons and form buttons a person can press (drawn and not disabled)."""
    return {b.label for b in [*at.button, *at.get("form_submit_button")] if not getattr(b.proto, "disabled", False)}


def test_page_lists_profiles_and_diffs_against_running(page_env) -> None:
    at = _run()
    text = _text(at)
    assert "**sim** runs profile **one**" in text
    assert list(at.dataframe[0].value["name"]) == ["one", "two"]
    at.selectbox[1].set_value("two").run()
    assert "running one → two" in _text(at)
    diff = at.dataframe[1].value
    assert list(diff["setting"]) == ["flags.max-running-requests"]
    assert {"Validate", "Relaunch…", "Stop…"} <= set(_buttons(at))


def test_validate_is_an_intent_the_runner_carries_out_with_live_progress(page_env) -> None:
    """Validate returns at once (it only records an intent); the page shows the runner's
    progress while pending, then the verdict the check lane stored (runner/validation.py)."""
    from cli import wiring
    from config.settings import load_settings
    from storage import repo

    at = _run()
    next(b for b in at.button if b.label == "Validate").click().run()
    (intent,) = repo.list_intents(page_env, kinds=["validate"])
    assert intent.state == "pending" and intent.payload == {"profile": "one", "server": "sim"}
    # the request is audited; nothing ran in the page
    assert [(a.actor, a.action, a.target) for a in repo.list_audit(page_env)] == [("local", "validate_request", "one")]
    assert "Validating one" in "\n".join(str(s.label) for s in at.status)
    # the runner's check lane: claim, validate (the real handler, wired as `pitwall collect` does)
    _, handlers = wiring.runner_parts(load_settings(), page_env, auto_start=False)
    claimed = repo.claim_next_intent(page_env, kinds=["validate"])
    assert claimed is not None and claimed.id == intent.id
    handlers["validate"](claimed)
    done = repo.get_intent(page_env, intent_id=intent.id)
    assert done.state == "done" and done.result["ok"] is True, done.message
    at.run()
    assert "one is valid" in _text(at)
    assert [(a.actor, a.action, a.target) for a in repo.list_audit(page_env)] == [
        ("local", "profile_validate", "one"), ("local", "validate_request", "one")]


def test_stop_dialog_records_intent_and_shows_its_progress(page_env) -> None:
    from storage import repo

    at = _run()
    next(b for b in at.button if b.label == "Stop…").click().run()
    next(b for b in at.button if b.label == "Stop now").click().run()
    (intent,) = repo.list_intents(page_env, kinds=["stop"])
    assert intent.state == "pending" and intent.requested_by == "local"
    repo.update_intent(page_env, intent_id=intent.id, state="running",
                       progress={"stage": "stopping", "fraction": 0.4, "detail": "SIGTERM to sim (pid 1)"})
    at.run()
    assert f"Stop R-{intent.id}" in _text(at) and "**stopping**" in _text(at)
    assert at.get("progress") and at.get("progress")[0].proto.text == "SIGTERM to sim (pid 1)"


def test_relaunch_dialog_records_intent_and_audit(page_env) -> None:
    from storage import repo

    at = _run()
    at.selectbox[1].set_value("two").run()
    next(b for b in at.button if b.label == "Relaunch…").click().run()
    assert "Relaunch **sim** under profile **two**?" in _text(at)
    assert "expected downtime about 1 s" in _text(at)
    next(b for b in at.button if b.label == "Relaunch now").click().run()
    (intent,) = repo.list_intents(page_env, kinds=["relaunch"])
    assert intent.payload["profile"] == "two" and intent.requested_by == "local"
    assert [(a.actor, a.action) for a in repo.list_audit(page_env)] == [("local", "relaunch")]
    assert "Relaunch R-" in _text(at)  # the live status panel follows it, by its request name


def test_exposed_without_password_refuses_controls(page_env, monkeypatch) -> None:
    monkeypatch.setenv("PITWALL_HOST", "0.0.0.0")
    at = _run()
    assert "without a password, so every control is disabled" in _text(at)
    assert {"Validate", "Relaunch…", "Stop…", "Save profile", "Save TOML"}.isdisjoint(_enabled(at))


def test_exposed_with_password_requires_sign_in(page_env, monkeypatch) -> None:
    monkeypatch.setenv("PITWALL_HOST", "0.0.0.0")
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    at = _run()
    assert {"Validate", "Relaunch…", "Stop…"} <= set(_buttons(at))  # drawn, but disabled
    assert {"Validate", "Relaunch…", "Stop…"}.isdisjoint(_enabled(at))
    at = _sign_in(at, "alice", "wrong")
    assert "Wrong password" in _text(at)
    later = time.time() + 5  # past the 2 s back-off after one failure (a patched clock, no sleep)
    monkeypatch.setattr(auth, "_now", lambda: later)
    at = _sign_in(at, "alice", "s3cret")
    assert "Signed in as **alice** (operator)" in _text(at)
    assert {"Validate", "Relaunch…", "Stop…", "Save profile", "Save TOML"} <= _enabled(at)


def _sign_in(at: AppTest, name: str, password: str) -> AppTest:
    at.text_input[0].set_value(name)
    at.text_input[1].set_value(password)
    submit = next(b for b in at.get("form_submit_button") if b.label == "Sign in")
    submit.click()
    at.run()
    return at


def test_read_only_hides_every_control(page_env, monkeypatch) -> None:
    monkeypatch.setenv("PITWALL_READ_ONLY", "1")
    at = _run()
    assert "Read-only mode" in _text(at)
    assert {"Relaunch…", "Stop…"}.isdisjoint(_buttons(at))
    assert not [b for b in at.get("form_submit_button") if b.label in ("Save profile", "Save TOML")]


def test_check_password_is_exact() -> None:
    assert check_password("s3cret", "s3cret")
    assert not check_password("s3cret ", "s3cret")
    assert not check_password("", None) and not check_password(None, "x")


def test_unset_streamlit_address_counts_as_exposed(page_env) -> None:
    """`streamlit run app.py` outside the repo binds every interface: controls need a login."""
    from streamlit import config

    config.set_option("server.address", None)
    try:
        at = _run()
        assert {"Validate", "Relaunch…", "Stop…"}.isdisjoint(_enabled(at))
    finally:
        config.set_option("server.address", "127.0.0.1")


def test_auto_restart_policy_and_budget_used_are_shown(page_env, monkeypatch) -> None:
    """The budget is counted from storage (the auto-restart launch intents in the window), so the
    page and a restarted runner see the same count."""
    import time

    from runner.supervisor import AUTO_RESTART_BY
    from storage import repo

    at = _run()
    assert "Auto-restart is off" in _text(at)
    monkeypatch.setenv("PITWALL_AUTO_RESTART", "true")
    sid = repo.get_server(page_env, name="sim").id
    old = repo.create_intent(page_env, kind="launch", server_id=sid, payload={}, requested_by=AUTO_RESTART_BY)
    repo.update_intent(page_env, intent_id=old.id, created_at=time.time() - 7200)  # outside the hour
    repo.create_intent(page_env, kind="launch", server_id=sid, payload={}, requested_by=AUTO_RESTART_BY)
    repo.create_intent(page_env, kind="launch", server_id=sid, payload={}, requested_by="bob")  # not a restart
    st.cache_resource.clear()  # settings are read once per process
    at = _run()
    assert "Auto-restart is on" in _text(at) and "sim has used 1 of 3." in _text(at)


def test_page_warns_what_pitwall_toml_lets_profiles_do(page_env, tmp_path, monkeypatch) -> None:
    assert "beyond the launch sandbox" not in _text(_run())  # nothing allowed: no warning
    cfg = tmp_path / "pitwall.toml"
    cfg.write_text('[launch]\nallow_unsandboxed = ["trust-remote-code", "CUDA_INJECTION64_PATH"]\n')
    monkeypatch.setenv("PITWALL_CONFIG", str(cfg))
    st.cache_data.clear()
    st.cache_resource.clear()  # the settings are read once per process
    warnings = [w.value for w in _run().warning if "beyond the launch sandbox" in w.value]
    assert len(warnings) == 1
    assert "trust-remote-code: allowed although it runs the model repository" in warnings[0]
    assert "CUDA\\_INJECTION64\\_PATH" in warnings[0]


def test_one_numbering_launches_per_server_requests_by_r(page_env) -> None:
    """One page never names one launch two ways (a row id and a request id, "launch #1" and
    "launch #3"): launches are numbered per server ("sim launch 2"), requests read "R-<id>"."""
    from scorecard.compare import launch_choices
    from storage import repo

    other = repo.upsert_server(page_env, name="other", base_url="http://127.0.0.1:8")
    for _ in range(2):  # row ids 2 and 3 belong to another server
        repo.create_launch(page_env, server_id=other.id, profile_id=None, profile_name="x", profile_hash="h",
                           argv=["py"], env={}, pid=None, status="stopped", started_at=0.5)
    sim = repo.get_server(page_env, name="sim")
    latest = repo.create_launch(page_env, server_id=sim.id, profile_id=None, profile_name="one", profile_hash="h",
                                argv=["py"], env={}, pid=None, status="ready", ready_at=2.0, started_at=1.5)
    assert latest.id == 4 and repo.launch_numbers(page_env, [1, 2, 3, 4]) == {1: 1, 2: 1, 3: 2, 4: 2}
    for _ in range(3):  # request ids 1..3, so the relaunch is R-3 while the running launch is sim's 2nd
        intent = repo.create_intent(page_env, kind="relaunch", server_id=sim.id, payload={"profile": "one"},
                                    requested_by="t")
        repo.update_intent(page_env, intent_id=intent.id, state="done", message="ok")
    labels = dict(launch_choices(page_env))
    assert labels[4].startswith("sim launch 2 · one") and labels[3].startswith("other launch 2 ·")
    text = _text(_run())
    assert "sim launch 2" in text and "Relaunch R-3" in text
    assert "launch #" not in text and "relaunch #" not in text
    at = AppTest.from_file(APP, default_timeout=60)  # the Server page's header names it alike
    at.query_params["server"] = "sim"
    at.run()
    at.switch_page("dashboard/pages/server.py")
    at.run()
    assert any(c.value.startswith("sim launch 2: ready") for c in at.caption), [c.value for c in at.caption]


def test_after_a_relaunch_rerun_the_baseline_workload_then_compare(page_env) -> None:
    """After a relaunch, "Rerun the baseline workload" records a sweep of the new launch
    with the workload of the server's last sweep before the relaunch (the Benchmarks path: a
    pending ProbeRun and a probe intent), and once it is done links to Compare with both runs,
    baseline first."""
    from storage import repo

    sim = repo.get_server(page_env, name="sim")
    now = time.time()
    spec = {"url": sim.base_url, "api": "generate", "mode": "concurrency", "levels": [1.0, 4.0], "requests": 12,
            "server_id": sim.id, "launch_id": 1, "name": None,
            "workload": {"prompt_set": "shared-prefix", "max_new_tokens": 32, "input_tokens": 256, "ignore_eos": True}}
    base = repo.create_probe_run(page_env, server_id=sim.id, launch_id=1, url=sim.base_url, api="generate",
                                 spec=spec, status="done", created_at=now - 600)
    repo.create_probe_run(page_env, server_id=sim.id, launch_id=1, url=sim.base_url, api="generate",
                          spec=spec, status="failed", created_at=now - 500)  # not a baseline: it failed
    intent = repo.create_intent(page_env, kind="relaunch", server_id=sim.id, payload={"profile": "two"},
                                requested_by="t")
    repo.update_intent(page_env, intent_id=intent.id, state="done", message="sim is ready under profile two",
                       progress={"stage": "ready", "fraction": 1.0, "detail": "ready"},
                       result={"launch_id": 1, "replaced_launch_id": 1})
    at = _run()
    assert f"run {base.id}: shared-prefix, levels 1, 4, 12 requests a level" in _text(at).replace("\\", "")
    assert not at.get("progress")  # the relaunch is done: no bar left behind
    at.button(key="pw_rerun").click().run()
    assert not at.exception, [e.value for e in at.exception]
    new = repo.list_probe_runs(page_env, server_id=sim.id, limit=1)[0]
    assert new.id != base.id and new.status == "pending" and new.baseline_run_id == base.id
    assert new.spec["levels"] == [1.0, 4.0] and new.spec["requests"] == 12
    assert new.spec["workload"] == {**spec["workload"]} and new.spec["baseline_run_id"] == base.id
    (probe,) = repo.list_intents(page_env, kinds=["probe"])
    assert probe.payload == {"run_id": new.id}
    assert "rerun of the baseline workload" in at.get("progress")[0].proto.text
    repo.update_probe_run(page_env, run_id=new.id, status="done", progress=1.0)
    at.run()
    (link,) = [el for el in at.get("page_link") if "Compare run" in el.proto.label]
    assert link.proto.page.endswith("compare") or "compare" in link.proto.page
    assert f"runs={base.id}%2C{new.id}" in link.proto.query_string or f"runs={base.id},{new.id}" in link.proto.query_string



def test_the_status_panel_is_drawn_where_the_relaunch_was_clicked(page_env) -> None:
    """The status panel is drawn right under the buttons, not above the profiles table and the
    diff, where a click on Relaunch… further down would leave it off-screen."""

    def walk(node):
        yield node
        for child in getattr(node, "children", {}).values():
            yield from walk(child)

    at = _run()
    order = list(walk(at.main))
    button = next(i for i, n in enumerate(order) if getattr(n, "label", None) == "Relaunch…")
    status = next(i for i, n in enumerate(order) if "runs profile" in str(getattr(n, "value", "")))
    table = next(i for i, n in enumerate(order) if type(n).__name__ == "Dataframe")
    assert table < button < status


def test_validate_and_entrypoint_help_name_the_default_engine(page_env) -> None:
    """What checks the flags and which entrypoints a profile may name come from the engine
    (collectors/engines.py), not from the page's own text."""
    from collectors.engines import DEFAULT_ENGINE, get_engine

    engine = get_engine(DEFAULT_ENGINE)
    at = _run()
    validate = next(b for b in at.button if b.label == "Validate")
    assert f"flags ({engine.display_name}'s own parser, or the {engine.bundled_table})" in validate.proto.help
    [entry] = [t for t in at.text_input if t.label == "Entrypoint"]
    assert entry.proto.help == " or ".join(f'"{e}"' for e in engine.entrypoints)
