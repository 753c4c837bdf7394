"""About / health: runner status, database size and row counts."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import __version__
from dashboard.components import session
from dashboard.components.format import fmt_value
from dashboard.services.health import fmt_bytes, runner_health

ctx = session.bootstrap()
st.title("About / health")

report = runner_health(ctx.engine, ctx.settings.database_url)
if report.alive:
    st.success(f"Runner {report.summary}.")
else:
    st.warning(f"Runner {report.summary}.")

a, b, c, d = st.columns(4)
a.metric("Pitwall", __version__)
b.metric("Database", fmt_bytes(report.db_bytes))
c.metric("Runner CPU", fmt_value(report.self_metrics.get("self.cpu_pct"), "count") + " %"
         if "self.cpu_pct" in report.self_metrics else "—")
d.metric("Loop lag", fmt_value(report.self_metrics.get("self.loop_lag_s"), "s"))

st.caption(f"Database URL: `{ctx.settings.database_url}` · data folder: `{ctx.settings.data_dir}`")
st.subheader("Rows per table")
st.dataframe(
    pd.DataFrame(sorted(report.counts.items()), columns=["table", "rows"]),
    hide_index=True,
    width="content",
)
st.subheader("Servers")
if report.servers:
    st.text("\n".join(report.servers))
else:
    st.caption("No servers configured.")
