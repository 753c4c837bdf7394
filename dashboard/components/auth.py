"""Who may change servers and profiles from the dashboard.

Rules (issue 8, DESIGN.md):
- read_only: every control is hidden (`controls_allowed` is False), whoever asks.
- loopback only (settings.exposed is False): the operator is "local"; no login.
- exposed: relaunch, stop and profile edits need an authenticated operator: Streamlit's
  `st.login` OIDC when it is configured (st.user.is_logged_in), else the password from
  settings.password (PITWALL_PASSWORD), compared in constant time (hmac.compare_digest).
  Exposed without any password: controls stay disabled (`pitwall up` already refuses to start
  that way; this covers `streamlit run app.py --server.address 0.0.0.0`).
The login lives in st.session_state: it belongs to one browser session, not to the process.
"""

from __future__ import annotations

import hmac

import streamlit as st

from dashboard.settings import Settings

_KEY = "pitwall_operator"


def check_password(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison; an unset expected password never matches."""
    if not expected or given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def _oidc_user() -> str | None:
    try:
        user = st.user
        if getattr(user, "is_logged_in", False):
            return str(user.get("email") or user.get("name") or "oidc-user")
    except Exception:  # st.login not configured
        return None
    return None


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def exposed(settings: Settings) -> bool:
    """True when this Streamlit server may be reachable from other hosts.

    Looks at the address Streamlit really binds (`server.address`), not only at PITWALL_HOST:
    `streamlit run app.py --server.address 0.0.0.0` must not open the controls. An unset address
    means all interfaces, so it counts as exposed; .streamlit/config.toml sets 127.0.0.1.
    """
    try:
        address = st.get_option("server.address")
    except Exception:
        address = None
    return settings.exposed or not address or str(address) not in LOOPBACK


def current_operator(settings: Settings) -> str | None:
    """The actor recorded in Audit, or None when nobody is authenticated on an exposed dashboard."""
    if not exposed(settings):
        return "local"
    oidc = _oidc_user()
    if oidc:
        return oidc
    who = st.session_state.get(_KEY)
    return str(who) if who else None


def controls_allowed(settings: Settings) -> bool:
    return not settings.read_only


def require_operator(settings: Settings) -> str | None:
    """The operator, or draw why controls are unavailable (and a login form) and return None."""
    if settings.read_only:
        st.caption("Read-only mode: relaunch, stop and profile edits are hidden (PITWALL_READ_ONLY).")
        return None
    who = current_operator(settings)
    if who:
        return who
    if not settings.password:
        st.error(
            "This dashboard listens on a non-loopback address without a password, so relaunch, "
            "stop and profile edits are disabled; set PITWALL_PASSWORD and restart, or bind to 127.0.0.1."
        )
        return None
    with st.form("pitwall_login"):
        st.markdown("**Sign in to change servers and profiles**")
        name = st.text_input("Operator name")
        password = st.text_input("Password", type="password")
        ok = st.form_submit_button("Sign in")
    if ok:
        if check_password(password, settings.password) and name.strip():
            st.session_state[_KEY] = name.strip()
            st.rerun()
        st.error("Wrong password or empty operator name; try again.")
    return None


def sign_out_button() -> None:
    if st.session_state.get(_KEY) and st.button("Sign out", key="pitwall_sign_out"):
        del st.session_state[_KEY]
        st.rerun()
