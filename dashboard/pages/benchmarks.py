"""Benchmarks: start a probe sweep (runs in the runner, not here), follow it live, read its curves.

Starting a sweep is a control: only the operator `auth.control_gate` lets through sees the form,
and the sweep is recorded in Audit with the operator signed in when Start arrives
(`auth.actor_at_click`, views.benchmarks.start_sweep).

Curves come from each run's stored per-level report: latency vs concurrency, throughput vs
concurrency, and the latency/throughput trade-off across runs. A level whose client self-check
failed is drawn hollow and labelled NOT trusted: its latencies include the client's own queueing.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.components import auth, session
from dashboard.components.format import fmt_age, fmt_value
from dashboard.components.scorecard import md_escape
from dashboard.components.timeseries_charts import curves_chart, tradeoff_chart
from dashboard.services.views import benchmarks as bm

ctx = session.bootstrap()
st.title("Benchmarks")


@st.cache_data(ttl=3, show_spinner=False)
def _runs(url: str, server_id: int | None) -> pd.DataFrame:
    return bm.list_runs(session.engine_for(url), server_id=server_id)


@st.cache_data(ttl=3, show_spinner=False)
def _curves(url: str, run_ids: tuple[int, ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    engine = session.engine_for(url)
    return bm.curves(engine, run_ids=list(run_ids)), bm.tradeoff(engine, run_ids=list(run_ids))


def _forget_pending() -> None:
    st.session_state.pop("bm_pending", None)


@st.dialog("Start a sweep?", on_dismiss=_forget_pending)
def confirm(req: bm.SweepRequest) -> None:
    total = req.requests * len(req.levels)
    status = bm.server_status(session.engine_for(ctx.url), req.server)
    if status != "up":
        st.warning(f"{req.server} is {status} right now: requests will fail until it is up "
                   "(see Overview / Events).")
    st.write(
        f"This sends about {total:,} requests (plus warm-up) to **{md_escape(req.server)}** at concurrency "
        f"{', '.join(map(str, req.levels))}. Live traffic on that server will see extra load."
    )
    a, b = st.columns(2)
    if a.button("Start sweep", type="primary", key="bm_confirm"):
        _forget_pending()
        actor = auth.actor_at_click(ctx.settings)  # a sign-in can expire while this is open
        if actor is None:
            return
        try:
            run_id, _ = bm.start_sweep(session.engine_for(ctx.url), req, requested_by=actor)
        except bm.SweepRequestError as exc:
            st.error(str(exc))
            return
        st.session_state["bm_last_started"] = run_id
        _runs.clear()
        st.rerun()
    if b.button("Cancel", key="bm_cancel"):
        _forget_pending()
        st.rerun()


names = session.server_names(ctx.url)
if not names:
    st.info("No servers yet. Add one to `pitwall.toml` (see the Overview page) or run `pitwall up` for the demo.")
    st.stop()
name = session.selected_server(ctx)
name = name if name in names else names[0]
server_id = bm.server_id(ctx.engine, name)
if server_id is None:
    st.error(f"Server {name!r} is not in the database; pick another in the sidebar.")
    st.stop()

# A sweep loads a server: it is a control, behind the one gate (components.auth).
if auth.control_gate(ctx.settings) is not None:  # drawn; the click asks auth.actor_at_click
    with st.form("sweep_form", border=True):
        st.markdown(f"**New sweep against {md_escape(name)}** (server picked in the sidebar)")
        c1, c2, c3, c4 = st.columns(4)
        workload = c1.selectbox("Workload", bm.PROMPT_SETS, key="bm_workload",
                                help="builtin: 24 short prompts · synthetic: fixed input length · "
                                     "shared-prefix: templated prompts that exercise the radix cache")
        default_levels = ",".join(str(v) for v in ctx.settings.probe.get("concurrency", [1, 4, 8, 16]))
        levels_text = c2.text_input("Concurrency levels", value=default_levels, key="bm_levels")
        requests = c3.number_input("Requests per level", min_value=1, max_value=100_000, value=50,
                                   step=10, key="bm_requests")
        max_new = c4.number_input("Max new tokens", min_value=1, max_value=32_768,
                                  value=int(ctx.settings.probe.get("max_new_tokens", 128)), key="bm_max_new")
        run_name = st.text_input("Name (optional)", key="bm_name", placeholder="e.g. radix on, c=1..16")
        submitted = st.form_submit_button("Start sweep…", type="primary")
    if submitted:
        try:
            req = bm.SweepRequest(
                server=name, levels=bm.parse_levels(levels_text), requests=int(requests),
                prompt_set=str(workload), max_new_tokens=int(max_new), name=run_name or None,
            )
        except bm.SweepRequestError as exc:
            st.error(str(exc))
        else:
            # Kept until Start / Cancel / dismiss, so the dialog survives a rerun of the page.
            st.session_state["bm_pending"] = req
    if st.session_state.get("bm_pending") is not None:
        confirm(st.session_state["bm_pending"])


@st.fragment(run_every=1.0)
@session.safe("Sweep progress")
def progress() -> None:
    active = bm.active_sweeps(session.engine_for(ctx.url), server_id=server_id)
    alive, summary = session.runner_status(ctx.url)
    ids = {it.id for it, _ in active}
    seen = st.session_state.get("bm_seen_active", set())
    st.session_state["bm_seen_active"] = ids
    if seen - ids:  # a sweep this tab watched has finished: redraw the runs and curves below
        _runs.clear()
        _curves.clear()
        st.rerun(scope="app")
    if not active:
        last = st.session_state.get("bm_last_started")
        if last is not None:
            run = bm.get_run(session.engine_for(ctx.url), run_id=int(last))
            if run is not None and run.status in ("done", "aborted", "failed"):
                msg = f"Sweep {md_escape(run.name or 'run ' + str(run.id))} finished: {run.status}."
                if run.status == "done":
                    st.success(msg)
                else:
                    st.error(msg + (f" {md_escape(run.error)}" if run.error else ""))
        return
    if not alive:
        st.warning(summary + " Pending sweeps start when it runs.")
    for intent, run in active:
        frac = float(run.progress or 0.0) if run is not None else 0.0
        label = md_escape(run.name or f"run {run.id}") if run is not None else f"intent {intent.id}"
        state = "waiting for the runner" if intent.state == "pending" else (run.status if run else intent.state)
        st.progress(min(max(frac, 0.0), 1.0), text=f"Sweep {label}: {state}, {frac:.0%} · requested {fmt_age(intent.created_at)}")
    _runs.clear()


progress()

runs = _runs(ctx.url, server_id)
if runs.empty:
    st.info("No sweeps yet for this server. Start one above; its curves appear here when it finishes.")
    st.stop()

shown = runs.assign(
    success=[fmt_value(v, "ratio") for v in runs["success_rate"]],
    error=runs["error"].fillna(""),
    progress=[f"{p:.0%}" for p in runs["progress"]],
    created=[fmt_age(t) for t in runs["created_at"]],
    trusted=runs["trusted"].map({True: "yes", False: "NOT trusted"}).fillna("—"),
)
st.subheader("Runs")
st.dataframe(
    shown[["id", "name", "status", "progress", "success", "created", "workload", "levels", "requests",
           "trusted", "fingerprint", "error"]],
    hide_index=True,
    width="stretch",
)

done = runs[runs["status"].isin(["done", "aborted"])]
if done.empty:
    st.caption("Curves appear when a sweep finishes.")
    st.stop()
labels = {int(r.id): f"{r.name} ({r.status})" for r in done.itertuples()}
default = [int(done["id"].iloc[0])]
picked = st.multiselect("Runs to plot", list(labels), default=default, format_func=labels.get, key="bm_pick")
if not picked:
    st.caption("Pick at least one run to see its curves.")
    st.stop()
curves, trade = _curves(ctx.url, tuple(picked))
if curves.empty:
    st.info("These runs have no per-level results (all levels failed?). See their errors above.")
    st.stop()

lat_metric = st.segmented_control(
    "Latency", ["ttft_s", "itl_s", "tpot_s", "e2e_s"], default="ttft_s",
    format_func=bm.LATENCY_KEYS.get, key="bm_lat",
) or "ttft_s"
a, b = st.columns(2)
lat = curves[(curves["metric"] == lat_metric) & curves["stat"].isin(["p50", "p99"])]
with a:
    if lat.empty:
        st.caption("No latency figures for this metric.")
    else:
        st.altair_chart(
            curves_chart(lat, x="level", y="value", unit="s",
                         title=f"{bm.LATENCY_KEYS[lat_metric]} vs concurrency"),
            width="stretch",
        )
thr = curves[curves["metric"] == "output_tok_s"]
with b:
    if thr.empty:
        st.caption("No throughput figures.")
    else:
        st.altair_chart(
            curves_chart(thr, x="level", y="value", unit="tok_s", title="Output throughput vs concurrency"),
            width="stretch",
        )
if not trade.empty:
    st.altair_chart(tradeoff_chart(trade), width="stretch")

for rid in picked:
    run = bm.get_run(ctx.engine, run_id=rid)
    if run is None:
        continue
    table = bm.level_table(run)
    if table.empty:
        continue
    untrusted = table[table["trusted"] == False]  # noqa: E712 - pandas element-wise
    head = f"{md_escape(run.name or 'run ' + str(run.id))} — fingerprint {run.fingerprint[:12] or '—'}"
    with st.expander(head, expanded=len(picked) == 1):
        if (table["ok"].fillna(0) == 0).all():
            st.error("No request of this run succeeded — the server was down or refused them "
                     "(errors below). Check the server on the Overview, then run it again.")
        if run.trusted is False or not untrusted.empty:
            st.warning("Some levels are NOT trusted: the probe client was overloaded, so their "
                       "latencies include its own queueing. " + "; ".join(untrusted["why_not_trusted"].unique()))
        pretty = pd.DataFrame({
            "level": table["level"],
            "requests": table["requests"],
            "ok": table["ok"],
            "success": [fmt_value(v, "ratio") for v in table["success_rate"]],
            "TTFT p50": [fmt_value(v, "s") for v in table["ttft_p50_s"]],
            "TTFT p99": [fmt_value(v, "s") for v in table["ttft_p99_s"]],
            "ITL p50": [fmt_value(v, "s") for v in table["itl_p50_s"]],
            "E2E p99": [fmt_value(v, "s") for v in table["e2e_p99_s"]],
            "output tok/s": [fmt_value(v, "count") for v in table["output_tok_s"]],
            "req/s": [fmt_value(v, "rps") for v in table["rps"]],
            "trusted": table["trusted"].map({True: "yes", False: "NOT trusted"}).fillna("—"),
            "errors": table["errors"],
        })
        st.dataframe(pretty, hide_index=True, width="stretch")
        steps = bm.step_table(run)
        if not steps.empty:
            st.caption("Per turn / branch: the radix cache's reuse (server-reported cached tokens).")
            st.bar_chart(steps, x="step", y="cache_hit_rate", height=220)
            st.dataframe(pd.DataFrame({
                "step": steps["step"], "requests": steps["requests"],
                "TTFT p50": [fmt_value(v, "s") for v in steps["ttft_p50_s"]],
                "TTFT p99": [fmt_value(v, "s") for v in steps["ttft_p99_s"]],
                "cache hit": [fmt_value(v, "ratio") for v in steps["cache_hit_rate"]],
                "input tokens": steps["input_tokens"],
            }), hide_index=True, width="stretch")
