"""Who may see the dashboard and who may change things from it.

The rules, in the order every script run meets them (README "Security model"):

1. Host check (`refuse_foreign_host`, pure rule `host_allowed`): a request whose Host header names
   neither loopback, an IP address, the bound address nor a name in `allowed_hosts` is refused with
   one sentence. A DNS-rebinding page reaches 127.0.0.1 under its own name, so its Host header gives
   it away; an IP address cannot be rebound. A request without a Host header is not a browser
   under rebinding and passes.
2. Viewer gate (`require_viewer`): with `viewer_password` set, no page is drawn until someone signs
   in with the viewer or the operator password (or through Streamlit's `st.login` OIDC).
3. Controls (`control_gate`: the one gate in front of every button that changes state — relaunch,
   stop, launch, sweeps, Validate, profile and SLO edits — and `operator`, its silent twin, which
   `session.ensure_runner` asks before starting a runner). The gate decides what is DRAWN; what a
   click DOES is decided when the click arrives, by `actor_at_click` (every control's action asks
   it for the actor it records): a live fragment or a dialog reruns without the page's gate, so an
   operator known when the page was drawn may have expired since. Downloads are made outside any
   script run, so `export_actor` checks the sign-in drawn with the button when the click arrives.
   - `read_only`: no controls, whoever asks.
   - a credential configured (`password`, `viewer_password`, or an `[auth]` section in
     .streamlit/secrets.toml for `st.login`): a signed-in operator — operator password or OIDC —
     whatever address the visitor comes from. SSH tunnels, a proxy on this host, DNS rebinding and
     every local user all arrive from loopback, so loopback proves nothing. A viewer sign-in never
     gets controls.
   - no credential at all: controls work only while Streamlit is bound to loopback (operator
     "local"), and the page says so in one caption; bound elsewhere, no controls.
4. Expiry: a sign-in lasts `session_ttl_s` (default 8 h); an OIDC login counts from its token's
   `iat` claim (or from when this browser session first saw it).
5. Back-off: after n failed sign-ins in a row the next attempt is refused for min(2**n, 60) s,
   counted per browser session and once for the whole dashboard process (a new tab does not reset
   it; an attacker can make the real operator wait at most 60 s). A success resets both counts.
   Passwords are compared in constant time (hmac.compare_digest).

A sign-in lives in st.session_state: it belongs to one browser session, never to the process.
"""

from __future__ import annotations

import hmac
import ipaddress
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import streamlit as st

from config.settings import Settings
from dashboard.components.scorecard import md_escape
from dashboard.services.views.session import RequestError

LOCAL = "local"  # the operator of a loopback dashboard without any credential
OPERATOR, VIEWER = "operator", "viewer"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
BACKOFF_CAP_S = 60.0
_LOGIN = "pitwall_login"
_FAILS = "pitwall_login_failures"
_EXPIRED = "pitwall_login_expired"
_OIDC_SEEN = "pitwall_oidc_seen"
_LOCK = threading.Lock()
SIGN_IN_AGAIN = ("Your operator sign-in expired or was signed out, so nothing was changed; sign in "
                 "again (reload the page if no sign-in form shows), then repeat the action.")


def _now() -> float:
    """Wall clock (epoch seconds); tests patch it to step past expiry and back-off."""
    return time.time()


# ---------------------------------------------------------------------------------------------
# pure rules


