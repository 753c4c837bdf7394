"""Events: everything that happened, filterable by kind, server and time; raw excerpts as text.

The server is the sidebar's (one source of truth, as on every page); "All servers" widens it.
The kinds offered are storage/kinds.py EVENT_KINDS, the one table every writer is checked against.

Messages and raw log excerpts are shown only through st.dataframe and st.code, which render text
literally: a log line holding `<script>` or markdown is shown as typed, never interpreted.
"""

from __future__ import annotations

import time as _time

import pandas as pd
import streamlit as st

from dashboard.components import session
from dashboard.components.format import SEVERITY_COLORS, fmt_ts, fmt_window
from dashboard.services.views import timeseries as ts

ctx = session.bootstrap()
st.title("Events")

EVENT_KINDS = ts.EVENT_KINDS  # storage/kinds.py, the one table of event kinds
LIMIT = 1000


@st.cache_data(ttl=5, show_spinner=False)
def _events(url: str, server_id: int | None, kinds: tuple[str, ...], since: float, limit: int) -> pd.DataFrame:
    return ts.list_events(
        session.engine_for(url), server_id=server_id, kinds=list(kinds) or None, since=since, limit=limit
    )


@st.cache_data(ttl=30, show_spinner=False)
def _server_ids(url: str) -> dict[str, int]:
    return ts.server_ids(session.engine_for(url))


with session.guard("Events"):
    ids = _server_ids(ctx.url)
    sidebar_names = session.server_names(ctx.url)  # the sidebar's order: its default is the first
    wanted = session.selected_server(ctx)
    sidebar_server = wanted if wanted in ids else (sidebar_names[0] if sidebar_names else None)
    f1, f2, f3 = st.columns([1, 2, 1])
    # the sidebar's server by default (the page never contradicts it); an incident often spans
    # several servers: widen here
    every = f1.toggle("All servers", value=sidebar_server is None, key="ev_all",
                      help=f"off: only {sidebar_server}, the server picked in the sidebar" if sidebar_server
                      else "no server yet")
    server = None if every or sidebar_server is None else sidebar_server
    kinds = f2.multiselect("Kinds", EVENT_KINDS, default=[], key="ev_kinds", placeholder="All kinds")
    severities = f3.multiselect(
        "Severity", list(SEVERITY_COLORS), default=[], key="ev_sev", placeholder="All"
    )
    window_s = session.selected_window_s()
    since = float(int(_time.time() // 5) * 5 - window_s)
    df = _events(ctx.url, ids.get(server) if server is not None else None, tuple(kinds), since, LIMIT)
    if severities:
        df = df[df["severity"].isin(severities)]
    st.caption(
        f"{len(df)} events of {server or 'every server'} in the last {fmt_window(window_s)} "
        "(change the server and the window in the sidebar)"
        + (f"; showing the newest {LIMIT}" if len(df) >= LIMIT else "")
    )
    if df.empty:
        st.info(
            "No events match. Widen the window in the sidebar or clear the filters; events appear "
            "as the runner reads server logs and health checks."
        )
        st.stop()
    by_id = {v: k for k, v in ids.items()}
    table = pd.DataFrame(
        {
            "id": df["id"].astype(int),
            "time (UTC)": [fmt_ts(t) for t in df["ts"]],
            "server": [by_id.get(int(s), "—") if pd.notna(s) else "—" for s in df["server_id"]],
            "kind": df["kind"].astype(str),
            "severity": df["severity"].astype(str),
            "message": df["message"].fillna("").astype(str),
            "raw": df["raw"].notna(),
        }
    )
    picked = st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={"raw": st.column_config.CheckboxColumn("raw excerpt", width="small")},
        on_select="rerun",
        selection_mode="single-row",
        key="ev_table",
    )
    rows = list(getattr(getattr(picked, "selection", None), "rows", []) or [])
    chosen = int(table.iloc[rows[0]]["id"]) if rows and rows[0] < len(table) else None
    with_raw = df[df["raw"].notna()]
    st.subheader("Raw excerpt")
    if with_raw.empty:
        st.caption("None of these events carries a raw log excerpt.")
    else:
        options = [int(i) for i in with_raw["id"]]
        labels = {
            int(r.id): f"#{int(r.id)} · {fmt_ts(r.ts)} · {r.kind}" for r in with_raw.itertuples()
        }
        if st.session_state.get("ev_raw_pick") not in options:
            st.session_state.pop("ev_raw_pick", None)  # filtered out: fall back to the newest
        if chosen in options and st.session_state.get("ev_raw_last_row") != chosen:
            st.session_state["ev_raw_pick"] = chosen  # a row picked in the table shows its excerpt
        st.session_state["ev_raw_last_row"] = chosen
        pick = st.selectbox("Event (or pick a row above)", options, format_func=labels.get, key="ev_raw_pick")
        row = with_raw[with_raw["id"] == pick].iloc[0]
        st.text(f"{row['kind']} ({row['severity']}): {row['message']}")
        st.code(str(row["raw"]), language=None)
