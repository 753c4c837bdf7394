"""Traces: the request traces Pitwall holds, a preview of each (arrival rate over time, input and
output lengths, prefix reuse, sessions), and an import from a file (any format `pitwall trace
formats` lists, the engine's own request records included).

A trace holds no prompt text unless it was imported with --keep-text (the page never shows it).
Notes and bad rows are shown as text (st.dataframe / st.code), never as markdown or HTML. The
import is a control: behind auth.control_gate, audited. Replaying a trace is `pitwall probe
--trace NAME` (the command is shown for the selected trace); the page does not start one.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.components import auth, charts, session
from dashboard.components.format import fmt_ts
from dashboard.services.views import traces as tv

ctx = session.bootstrap()
st.title("Traces")
st.caption("Your own traffic, replayed: import a trace (Mooncake, Azure, BurstGPT, your server's own request log "
           "or its metrics export), look at it here, replay it with `pitwall probe --trace NAME`.")


@st.cache_data(ttl=5, show_spinner=False)
def _table(url: str) -> pd.DataFrame:
    return tv.table(session.engine_for(url))


@st.cache_data(ttl=5, show_spinner=False)
def _detail(url: str, name: str) -> dict | None:
    return tv.detail(session.engine_for(url), name)


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


with session.guard("Traces"):
    df = _table(ctx.url)
    if df.empty:
        st.info("No traces yet. Import one below, or from a shell: `pitwall trace import FILE` "
                "(`pitwall trace import traces/demo-chat.jsonl` stores the demo's).")
    else:
        shown = df.assign(
            imported=[fmt_ts(t) for t in df["imported_at"]],
            prefix_reuse=[_pct(v) for v in df["prefix_reuse"]],
        ).drop(columns=["imported_at"])
        st.dataframe(shown, hide_index=True, width="stretch", column_config={
            "duration_s": st.column_config.NumberColumn("duration (s)", format="%.1f"),
            "rate_rps": st.column_config.NumberColumn("mean req/s", format="%.2f"),
            "peak_rps": st.column_config.NumberColumn("peak req/s", format="%.2f"),
            "prefix_reuse": st.column_config.TextColumn("prefix reuse"),
            "bad_rows": st.column_config.NumberColumn("bad rows"),
        })
        name = st.selectbox("Preview", list(df["name"]), key="trace_pick")
        fields = _detail(ctx.url, name) if name else None
        if fields:
            s = fields.get("summary") or {}
            c = st.columns(5)
            c[0].metric("Requests", f"{fields['requests']:,}")
            c[1].metric("Duration", f"{fields['duration_s']:,.1f} s")
            c[2].metric("Peak rate", f"{s.get('peak_rps') or 0:.1f} req/s",
                        help=f"the busiest {s.get('bucket_s') or 1:g} s; mean {s.get('rate_rps') or 0:.2f} req/s")
            c[3].metric("Prefix reuse", _pct(s.get("prefix_reuse_share")),
                        help="share of input tokens in prefix blocks an earlier request already sent")
            c[4].metric("Sessions", f"{s.get('sessions') or 0:,}",
                        help=f"{s.get('turns_mean') or 0:.1f} turns on average" if s.get("sessions") else "no sessions")
            left, right = st.columns(2)
            with left:
                st.markdown("**Arrival rate** (requests per second)")
                st.line_chart(tv.arrivals(fields), x="time_s", y="requests_per_s", x_label="seconds into the trace",
                              y_label="req/s", height=260)
            with right:
                st.markdown("**Lengths** (requests per token bucket)")
                st.altair_chart(charts.length_bars(tv.lengths(fields)), width="stretch")
            st.markdown("**Replay it**")
            st.code(f"pitwall probe --url http://127.0.0.1:30000 --trace {name} --speed 1\n"
                    f"pitwall probe --url http://127.0.0.1:30000 --trace {name} --speed auto   # the highest speed within [slo]",
                    language="bash")
            notes = fields.get("notes") or []
            if notes:
                st.markdown("**What the import met**")
                st.code("\n".join(notes), language=None)
            if fields.get("bad_count"):
                st.markdown(f"**{fields['bad_count']:,} row(s) could not be read** (the first ones)")
                st.dataframe(pd.DataFrame(fields.get("bad_rows") or []), hide_index=True, width="stretch")
            st.caption(f"format {fields['format']} · source {fields['source']} · digest {fields['digest']} · "
                       f"imported {fmt_ts(fields['imported_at'])}")

    st.divider()
    st.subheader("Import a trace")
    done = st.session_state.pop("trace_imported", None)
    if done:
        st.success(done)
    can_act = auth.control_gate(ctx.settings) is not None  # who acts is asked when the click arrives
    with st.form("trace_import", clear_on_submit=True):
        upload = st.file_uploader("Trace file", key="trace_file")
        f1, f2, f3 = st.columns(3)
        fmt = f1.selectbox("Format", tv.format_names(), key="trace_fmt")
        new_name = f2.text_input("Name (default: the file's)", key="trace_name")
        rate = f3.number_input("Rate (req/s), for a file without arrival times", min_value=0.0, value=0.0,
                               key="trace_rate")
        go = st.form_submit_button("Import", disabled=not can_act)
    if go and upload is not None and (who := auth.actor_at_click(ctx.settings)):
        from collectors.trace.model import TraceError

        try:
            got = tv.import_upload(session.engine_for(ctx.url), filename=upload.name, data=upload.getvalue(), fmt=fmt,
                                   name=new_name.strip() or None, rate=rate or None, actor=who,
                                   data_dir=ctx.settings.data_dir / "uploads")
        except TraceError as exc:
            st.error(str(exc))
        else:
            _table.clear()
            _detail.clear()
            st.session_state["trace_imported"] = (
                f"Stored {got['name']}: {got['requests']:,} requests over {got['duration_s']:,.1f} s"
                + (f"; {got['bad_count']:,} row(s) could not be read" if got["bad_count"] else ""))
            st.rerun()  # the table and the preview list take it in