def check_password(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison; an unset expected password never matches."""
    if not expected or given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def host_name(host: str) -> str | None:
    """The lower-case name of a Host header (`Example.com.:8501` -> `example.com`), or None when
    it is not a plain host[:port] (a user part, a path, a bad port)."""
    try:
        parts = urlsplit(f"//{host.strip()}")
        _ = parts.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return parts.hostname.lower().rstrip(".")


def host_allowed(host: str | None, settings: Settings, bound: str | None = None) -> bool:
    """Whether a request with this Host header may use the dashboard (see rule 1 above).

    Allowed: no header; loopback names; any IP address; `settings.host` or `bound` (the address
    Streamlit listens on); a name in `settings.allowed_hosts` (exact, case-insensitive).
    """
    if host is None or not host.strip():
        return True
    name = host_name(host)
    if name is None:
        return False
    if name in LOOPBACK:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    known = {settings.host.lower().rstrip("."), *(h.lower().rstrip(".") for h in settings.allowed_hosts)}
    if bound:
        known.add(bound.lower().rstrip("."))
    return name in known


def backoff_s(failures: int) -> float:
    """Seconds the next sign-in waits after `failures` failures in a row: 2, 4, 8, ... capped at 60."""
    return 0.0 if failures <= 0 else min(2.0 ** failures, BACKOFF_CAP_S)


@dataclass
class Backoff:
    """Failed sign-ins in a row and when the last one happened (epoch s)."""

    failures: int = 0
    last_s: float = 0.0

    def wait_s(self, now: float) -> float:
        return max(0.0, self.last_s + backoff_s(self.failures) - now) if self.failures else 0.0

    def fail(self, now: float) -> None:
        self.failures += 1
        self.last_s = now

    def reset(self) -> None:
        self.failures, self.last_s = 0, 0.0


@dataclass(frozen=True)
class Login:
    """One browser session's sign-in: the name recorded in Audit, its role, since when (epoch s)."""

    name: str
    role: str  # OPERATOR or VIEWER
    since: float
    via: str = "password"  # or "oidc"


def role_of(password: str, settings: Settings) -> str | None:
    """OPERATOR, VIEWER or None for a typed password; both comparisons always run."""
    is_operator = check_password(password, settings.password)
    is_viewer = check_password(password, settings.viewer_password)
    return OPERATOR if is_operator else VIEWER if is_viewer else None


# ---------------------------------------------------------------------------------------------
# what this session and process know


def oidc_configured() -> bool:
    """True when .streamlit/secrets.toml has an `[auth]` section (Streamlit's st.login)."""
    try:
        return bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)
    except Exception:
        return False


def credentials_configured(settings: Settings) -> bool:
    return bool(settings.password or settings.viewer_password or oidc_configured())


def _bound_address() -> str | None:
    try:
        address = st.get_option("server.address")
    except Exception:
        return None
    return str(address) if address else None


def exposed(settings: Settings) -> bool:
    """True when this Streamlit server may be reachable from other hosts.

    Looks at the address Streamlit really binds (`server.address`), not only at PITWALL_HOST:
    `streamlit run app.py --server.address 0.0.0.0` must not open the controls. An unset address
    means all interfaces, so it counts as exposed; .streamlit/config.toml sets 127.0.0.1.
    """
    address = _bound_address()
    return settings.exposed or not address or address not in LOOPBACK


def _oidc_login(settings: Settings) -> Login | None:
    try:
        user = st.user
        if not getattr(user, "is_logged_in", False):
            return None
        name = str(user.get("email") or user.get("name") or "oidc-user")
        iat = user.get("iat")
    except Exception:  # st.login not configured
        return None
    if isinstance(iat, int | float) and not isinstance(iat, bool):
        since = float(iat)
    else:
        since = float(st.session_state.setdefault(_OIDC_SEEN, _now()))
    return Login(name=name, role=OPERATOR, since=since, via="oidc")


def current_login(settings: Settings) -> Login | None:
    """This browser session's sign-in, None when there is none or it expired (which is noted, so
    the next sign-in form can say why)."""
    login = _oidc_login(settings)
    if login is None:
        stored = st.session_state.get(_LOGIN)
        login = stored if isinstance(stored, Login) else None
    if login is None:
        return None
    if _now() - login.since > settings.session_ttl_s:
        st.session_state.pop(_LOGIN, None)
        st.session_state[_EXPIRED] = True
        return None
    return login


