"""Per-session plumbing shared by every page: settings, engine, runner check, sidebar.

Process state lives in storage, never in st.session_state; the sidebar's choices (server, time
window) live in the URL's query parameters so a link can be shared with a colleague.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st
from sqlalchemy.engine import Engine

from dashboard.services import health
from dashboard.settings import REPO_ROOT, Settings, SettingsError, load_settings
from storage import repo
from storage.db import SchemaError, make_engine

WINDOWS = {"15m": 15 * 60, "1h": 3600, "6h": 6 * 3600, "24h": 86400, "7d": 7 * 86400}
DEFAULT_WINDOW = "1h"


@dataclass(frozen=True)
class AppContext:
    settings: Settings
    engine: Engine


@st.cache_resource(show_spinner=False)
def _settings() -> Settings:
    return load_settings()


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    return make_engine(url)


def bootstrap() -> AppContext:
    try:
        settings = _settings()
        engine = _engine(settings.database_url)
    except (SettingsError, SchemaError) as exc:
        st.error(f"Pitwall cannot start: {exc}")
        st.stop()
    except Exception as exc:  # an unreadable database file, a bad URL
        st.error(f"Pitwall cannot open its database: {exc}. Check PITWALL_DATABASE_URL.")
        st.stop()
    return AppContext(settings, engine)


def ensure_runner(ctx: AppContext) -> None:
    """Start a runner when none is alive (once per browser session); `pitwall up` owns its own."""
    if os.environ.get("PITWALL_MANAGED_RUNNER") == "1" or st.session_state.get("_runner_started"):
        return
    if health.runner_alive(ctx.engine):
        return
    health.start_runner_detached(str(REPO_ROOT))
    st.session_state["_runner_started"] = True


def selected_server(ctx: AppContext) -> str | None:
    return st.query_params.get("server")


def selected_window_s() -> int:
    return WINDOWS.get(st.query_params.get("window", DEFAULT_WINDOW), WINDOWS[DEFAULT_WINDOW])


def sidebar(ctx: AppContext) -> None:
    servers = [s.name for s in repo.list_servers(ctx.engine)]
    with st.sidebar:
        st.markdown("### Pitwall")
        if servers:
            current = st.query_params.get("server")
            idx = servers.index(current) if current in servers else 0
            choice = st.selectbox("Server", servers, index=idx, key="sb_server")
            st.query_params["server"] = choice
        else:
            st.caption("No servers yet.")
        keys = list(WINDOWS)
        current_w = st.query_params.get("window", DEFAULT_WINDOW)
        w = st.segmented_control(
            "Window", keys, default=current_w if current_w in keys else DEFAULT_WINDOW, key="sb_window"
        )
        st.query_params["window"] = w or DEFAULT_WINDOW
