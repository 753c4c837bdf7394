"""AppTest of the access rules (components/auth.py) on real pages: with a password set, loopback
is not trusted; the viewer password gates every page; failed sign-ins back off; sign-ins expire;
a foreign Host header is refused; the runner is started only for an operator; OIDC logins count.

Time is a patched clock (`auth._now`), never a sleep: the tests assert rules, not timing.
"""

from __future__ import annotations

import sys
import time

import pytest
from pwtest import REPO
from streamlit.testing.v1 import AppTest

from dashboard.components import auth

APP = str(REPO / "app.py")
PROFILES = "dashboard/pages/profiles.py"
BENCH = "dashboard/pages/benchmarks.py"
COMPARE = "dashboard/pages/compare.py"
PROFILE = 'name = "{n}"\nmodel_path = "org/m"\nentrypoint = "simulator.launch_server"\n[flags]\nmax-running-requests = {m}\n'
CONTROLS = {"Validate", "Relaunch…", "Stop…", "Save profile", "Save TOML"}


@pytest.fixture
def site(app_env, tmp_path, monkeypatch):
    """A managed server `sim` running profile `one` (profile `two` beside it); no password yet."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "one.toml").write_text(PROFILE.format(n="one", m=8))
    (folder / "two.toml").write_text(PROFILE.format(n="two", m=16))
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    from launching import profiles
    from storage import repo
    from storage.db import make_engine

    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    srv = repo.upsert_server(engine, name="sim", base_url="http://127.0.0.1:9", managed=True,
                             python=sys.executable, profile="one")
    row = profiles.mirror(engine, profiles.load_file(folder / "one.toml"))
    repo.create_launch(engine, server_id=srv.id, profile_id=row.id, profile_name="one", profile_hash=row.content_hash,
                       argv=["py"], env={}, pid=None, status="ready", ready_at=1.0, started_at=0.0)
    yield engine
    engine.dispose()


def _open(page: str | None = PROFILES, at: AppTest | None = None) -> AppTest:
    if at is None:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["server"] = "sim"
        at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _text(at: AppTest) -> str:
    kinds = ("markdown", "caption", "info", "warning", "error", "success", "title")
    return "\n".join(str(getattr(el, "value", "")) for k in kinds for el in getattr(at, k)).replace("\\", "")


def _enabled(at: AppTest) -> set[str]:
    return {b.label for b in [*at.button, *at.get("form_submit_button")] if not getattr(b.proto, "disabled", False)}


def _sign_in(at: AppTest, name: str, password: str) -> AppTest:
    at.text_input(key=_field(at, "name")).set_value(name)
    at.text_input(key=_field(at, "password")).set_value(password)
    next(b for b in at.get("form_submit_button") if b.label == "Sign in").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _field(at: AppTest, which: str) -> str:
    keys = [t.key for t in at.text_input if t.key and t.key.startswith("pw_signin_")]
    return next(k for k in keys if k.endswith(f"_{which}"))


def _password_fields(at: AppTest) -> int:
    return sum(1 for t in at.text_input if t.proto.type == t.proto.PASSWORD)


def _clock(monkeypatch, at_s: float) -> None:
    monkeypatch.setattr(auth, "_now", lambda: at_s)


# -- password set, loopback ---------------------------------------------------------------------


def test_password_on_loopback_needs_a_sign_in_for_every_control(site, monkeypatch):
    """The dashboard is bound to 127.0.0.1 (conftest), yet with a password nobody is "local"."""
    from storage import repo

    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    at = _open()
    assert _password_fields(at) == 1
    assert CONTROLS.isdisjoint(_enabled(at))
    assert {"Validate", "Relaunch…", "Stop…"} <= {b.label for b in at.button}  # drawn disabled
    at = _sign_in(at, "alice", "s3cret")
    assert "Signed in as **alice** (operator)" in _text(at)
    assert CONTROLS <= _enabled(at)
    next(b for b in at.button if b.label == "Validate").click().run()
    at.selectbox[1].set_value("two").run()
    next(b for b in at.button if b.label == "Relaunch…").click().run()
    next(b for b in at.button if b.label == "Relaunch now").click().run()
    assert [(a.actor, a.action) for a in repo.list_audit(site)] == [("alice", "relaunch"), ("alice", "validate_request")]
    assert {i.requested_by for i in repo.list_intents(site)} == {"alice"}


def test_relaunch_takes_the_profile_picked_when_the_click_arrives(site):
    """A pick and a click on Relaunch… reaching the server together (the click lands on the
    button of the run before the pick): the dialog and the request name the new pick."""
    from storage import repo

    at = _open()
    at.selectbox[1].set_value("two")
    next(b for b in at.button if b.label == "Relaunch…").click().run()  # one run: pick + click
    assert "under profile **two**" in " ".join(m.value for m in at.markdown)
    next(b for b in at.button if b.label == "Relaunch now").click().run()
    [intent] = [i for i in repo.list_intents(site) if i.kind == "relaunch"]
    assert intent.payload["profile"] == "two"


def test_no_credential_on_loopback_says_controls_are_open(site):
    at = _open()
    assert "No password is set, so anyone who reaches this dashboard from this machine" in _text(at)
    assert CONTROLS <= _enabled(at)
    assert _password_fields(at) == 0
    at = _open("dashboard/pages/about.py", at)
    assert "Access: no password: controls open to anyone on loopback" in _text(at)


def test_about_page_says_who_may_do_what(site, monkeypatch):
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    monkeypatch.setenv("PITWALL_ALLOWED_HOSTS", "pitwall.example.com")
    at = _open("dashboard/pages/about.py")
    assert ("Access: controls need an operator sign-in from any address; pages open to anyone who "
            "reaches them; sign-ins last 8 h; extra allowed host names: pitwall.example.com.") in _text(at)


def test_sweep_start_needs_an_operator_and_is_audited(site, monkeypatch):
    from storage import repo

    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    at = _open(BENCH)
    assert "Start sweep…" not in {b.label for b in at.get("form_submit_button")}
    at = _sign_in(at, "bob", "s3cret")
    at.text_input(key="bm_levels").set_value("1,2")
    next(b for b in at.get("form_submit_button") if b.label == "Start sweep…").click().run()
    at.button(key="bm_confirm").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (intent,) = repo.list_intents(site, kinds=["probe"])
    assert intent.requested_by == "bob"
    (audit,) = repo.list_audit(site)
    assert (audit.actor, audit.action, audit.target) == ("bob", "sweep_start", "sim")
    assert audit.detail["levels"] == [1, 2]


def test_slo_target_save_needs_an_operator(site, monkeypatch):
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    at = _open(COMPARE)
    save = next(b for b in at.get("form_submit_button") if b.label == "Save target")
    assert save.proto.disabled
    at = _sign_in(at, "carol", "s3cret")
    save = next(b for b in at.get("form_submit_button") if b.label == "Save target")
    assert not save.proto.disabled


# -- viewer password ----------------------------------------------------------------------------


def test_viewer_password_gates_every_page_and_gives_no_controls(site, monkeypatch):
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    monkeypatch.setenv("PITWALL_VIEWER_PASSWORD", "look")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    assert "Sign in to see this dashboard" in _text(at)
    assert "Overview" not in [t.value for t in at.title]
    at = _open(PROFILES, at)  # another page: the same gate, nothing of the page
    assert "Profiles" not in [t.value for t in at.title] and not at.dataframe
    at = _sign_in(at, "vic", "look")
    assert "Profiles" in [t.value for t in at.title]
    assert "Signed in as **vic** (viewer)" in _text(at)
    assert CONTROLS.isdisjoint(_enabled(at))
    assert _password_fields(at) == 1  # the operator sign-in is offered


def test_operator_password_passes_the_viewer_gate_as_operator(site, monkeypatch):
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    monkeypatch.setenv("PITWALL_VIEWER_PASSWORD", "look")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at = _sign_in(at, "alice", "s3cret")
    at = _open(PROFILES, at)
    assert CONTROLS <= _enabled(at)


def test_viewer_password_alone_turns_loopback_trust_off(site, monkeypatch):
    monkeypatch.setenv("PITWALL_VIEWER_PASSWORD", "look")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at = _sign_in(at, "vic", "look")
    at = _open(PROFILES, at)
    assert "Controls are off: no operator password is set" in _text(at)
    assert CONTROLS.isdisjoint(_enabled(at))


# -- back-off and expiry --------------------------------------------------------------------------


def test_failed_sign_ins_back_off_per_session_and_per_process(site, monkeypatch):
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    t0 = time.time()
    _clock(monkeypatch, t0)
    at = _sign_in(_open(), "mallory", "guess-1")
    assert "Wrong password; the next attempt is possible in 2 s." in _text(at)
    _clock(monkeypatch, t0 + 3)  # past 2 s: a second guess is checked, and fails
    at = _sign_in(at, "mallory", "guess-2")
    assert "next attempt is possible in 4 s" in _text(at)
    _clock(monkeypatch, t0 + 4)  # 1 s after the second failure: refused without a check
    at = _sign_in(at, "alice", "s3cret")
    assert "Too many failed sign-ins: try again in 3 s." in _text(at)
    assert CONTROLS.isdisjoint(_enabled(at))
    fresh = _sign_in(_open(), "alice", "s3cret")  # a new browser session: the process counts too
    assert "Too many failed sign-ins" in _text(fresh)
    _clock(monkeypatch, t0 + 7.5)  # the 4 s have passed
    fresh = _sign_in(fresh, "alice", "s3cret")
    assert CONTROLS <= _enabled(fresh)
    # alice's success reset the process count, not the guessing session's own: its third
    # failure waits 2**3 = 8 s; a failure from a new session is the process's second since the
    # reset (guess-3, guess-4): 2**2 = 4 s
    at = _sign_in(at, "mallory", "guess-3")
    assert "next attempt is possible in 8 s" in _text(at)
    _clock(monkeypatch, t0 + 20)
    other = _sign_in(_open(), "mallory", "guess-4")
    assert "next attempt is possible in 4 s" in _text(other)


def test_backoff_is_capped_at_a_minute():
    assert [auth.backoff_s(n) for n in range(8)] == [0, 2, 4, 8, 16, 32, 60, 60]
    b = auth.Backoff()
    assert b.wait_s(100.0) == 0.0
    b.fail(100.0)
    b.fail(100.0)
    assert b.wait_s(101.0) == 3.0 and b.wait_s(104.0) == 0.0
    b.reset()
    assert b.failures == 0


def test_a_sign_in_expires_after_session_ttl(site, monkeypatch):
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    monkeypatch.setenv("PITWALL_SESSION_TTL_S", "3600")
    t0 = time.time()
    _clock(monkeypatch, t0)
    at = _sign_in(_open(), "alice", "s3cret")
    assert CONTROLS <= _enabled(at)
    _clock(monkeypatch, t0 + 3599)
    at.run()
    assert CONTROLS <= _enabled(at)
    _clock(monkeypatch, t0 + 3601)
    at.run()
    assert CONTROLS.isdisjoint(_enabled(at))
    assert "Your sign-in expired after 1 h; sign in again." in _text(at)


# -- host check, runner start, OIDC -----------------------------------------------------------------


def test_a_foreign_host_header_is_refused(site, monkeypatch):
    monkeypatch.setattr(auth, "_request_host", lambda: "rebind.attacker.example:8501")
    at = _open(None)
    assert "This dashboard does not answer to that host name" in _text(at)
    assert not at.title and not at.button
    monkeypatch.setenv("PITWALL_ALLOWED_HOSTS", "pitwall.example.com, rebind.attacker.example")
    import streamlit as st

    st.cache_resource.clear()  # settings are read once per process
    at = _open(None)
    assert "Overview" in [t.value for t in at.title]


def test_the_runner_is_started_only_for_an_operator(site, monkeypatch):
    from dashboard.services.views import health

    started: list[str] = []
    monkeypatch.delenv("PITWALL_MANAGED_RUNNER", raising=False)
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    monkeypatch.setattr(health, "runner_alive", lambda engine, **kw: False)
    monkeypatch.setattr(health, "start_runner_detached", lambda root: started.append(root))
    from storage import repo

    at = _open()
    assert started == [] and repo.list_audit(site) == []
    _sign_in(at, "alice", "s3cret")
    assert len(started) == 1
    assert [(a.actor, a.action) for a in repo.list_audit(site)] == [("alice", "runner_start")]


def test_an_oidc_login_is_an_operator_until_its_token_is_too_old(site, monkeypatch):
    now = time.time()
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32}
    at.user = {"is_logged_in": True, "email": "ops@example.com", "iat": now - 60}
    at.query_params["server"] = "sim"
    at.run()
    at = _open(PROFILES, at)
    assert "Signed in as **ops@example.com** (operator)" in _text(at)
    assert CONTROLS <= _enabled(at)
    at.user = {"is_logged_in": True, "email": "ops@example.com", "iat": now - 9 * 3600}
    at.run()
    assert CONTROLS.isdisjoint(_enabled(at))
    assert "Sign in with your identity provider" in {b.label for b in at.button}