def operator(settings: Settings) -> str | None:
    """The operator allowed to change things now (the Audit actor), or None; draws nothing."""
    if settings.read_only:
        return None
    if not credentials_configured(settings):
        return None if exposed(settings) else LOCAL
    login = current_login(settings)
    return login.name if login is not None and login.role == OPERATOR else None


def who(settings: Settings) -> str | None:
    """The signed-in name (operator or viewer), "local" on an open loopback dashboard, else None."""
    login = current_login(settings) if credentials_configured(settings) else None
    return login.name if login is not None else operator(settings)


class SignInExpired(RequestError, RuntimeError):
    """A download clicked after the sign-in it was drawn under expired (viewer gate on)."""


def actor_at_click(settings: Settings) -> str | None:
    """THE check of every control's action, made when its click arrives: the operator to record
    (intent, audit row, SLO or rule edit, profile save, stop), or None after drawing one sentence
    telling the person to sign in again. Never reuse an operator from an earlier run of the page."""
    actor = operator(settings)
    if actor is None:
        st.error(SIGN_IN_AGAIN)
    return actor


def export_actor(settings: Settings) -> Callable[[], str]:
    """The Audit actor of a download button, resolved when the click arrives.

    A download's file is made outside the script run (no session state there), so the sign-in is
    read when the button is drawn and its age checked at the click: within `session_ttl_s` the
    signed-in name; after it, "ui" (an anonymous export), or, with the viewer gate on, no file at
    all (SignInExpired: Streamlit says the file could not be made; a reload asks for a sign-in).
    """
    login = current_login(settings) if credentials_configured(settings) else None
    fallback = operator(settings) or "ui"
    ttl_s, gated = settings.session_ttl_s, bool(settings.viewer_password)

    def at_click() -> str:
        if login is None:
            return fallback
        if _now() - login.since > ttl_s:
            if gated:
                raise SignInExpired("The sign-in expired; reload the page and sign in again.")
            return "ui"
        return login.name

    return at_click


# ---------------------------------------------------------------------------------------------
# drawing


@st.cache_resource(show_spinner=False)
def _process_backoff() -> Backoff:
    """The dashboard process's count of failed sign-ins (shared by every browser session)."""
    return Backoff()


def _session_backoff() -> Backoff:
    found = st.session_state.get(_FAILS)
    if not isinstance(found, Backoff):
        found = st.session_state[_FAILS] = Backoff()
    return found


def _attempt(settings: Settings, name: str, password: str) -> str | None:
    """Try a sign-in; None when it worked (the login is stored), else one sentence why not."""
    now = _now()
    mine, everyone = _session_backoff(), _process_backoff()
    with _LOCK:
        wait = max(mine.wait_s(now), everyone.wait_s(now))
        if wait > 0:
            return f"Too many failed sign-ins: try again in {math.ceil(wait)} s."
        if not name.strip():
            return "Enter your name (it goes into the audit log with what you change)."
        role = role_of(password, settings)
        if role is None:
            mine.fail(now)
            everyone.fail(now)
            return (f"Wrong password; the next attempt is possible in "
                    f"{math.ceil(backoff_s(max(mine.failures, everyone.failures)))} s.")
        mine.reset()
        everyone.reset()
    st.session_state[_LOGIN] = Login(name=name.strip(), role=role, since=now)
    st.session_state.pop(_EXPIRED, None)
    return None


def _sign_in_form(settings: Settings, key: str, title: str) -> None:
    """Password form (when a password is set) and the OIDC button (when st.login is configured)."""
    if st.session_state.pop(_EXPIRED, False):
        st.warning(f"Your sign-in expired after {settings.session_ttl_s / 3600:g} h; sign in again.")
    if settings.password or settings.viewer_password:
        with st.form(key, clear_on_submit=True):
            st.markdown(f"**{title}**")
            name = st.text_input("Name", key=f"{key}_name", help="recorded in the audit log")
            password = st.text_input("Password", type="password", key=f"{key}_password")
            submitted = st.form_submit_button("Sign in")
        if submitted:
            problem = _attempt(settings, name or "", password or "")
            if problem is None:
                st.rerun()
            st.error(problem)
    if oidc_configured():
        if st.button("Sign in with your identity provider", key=f"{key}_oidc"):
            st.login()


