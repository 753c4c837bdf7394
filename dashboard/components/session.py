"""Per-session plumbing shared by every page: settings, engine, access checks, runner check,
sidebar, guards.

`bootstrap()` runs first on every page: it refuses a foreign Host header and, with a viewer
password set, draws the sign-in form instead of the page (components.auth owns those rules).

Process state lives in storage, never in st.session_state; the sidebar's choices (server, time
window) live in the URL's query parameters so a link can be shared with a colleague. Streamlit
drops query parameters when the operator switches pages through the navigation menu, so the last
choice is also remembered in st.session_state (a UI preference, not process state) and written
back to the URL on the next page.

Errors: `guard()` turns any exception of a page body or a live fragment into one sentence that
says what to do (a locked database, a half-migrated schema) — never a Python traceback.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

import streamlit as st
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from config.settings import REPO_ROOT, Settings, load_settings
from dashboard.components import auth
from dashboard.services.alerts import views as alert_views
from dashboard.services.views import health
from dashboard.services.views import session as session_view

WINDOWS = {"15m": 15 * 60, "1h": 3600, "6h": 6 * 3600, "24h": 86400, "7d": 7 * 86400}
DEFAULT_WINDOW = "1h"
WINDOW_LABELS = {"15m": "last 15 minutes", "1h": "last hour", "6h": "last 6 hours",
                 "24h": "last 24 hours", "7d": "last 7 days"}
LIVE_REFRESH_S = 5.0  # how often live fragments re-read storage
log = logging.getLogger("pitwall.dashboard")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class AppContext:
    settings: Settings
    engine: Engine

    @property
    def url(self) -> str:
        """Cache key of this database for st.cache_data helpers (the engine is not hashable)."""
        return self.settings.database_url


@st.cache_resource(show_spinner=False)
def _settings() -> Settings:
    return load_settings()


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    return session_view.open_engine(url)


def settings() -> Settings:
    """The process-wide Settings (st.cache_resource)."""
    return _settings()


def engine_for(url: str) -> Engine:
    """The process-wide engine of a database URL (st.cache_resource)."""
    return _engine(url)


def bootstrap() -> AppContext:
    try:
        settings = _settings()
        engine = _engine(settings.database_url)
    except session_view.PitwallError as exc:  # a bad setting, a database this Pitwall cannot use
        st.error(f"Pitwall cannot start: {exc}")
        st.stop()
    except Exception as exc:  # an unreadable database file, a bad URL
        st.error(f"Pitwall cannot open its database ({type(exc).__name__}). Check PITWALL_DATABASE_URL "
                 "and that the folder is writable, then reload.")
        log.warning("database open failed: %s", exc)
        st.stop()
    auth.refuse_foreign_host(settings)  # DNS rebinding: one sentence and st.stop()
    auth.require_viewer(settings)  # viewer_password: sign-in form and st.stop() until signed in
    return AppContext(settings, engine)


def ensure_runner(ctx: AppContext) -> None:
    """Start a runner when none is alive (once per browser session); `pitwall up` owns its own.

    Starting a process is a control: it needs the operator `auth.operator` allows (a signed-in
    operator when a credential is configured), so a visitor cannot start one by opening the page.
    """
    if os.environ.get("PITWALL_MANAGED_RUNNER") == "1" or st.session_state.get("_runner_started"):
        return
    actor = auth.operator(ctx.settings)
    if actor is None:
        return  # asked again on the next run, after a sign-in
    try:
        if health.runner_alive(ctx.engine, host=ctx.settings.runner.get("host")):  # this host's runner
            return
        health.start_runner_for(ctx.engine, str(REPO_ROOT), actor=actor)
    except Exception as exc:  # never block the page on this; About / health says more
        log.warning("could not check or start the runner: %s", exc)
    st.session_state["_runner_started"] = True


def explain(exc: BaseException) -> str:
    """One sentence for an unexpected error, saying what the operator can do."""
    if isinstance(exc, OperationalError):
        text = str(exc.orig) if exc.orig else str(exc)
        if "locked" in text:
            return "The database is busy (locked by another process); this view retries on its own."
        if "no such table" in text or "no such column" in text:
            return ("The database schema is older than this Pitwall; restart `pitwall up` to "
                    "upgrade it.")
        return "The database could not be read; check PITWALL_DATABASE_URL and the disk, then reload."
    return (f"This view hit an internal error ({type(exc).__name__}); reload the page, and if it "
            "persists see the dashboard's log.")


@contextmanager
def guard(what: str) -> Iterator[None]:
    """Show an error as one sentence instead of a traceback (the page keeps its other parts)."""
    try:
        yield
    except Exception as exc:
        log.exception("%s failed", what)
        st.error(f"{what}: {explain(exc)}")


def safe(what: str) -> Callable[[F], F]:
    """Decorator form of guard() for fragments and helpers."""

    def deco(fn: F) -> F:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with guard(what):
                return fn(*args, **kwargs)
            return None

        return wrapper  # type: ignore[return-value]

    return deco


# ---------------------------------------------------------------------------------------------
# shared choices: server and time window (query params, remembered across pages)


def _param(name: str, default: str | None) -> str | None:
    value = st.query_params.get(name)
    if value is None:
        value = st.session_state.get(f"_pref_{name}", default)
    return value


def _remember(name: str, value: str | None) -> None:
    if value is None:
        return
    st.session_state[f"_pref_{name}"] = value
    if st.query_params.get(name) != value:
        st.query_params[name] = value


def selected_server(ctx: AppContext | None = None) -> str | None:
    return _param("server", None)


def server_or_stop(ctx: AppContext, empty: str) -> str:
    """The server picked in the sidebar (the first one when none is); with no server at all,
    draws `empty` as an info box and stops the page."""
    names = server_names(ctx.url)
    if not names:
        st.info(empty)
        st.stop()
    name = selected_server(ctx)
    return name if name in names else names[0]


def selected_window_key() -> str:
    key = _param("window", DEFAULT_WINDOW) or DEFAULT_WINDOW
    return key if key in WINDOWS else DEFAULT_WINDOW


def selected_window_s() -> int:
    return WINDOWS[selected_window_key()]


@st.cache_data(ttl=5, show_spinner=False)
def server_names(url: str) -> list[str]:
    return session_view.server_names(engine_for(url))


@st.cache_data(ttl=3, show_spinner=False)
def runner_status(url: str) -> tuple[bool, str]:
    """(alive, one-line summary) of the runner, for the sidebar."""
    return session_view.runner_status_line(engine_for(url))


@st.cache_data(ttl=5, show_spinner=False)
def firing_alerts(url: str) -> list[dict[str, Any]]:
    """Firing alerts (rule, server, severity, summary, silenced), for the sidebar and Overview."""
    return [r for r in alert_views.alerts(engine_for(url), open_only=True) if r["state"] == "firing"]


def _alert_count(ctx: AppContext) -> None:
    """A line on how many alerts fire (silenced ones counted apart); nothing when none."""
    try:
        firing = firing_alerts(ctx.url)
    except Exception as exc:  # an older schema: About / health says more
        log.warning("could not read alerts: %s", exc)
        return
    loud = sum(1 for a in firing if not a["silenced"])
    if firing:
        quiet = f" ({len(firing) - loud} silenced)" if loud < len(firing) else ""
        st.markdown(f":red-badge[:material/notifications_active: {len(firing)} firing]{quiet} — see Alerts")


def _on_pick(name: str, widget_key: str) -> None:
    # Runs before the script: the operator's pick goes to the URL first, so the sync below
    # (URL -> widget, for shared links and Overview click-throughs) never undoes it.
    value = st.session_state.get(widget_key)
    if value is not None:
        st.query_params[name] = value
        st.session_state[f"_pref_{name}"] = value


def _sync_widget(name: str, widget_key: str, allowed: list[str], fallback: str) -> str:
    wanted = _param(name, None)
    if wanted not in allowed:
        wanted = st.session_state.get(widget_key) if st.session_state.get(widget_key) in allowed else fallback
    if st.session_state.get(widget_key) != wanted:
        st.session_state[widget_key] = wanted
    return str(wanted)


def sidebar(ctx: AppContext) -> None:
    """Server picker, time window and runner status; choices go to the URL and session."""
    try:
        servers = server_names(ctx.url)
        alive, summary = runner_status(ctx.url)
    except Exception as exc:
        with st.sidebar:
            st.error(explain(exc))
        return
    with st.sidebar:
        if servers:
            choice = _sync_widget("server", "sb_server", servers, servers[0])
            st.selectbox("Server", servers, key="sb_server", on_change=_on_pick, args=("server", "sb_server"))
            _remember("server", choice)
        else:
            st.caption("No servers yet — see the Overview page for how to add one.")
        keys = list(WINDOWS)
        w = _sync_widget("window", "sb_window", keys, DEFAULT_WINDOW)
        st.selectbox("Window", keys, key="sb_window", format_func=WINDOW_LABELS.get, on_change=_on_pick,
                     args=("window", "sb_window"))
        _remember("window", w)
        if alive:
            st.caption(f":green[●] {summary}")
        else:
            st.caption(f":red[●] {summary}")
        _alert_count(ctx)
        auth.sidebar_status(ctx.settings)
