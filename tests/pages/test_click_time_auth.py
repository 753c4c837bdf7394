"""A sign-in is checked when a control's click arrives, not when the page was drawn.

A live panel (`st.fragment`) or a dialog reruns on its own, without the page's `control_gate`:
a page left open past `session_ttl_s` must not stop a tune, relaunch or stop a server under the
operator of its last full run. AppTest always reruns the whole script, so `_click_in_fragment`
reruns only the fragment, as the browser does when a button inside one is clicked (Streamlit's
own RerunData with `fragment_id_queue`). Time is a patched clock (`auth._now`), never a sleep.
"""

from __future__ import annotations

import re
import time
from typing import Any

import streamlit.testing.v1.local_script_runner as lsr
from pwtest import REPO, run_page
from streamlit.testing.v1 import AppTest
from test_tune_page import PAGE as TUNE
from test_tune_page import _seed

from dashboard.components import auth
from storage import repo
from storage.db import make_engine

TTL_S = 3600.0


def _fragment_id(at: AppTest, name: str) -> str:
    """The id of the fragment whose function is called `name` (its closure holds the function;
    an open st.dialog's is Streamlit's `dialog_content`)."""
    for fid, frag in at._fragment_storage._fragments.items():
        for cell in getattr(frag, "__closure__", None) or ():
            try:
                if getattr(cell.cell_contents, "__name__", None) == name:
                    return fid
            except ValueError:  # an empty cell
                continue
    raise AssertionError(f"no fragment {name!r} registered")


def _click_in_fragment(at: AppTest, monkeypatch: Any, fragment: str, button: Any) -> AppTest:
    """Click `button` and rerun only `fragment` (what the browser does), not the whole page."""
    fid = _fragment_id(at, fragment)
    button.click()
    real = lsr.RerunData
    monkeypatch.setattr(lsr, "RerunData", lambda **kw: real(**kw, fragment_id_queue=[fid]))
    try:
        at.run()
    finally:
        monkeypatch.setattr(lsr, "RerunData", real)
    assert not at.exception, [e.value for e in at.exception]
    return at


def _signed_in(monkeypatch: Any, page: str, t0: float, **params: str) -> AppTest:
    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    monkeypatch.setenv("PITWALL_SESSION_TTL_S", str(TTL_S))
    monkeypatch.setattr(auth, "_now", lambda: t0)
    at = run_page(page, **params)
    at.session_state["pitwall_login"] = auth.Login(name="alice", role=auth.OPERATOR, since=t0)
    at.run()
    assert "Signed in as **alice** (operator)" in " ".join(str(c.value) for c in at.caption)
    return at


def _errors(at: AppTest) -> str:
    return " ".join(str(e.value) for e in at.error)


def test_the_live_panel_cannot_stop_a_tune_after_the_sign_in_expired(app_env, monkeypatch):
    ids = _seed(app_env, running=True)
    t0 = time.time()
    at = _signed_in(monkeypatch, TUNE, t0, server="demo")
    stop = at.button(key=f"tune_stop_{ids['live']}")
    monkeypatch.setattr(auth, "_now", lambda: t0 + TTL_S + 1)  # the page stayed open past the TTL
    at = _click_in_fragment(at, monkeypatch, "progress", stop)
    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    assert repo.get_intent(eng, intent_id=ids["live"]).payload.get("stop") is None
    assert not [a for a in repo.list_audit(eng) if a.action == "tune_stop"]
    assert auth.SIGN_IN_AGAIN in _errors(at)


def test_the_live_panel_stops_a_tune_while_the_sign_in_holds(app_env, monkeypatch):
    ids = _seed(app_env, running=True)
    t0 = time.time()
    at = _signed_in(monkeypatch, TUNE, t0, server="demo")
    monkeypatch.setattr(auth, "_now", lambda: t0 + TTL_S - 1)
    at = _click_in_fragment(at, monkeypatch, "progress", at.button(key=f"tune_stop_{ids['live']}"))
    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    assert repo.get_intent(eng, intent_id=ids["live"]).payload.get("stop") is True
    assert [a.actor for a in repo.list_audit(eng) if a.action == "tune_stop"] == ["alice"]


def test_a_stop_dialog_left_open_past_the_sign_in_records_nothing(app_env, monkeypatch, tmp_path):
    """Profiles: Stop… opens the dialog (a fragment); Stop now arrives after the TTL."""
    import sys

    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    repo.upsert_server(eng, name="sim", base_url="http://127.0.0.1:9", managed=True,
                       python=sys.executable, profile="one")
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "one.toml").write_text('name = "one"\nmodel_path = "org/m"\nentrypoint = "simulator.launch_server"\n')
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    t0 = time.time()
    at = _signed_in(monkeypatch, "dashboard/pages/profiles.py", t0, server="sim")
    next(b for b in at.button if b.label == "Stop…").click().run()
    go = next(b for b in at.button if b.label == "Stop now")
    monkeypatch.setattr(auth, "_now", lambda: t0 + TTL_S + 1)
    at = _click_in_fragment(at, monkeypatch, "dialog_content", go)
    assert not repo.list_intents(eng, kinds=["stop"])
    assert auth.SIGN_IN_AGAIN in _errors(at)


def test_a_download_clicked_after_the_sign_in_expired_is_not_audited_under_it(app_env, monkeypatch):
    """Downloads are made outside the script run: the sign-in drawn with the button is checked
    when the click arrives. Without a viewer gate the export is anonymous ("ui"); with one, no file."""
    from config.settings import load_settings

    monkeypatch.setenv("PITWALL_PASSWORD", "s3cret")
    monkeypatch.setenv("PITWALL_SESSION_TTL_S", str(TTL_S))
    t0 = time.time()
    monkeypatch.setattr(auth, "_now", lambda: t0)
    login = auth.Login(name="alice", role=auth.OPERATOR, since=t0)
    monkeypatch.setattr(auth, "current_login", lambda settings: login)
    actor = auth.export_actor(load_settings())
    assert actor() == "alice"
    monkeypatch.setattr(auth, "_now", lambda: t0 + TTL_S + 1)
    assert actor() == "ui"
    monkeypatch.setenv("PITWALL_VIEWER_PASSWORD", "look")
    gated = auth.export_actor(load_settings())
    try:
        gated()
    except auth.SignInExpired as exc:
        assert "sign in again" in str(exc)
    else:
        raise AssertionError("an expired sign-in behind the viewer gate still got a file")


def test_no_page_records_the_operator_its_gate_returned():
    """The one rule, kept: the gate (`control_gate`, `operator`) decides what is drawn, only as a
    yes/no; the actor a control records comes from `auth.actor_at_click` at the click."""
    gate = re.compile(r"auth\.(control_gate|operator)\(")
    offenders = []
    for path in [*(REPO / "dashboard" / "pages").glob("*.py"), *(REPO / "dashboard" / "components").glob("*.py")]:
        if path.name in ("auth.py", "session.py"):  # the rules themselves; ensure_runner acts at page load
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if gate.search(line) and not re.search(r"\bis (not )?None\b", line):
                offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert offenders == []
