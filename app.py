"""Streamlit entry: page config, cached engine, shared sidebar, st.navigation.

`streamlit run app.py` works on its own: when no runner holds the database, this starts one
(`python -m cli collect`, detached, single-instance by its lease) and stops nothing.
Any error a page does not handle becomes one sentence (session.guard), never a traceback.
"""

from __future__ import annotations

import streamlit as st

from dashboard.components import session

st.set_page_config(page_title="Pitwall", page_icon=":material/speed:", layout="wide")

ctx = session.bootstrap()  # settings + engine, or a readable error and st.stop()
session.ensure_runner(ctx)
session.sidebar(ctx)

# One st.Page per page; Profiles and Compare are added by their owners (one line each).
PAGES = [
    st.Page("dashboard/pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("dashboard/pages/server.py", title="Server", icon=":material/monitoring:"),
    st.Page("dashboard/pages/benchmarks.py", title="Benchmarks", icon=":material/speed:"),
    st.Page("dashboard/pages/events.py", title="Events", icon=":material/event_note:"),
    st.Page("dashboard/pages/alerts.py", title="Alerts", icon=":material/notifications:"),
    st.Page("dashboard/pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("dashboard/pages/tune.py", title="Tune", icon=":material/model_training:"),
    st.Page("dashboard/pages/traces.py", title="Traces", icon=":material/timeline:"),
    st.Page("dashboard/pages/profiles.py", title="Profiles", icon=":material/tune:"),
    st.Page("dashboard/pages/about.py", title="About / health", icon=":material/monitor_heart:"),
]
page = st.navigation(PAGES)
with session.guard(page.title or "This page"):
    page.run()
