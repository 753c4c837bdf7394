"""About / health: runner status, collection health, database size and row counts, and who may
do what on this dashboard (auth.describe)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from config import __version__
from dashboard.components import auth, session
from dashboard.components.format import fmt_age, fmt_bytes, fmt_ts, fmt_value
from dashboard.services.views import timeseries as ts
from dashboard.services.views.health import (
    SELF_CPU_PCT,
    SELF_LOOP_LAG_S,
    SELF_ROWS_PER_S,
    retention_table,
    runner_health,
    shown_url,
    unit_of,
)

ctx = session.bootstrap()
st.title("About / health")


@st.fragment(run_every=session.LIVE_REFRESH_S)
@session.safe("Runner health")
def live() -> None:
    report = runner_health(ctx.engine, ctx.settings.database_url, host=ctx.settings.runner.get("host"))
    if report.alive:
        st.success(f"Runner {report.summary}.")
    else:
        st.warning(f"Runner {report.summary}. Nothing is collected and no intent (relaunch, sweep) runs until it does.")
    a, b, c, d, e = st.columns(5)
    a.metric("Pitwall", __version__)
    b.metric("Database", fmt_bytes(report.db_bytes))
    c.metric("Runner CPU", fmt_value(report.self_metrics.get(SELF_CPU_PCT), unit_of(SELF_CPU_PCT)),
             help=f"% of one core ({SELF_CPU_PCT})")
    d.metric("Loop lag", fmt_value(report.self_metrics.get(SELF_LOOP_LAG_S), unit_of(SELF_LOOP_LAG_S)),
             help=f"worst scheduler lateness in the last 5 s ({SELF_LOOP_LAG_S})")
    e.metric("Rows / s", fmt_value(report.self_metrics.get(SELF_ROWS_PER_S), unit_of(SELF_ROWS_PER_S)),
             help=f"rows written per second ({SELF_ROWS_PER_S})")
    if report.started_at:
        st.caption(f"Runner started {fmt_ts(report.started_at)} ({fmt_age(report.started_at)}).")
    if len(report.runners) > 1:  # a fleet: one runner per host, one of them keeps house
        st.subheader("Runners")
        st.text("\n".join(r.line for r in report.runners))
    errors = ts.list_events(ctx.engine, kinds=["collector_error"], limit=10)
    st.subheader("Collector errors")
    if errors.empty:
        st.caption("None recorded.")
    else:
        st.dataframe(
            pd.DataFrame({
                "time (UTC)": [fmt_ts(t) for t in errors["ts"]],
                "message": errors["message"].fillna("").astype(str),
            }),
            hide_index=True, width="stretch",
        )
    st.subheader("Servers")
    if report.servers:
        st.text("\n".join(report.servers))
    else:
        st.caption("No servers configured. Add [[servers]] to pitwall.toml, or run `pitwall up` for the demo.")
    st.subheader("Rows per table")
    st.dataframe(
        pd.DataFrame(sorted(report.counts.items()), columns=["table", "rows"]),
        hide_index=True,
        width="content",
    )



@st.cache_data(ttl=60, show_spinner=False)
def _retention(url: str, policy: tuple[tuple[str, float], ...]) -> pd.DataFrame:
    return retention_table(ctx.engine, dict(policy), logs_dir=ctx.settings.logs_dir)


@session.safe("Retention")
def retention() -> None:
    st.subheader("Retention")
    st.caption("What the runner keeps (settings `retention.*`) and removes next, in small batches; "
               "raw samples go only once their minute is rolled up, minute rollups once their quarter is; "
               "launch logs by size, the oldest ended launch's first, never a live one.")
    st.dataframe(_retention(ctx.settings.database_url, tuple(sorted(ctx.settings.retention.items()))),
                 hide_index=True, width="content")


live()
retention()
st.caption(f"Database URL: {shown_url(ctx.settings.database_url)} · data folder: {ctx.settings.data_dir}")
st.caption(auth.describe(ctx.settings))
