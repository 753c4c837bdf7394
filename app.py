"""Streamlit entry: page config, cached engine, shared sidebar, st.navigation.

`streamlit run app.py` works on its own: when no runner holds the database, this starts one
(`python -m dashboard collect`, detached, single-instance by its lease) and stops nothing.
"""

from __future__ import annotations

import streamlit as st

from dashboard.components import session

st.set_page_config(page_title="Pitwall", page_icon=":material/speed:", layout="wide")

ctx = session.bootstrap()  # settings + engine, or a readable error and st.stop()
session.ensure_runner(ctx)
session.sidebar(ctx)

PAGES = [
    st.Page("dashboard/pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("dashboard/pages/about.py", title="About / health", icon=":material/monitor_heart:"),
]
st.navigation(PAGES).run()