def _request_host() -> str | None:
    """The Host header of the request that opened this session (its WebSocket), if any."""
    try:
        return st.context.headers.get("host")
    except Exception:  # no browser behind this run (AppTest, a bare script run)
        return None


def refuse_foreign_host(settings: Settings) -> None:
    """Stop this run with one sentence when the Host header fails `host_allowed`."""
    if not host_allowed(_request_host(), settings, _bound_address()):
        st.error("This dashboard does not answer to that host name: open it by its address, or add "
                 "the name to allowed_hosts (PITWALL_ALLOWED_HOSTS) when a reverse proxy serves it.")
        st.stop()


def require_viewer(settings: Settings) -> None:
    """With `viewer_password` set, draw the sign-in form and stop until someone signs in."""
    if not settings.viewer_password or current_login(settings) is not None:
        return
    st.title("Pitwall")
    _sign_in_form(settings, "pw_signin_view", "Sign in to see this dashboard")
    st.stop()


def control_gate(settings: Settings) -> str | None:
    """THE gate of every control: the operator (the Audit actor), or None after drawing why the
    controls are off — a caption, an error, or the operator sign-in form."""
    if settings.read_only:
        st.caption("Read-only mode: relaunch, stop, sweeps, validation and edits are off (PITWALL_READ_ONLY).")
        return None
    actor = operator(settings)
    if not credentials_configured(settings):
        if actor is None:
            st.error(
                "This dashboard listens on a non-loopback address without a password, so every control "
                "is disabled; set PITWALL_PASSWORD and restart, or bind to 127.0.0.1."
            )
        else:
            st.caption(
                "No password is set, so anyone who reaches this dashboard from this machine (SSH "
                "tunnels and a proxy on this host included) can use its controls; set "
                "PITWALL_PASSWORD to require a sign-in."
            )
        return actor
    if actor is not None:
        st.caption(f"Signed in as **{md_escape(actor)}** (operator).")
        return actor
    if not settings.password and not oidc_configured():
        st.caption("Controls are off: no operator password is set (PITWALL_PASSWORD).")
        return None
    login = current_login(settings)
    if login is not None:
        st.caption(f"Signed in as **{md_escape(login.name)}** (viewer): pages only. Sign in as an operator to change things.")
    _sign_in_form(settings, "pw_signin_operator", "Sign in as an operator to change servers and profiles")
    return None


def sidebar_status(settings: Settings) -> None:
    """Who is signed in, until when, and a Sign out button (call inside `with st.sidebar`)."""
    login = current_login(settings) if credentials_configured(settings) else None
    if login is None:
        return
    until = time.strftime("%H:%M", time.localtime(login.since + settings.session_ttl_s))
    st.caption(f"Signed in as **{md_escape(login.name)}** ({login.role}) until {until}.")
    if st.button("Sign out", key="pitwall_sign_out"):
        st.session_state.pop(_LOGIN, None)
        if login.via == "oidc":
            st.logout()
        st.rerun()


def describe(settings: Settings) -> str:
    """One sentence on who may do what here (About page)."""
    if settings.read_only:
        controls = "read-only: no controls"
    elif credentials_configured(settings):
        controls = "controls need an operator sign-in from any address"
    elif exposed(settings):
        controls = "no password on a non-loopback address: controls off"
    else:
        controls = "no password: controls open to anyone on loopback"
    pages = "pages need a sign-in" if settings.viewer_password else "pages open to anyone who reaches them"
    hosts = ", ".join(settings.allowed_hosts) or "none"
    return (f"Access: {controls}; {pages}; sign-ins last {settings.session_ttl_s / 3600:g} h; "
            f"extra allowed host names: {hosts}.")
