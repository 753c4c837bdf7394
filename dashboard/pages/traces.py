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
from scorecard.metric_specs import ITL_P99_S, TTFT_P99_S

ctx = session.bootstrap()
st.title("Traces")
st.caption("Your own traffic, replayed: import a trace (Mooncake, Azure, BurstGPT, your server's own request log "
           "or its metrics export), look at it here, and replay it against a server here or with "
           "`pitwall probe --trace NAME`.")


@st.cache_data(ttl=5, show_spinner=False)
def _table(url: str) -> pd.DataFrame:
    return tv.table(session.engine_for(url))


@st.cache_data(ttl=5, show_spinner=False)
def _detail(url: str, name: str) -> dict | None:
    return tv.detail(session.engine_for(url), name)


@st.cache_data(ttl=2, show_spinner=False)
def _replays(url: str, name: str) -> pd.DataFrame:
    return tv.replays(session.engine_for(url), name)


def _flash(key: str) -> list[str]:
    """Show the success a control left in session state before its rerun; the servers to pick."""
    said = st.session_state.pop(key, None)
    if said:
        st.success(said)
    return list(session.server_names(ctx.url))


def _replay_form(name: str, can_act: bool) -> None:
    """Replay the selected trace against a server: the runner's probe lane runs it."""
    st.markdown("**Replay it**")
    servers = _flash("trace_replay_queued")
    if not servers:
        st.info("No servers to replay against: add one to `pitwall.toml`, or run `pitwall up` for the demo.")
    else:
        with st.form("trace_replay"):
            r1, r2, r3, r4, r5 = st.columns([2, 1, 1, 1, 1])
            target = r1.selectbox("Server", servers, key="replay_server")
            speed = r2.number_input("Speed (x)", min_value=0.01, max_value=tv.MAX_SPEED, value=1.0, key="replay_speed",
                                    help="2 = the trace's arrivals twice as fast")
            start = r3.number_input("From (s)", min_value=0.0, value=0.0, key="replay_from")
            end = r4.number_input("To (s, 0: the end)", min_value=0.0, value=0.0, key="replay_to")
            cap = r5.number_input("Max requests (0: all)", min_value=0, value=0, step=1, key="replay_cap")
            go = st.form_submit_button("Replay", disabled=not can_act)
        if go and (who := auth.actor_at_click(ctx.settings)):
            from collectors.trace.model import TraceError

            try:
                run_id, intent_id = tv.start_replay(
                    session.engine_for(ctx.url), server=target, trace=name, speed=float(speed),
                    window=(start or None, end or None), max_requests=int(cap) or None, requested_by=who)
            except TraceError as exc:
                st.error(str(exc))
            else:
                _replays.clear()
                st.session_state["trace_replay_queued"] = (
                    f"Replay of {name} at {speed:g}x against {target} queued: run {run_id} (intent {intent_id}). "
                    "The runner starts it; its figures land on Benchmarks and below.")
                st.rerun()
    runs = _replays(ctx.url, name).fillna({"error": ""})
    if not runs.empty:
        st.dataframe(runs, hide_index=True, width="stretch", column_config={
            "speed": st.column_config.NumberColumn("speed", format="%gx"),
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0),
            TTFT_P99_S: st.column_config.NumberColumn("TTFT p99 (s)", format="%.3f"),
            ITL_P99_S: st.column_config.NumberColumn("ITL p99 (s)", format="%.4f"),
            "lag_p99_s": st.column_config.NumberColumn("lag p99 (s)", format="%.4f",
                                                       help="how late the client sent (the run is not trusted past its bound)"),
        })
    st.caption(f"From a shell: `pitwall probe --url URL --trace {name} --speed 1`, or `--speed auto` for the highest "
               "speed within [slo].")


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def _cut_form(can_act: bool) -> None:
    """A trace of what a server served, from its own request records (a profile's record_requests)."""
    st.subheader("Cut a trace from a server")
    servers = _flash("trace_cut")
    if not servers:
        return
    with st.form("trace_cut_form"):
        c1, c2, c3 = st.columns([2, 1, 2])
        server = c1.selectbox("Server", servers, key="cut_server")
        since = c2.selectbox("Window", list(tv.CUT_WINDOWS), index=1, key="cut_since")
        cut_name = c3.text_input("Name (default: server-date-time)", key="cut_name")
        go = st.form_submit_button("Cut", disabled=not can_act)
    st.caption("Reads the server's own request records: set `record_requests = true` in its profile and relaunch it "
               "(the records go to the data folder's requests/, kept `retention.request_records_days`).")
    if go and (who := auth.actor_at_click(ctx.settings)):
        from collectors.trace.model import TraceError

        try:
            got = tv.cut_from_server(session.engine_for(ctx.url), server=server, since=since,
                                     name=cut_name.strip() or None, actor=who,
                                     requests_dir=ctx.settings.requests_dir)
        except TraceError as exc:
            st.error(str(exc))
        else:
            _table.clear()
            _detail.clear()
            st.session_state["trace_cut"] = f"Stored {got['name']}: {got['requests']:,} requests over {got['duration_s']:,.1f} s"
            st.rerun()


with session.guard("Traces"):
    can_act = auth.control_gate(ctx.settings) is not None  # who acts is asked when the click arrives
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
            _replay_form(name, can_act)
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
    _cut_form(can_act)
    st.subheader("Import a trace")
    done = st.session_state.pop("trace_imported", None)
    if done:
        st.success(done)
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
