"""Benchmarks: start a probe sweep (runs in the runner, not here), follow it live, read its curves.

Starting a sweep is a control: only the operator `auth.control_gate` lets through sees the form,
and the sweep is recorded in Audit with the operator signed in when Start arrives
(`auth.actor_at_click`, views.benchmarks.start_sweep).

The form follows the server's kind: an LLM server is swept with LLM requests (workload, max new
tokens), an image server with the images API (image size, denoising steps, images per request).

Curves come from each run's stored per-level report: latency vs concurrency, throughput vs
concurrency, and the latency/throughput trade-off across runs; for image runs per-image latency
(seconds), images/min and seconds per step. After a sweep finishes the newest run is the one
plotted. A level whose client self-check failed is drawn hollow; one note per run says which
levels and why, the table marks them ("no: lag").
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

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


def _sec(v: object) -> str:
    """Seconds as seconds (an image takes seconds; fmt_value would switch to ms below 1 s)."""
    return "—" if v is None or v != v else f"{float(v):,.3g} s"  # type: ignore[arg-type]


def _chart(col: DeltaGenerator, df: pd.DataFrame, unit: str, title: str, empty: str) -> None:
    with col:
        if df.empty:
            st.caption(empty)
        else:
            st.altair_chart(curves_chart(df, x="level", y="value", unit=unit, title=title), width="stretch")


def _forget_pending() -> None:
    st.session_state.pop("bm_pending", None)


@st.dialog("Start a sweep?", on_dismiss=_forget_pending)
def confirm(req: bm.SweepRequest) -> None:
    total = req.requests * len(req.levels)
    status = bm.server_status(session.engine_for(ctx.url), req.server)
    if status != "up":
        st.warning(f"{req.server} is {status} right now: requests will fail until it is up "
                   "(see Overview / Events).")
    what = "requests"
    if req.api == "images":
        steps = f"{req.image_steps} steps" if req.image_steps else "the server's default steps"
        what = (f"image requests ({req.image_size}, {steps}, {req.images_per_request} "
                f"image{'s' if req.images_per_request > 1 else ''} each)")
    st.write(
        f"This sends about {total:,} {what} (plus warm-up) to **{md_escape(req.server)}** at "
        f"concurrency {', '.join(map(str, req.levels))}. Live traffic on that server will see extra load."
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

def _replay_form() -> None:
    """A stored trace as the workload: a replay of it against this server (the runner runs it as a
    sweep; the Traces page previews traces and lists their replays)."""
    from dashboard.services.views import traces as tv

    names = tv.table(ctx.engine)["name"].tolist()
    if not names:
        return
    with st.expander(f"Or replay a stored trace against {name}"):
        with st.form("bm_replay", border=False):
            r1, r2 = st.columns([3, 1])
            trace = r1.selectbox("Trace", names, key="bm_replay_trace")
            speed = r2.number_input("Speed (x)", min_value=0.01, max_value=tv.MAX_SPEED, value=1.0, key="bm_replay_speed")
            go = st.form_submit_button("Replay")
        if go and (who := auth.actor_at_click(ctx.settings)):
            from collectors.trace.model import TraceError

            try:
                run_id, _ = tv.start_replay(session.engine_for(ctx.url), server=name, trace=str(trace),
                                            speed=float(speed), window=(None, None), max_requests=None,
                                            requested_by=who)
            except TraceError as exc:
                st.error(str(exc))
            else:
                st.session_state["bm_last_started"] = run_id
                _runs.clear()
                st.rerun()


# A sweep loads a server: it is a control, behind the one gate (components.auth).
kind = bm.server_kind(ctx.engine, name)
if auth.control_gate(ctx.settings) is not None:  # drawn; the click asks auth.actor_at_click
    with st.form("sweep_form", border=True):
        what = "image server: images API" if kind == "image" else "LLM server"
        st.markdown(f"**New sweep against {md_escape(name)}** ({what}; server picked in the sidebar)")
        c1, c2, c3, c4, *c5 = st.columns(5 if kind == "image" else 4)
        default_levels = ",".join(str(v) for v in ctx.settings.probe.get("concurrency", [1, 4, 8, 16]))
        img_steps: float | None = None  # images only; None leaves them to the server
        if kind == "image":
            size = c1.selectbox("Image size", bm.IMAGE_SIZES, index=bm.IMAGE_SIZES.index("1024x1024"),
                                key="bm_img_size", help="width x height in pixels")
            levels_text = c2.text_input("Concurrency levels", value="1,2", key="bm_levels")
            # 9: three repeats of 3 requests, the fewest that give each figure a measured spread
            # (collectors/probe/stats.py), so a Compare can tell a tie from a change
            requests = c3.number_input("Requests per level", min_value=1, max_value=100_000, value=9,
                                       step=1, key="bm_requests")
            img_steps = c4.number_input("Steps", min_value=1, max_value=1000, value=20, key="bm_img_steps",
                                    help="denoising steps per image (num_inference_steps)")
            n_images = c5[0].number_input("Images per request", min_value=1, max_value=16, value=1,
                                       key="bm_img_n")
            workload, max_new = "builtin", 1
        else:
            workload = c1.selectbox("Workload", bm.PROMPT_SETS, key="bm_workload",
                                    help="builtin: 24 short prompts · synthetic: fixed input length · "
                                         "shared-prefix: templated prompts that exercise the radix cache")
            levels_text = c2.text_input("Concurrency levels", value=default_levels, key="bm_levels")
            requests = c3.number_input("Requests per level", min_value=1, max_value=100_000, value=50,
                                       step=10, key="bm_requests")
            max_new = c4.number_input("Max new tokens", min_value=1, max_value=32_768,
                                      value=int(ctx.settings.probe.get("max_new_tokens", 128)), key="bm_max_new")
            size, n_images = "1024x1024", 1
        run_name = st.text_input("Name (optional)", key="bm_name",
                                 placeholder="e.g. torch compile on, c=1..2" if kind == "image" else
                                 "e.g. radix on, c=1..16")
        submitted = st.form_submit_button("Start sweep…", type="primary")
    if submitted:
        try:
            req = bm.SweepRequest(
                server=name, levels=bm.parse_levels(levels_text), requests=int(requests),
                prompt_set=str(workload), max_new_tokens=int(max_new), name=run_name or None,
                api="images" if kind == "image" else "generate", image_size=str(size),
                image_steps=int(img_steps) if img_steps else None, images_per_request=int(n_images),
            )
        except bm.SweepRequestError as exc:
            st.error(str(exc))
        else:
            # Kept until Start / Cancel / dismiss, so the dialog survives a rerun of the page.
            st.session_state["bm_pending"] = req
    if st.session_state.get("bm_pending") is not None:
        confirm(st.session_state["bm_pending"])
    _replay_form()


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
    trusted=runs["trust"],
)
st.subheader("Runs")
st.dataframe(
    shown[["id", "name", "status", "progress", "success", "created", "workload", "levels", "requests",
           "trusted", "fingerprint", "error"]],
    hide_index=True,
    width="stretch",
)

latest = runs.iloc[0]
if latest["status"] == "failed" and latest["error"]:  # the reason in full, not a clipped cell
    st.error(f"The latest run, {md_escape(str(latest['name']))}, failed: {md_escape(str(latest['error']))}")

done = runs[runs["status"].isin(["done", "aborted"])]
if done.empty:
    st.caption("Curves appear when a sweep finishes.")
    st.stop()
labels = {int(r.id): f"{r.name} ({r.status})" for r in done.itertuples()}
# The newest finished run is the one drawn: when a newer one appears (a sweep just finished) or
# the server changes, the pick moves to it; otherwise the operator's own pick stays.
newest = (server_id, int(done["id"].iloc[0]))
if st.session_state.get("bm_newest") != newest or not set(st.session_state.get("bm_pick") or []) <= set(labels):
    st.session_state["bm_newest"] = newest
    st.session_state["bm_pick"] = [newest[1]]
picked = st.multiselect("Runs to plot", list(labels), format_func=labels.get, key="bm_pick")
if not picked:
    st.caption("Pick at least one run to see its curves.")
    st.stop()
curves, trade = _curves(ctx.url, tuple(picked))
if curves.empty:
    st.info("These runs have no per-level results (all levels failed?). See their errors above.")
    st.stop()

if curves["metric"].isin(["per_image_s", "images_per_min", "s_per_step"]).any():
    a, b = st.columns(2)  # two a row, as the LLM charts: room for whole legends at 1400 px
    _chart(a, curves[curves["metric"] == "per_image_s"], "sec", "Per-image latency (s) vs concurrency",
           "No per-image latency.")
    _chart(b, curves[curves["metric"] == "images_per_min"], "img_min", "Images/min vs concurrency",
           "No images/min.")
    c, d = st.columns(2)
    _chart(c, curves[curves["metric"] == "s_per_step"], "s_step", "Seconds per step vs concurrency",
           "No s/step: the steps were left to the server, or it did not report inference_time_s.")
    d.caption("Per-image latency: a request's end-to-end time ÷ its images, as the client saw it "
              "(queueing included). Seconds per step: the server's own inference_time_s ÷ steps, an "
              "upper bound on one denoising step (text encoding and decoding are inside it).")
else:
    lat_metric = st.segmented_control(
        "Latency", ["ttft_s", "itl_s", "tpot_s", "e2e_s"], default="ttft_s",
        format_func=bm.LATENCY_KEYS.get, key="bm_lat",
    ) or "ttft_s"
    a, b = st.columns(2)
    lat = curves[(curves["metric"] == lat_metric) & curves["stat"].isin(["p50", "p99"])]
    _chart(a, lat, "s", f"{bm.LATENCY_KEYS[lat_metric]} vs concurrency", "No latency figures for this metric.")
    _chart(b, curves[curves["metric"] == "output_tok_s"], "tok_s", "Output throughput vs concurrency",
           "No throughput figures.")
    if not trade.empty:
        st.altair_chart(tradeoff_chart(trade), width="stretch")

for rid in picked:
    run = bm.get_run(ctx.engine, run_id=rid)
    if run is None:
        continue
    table = bm.level_table(run)
    if table.empty:
        continue
    head = f"{md_escape(run.name or 'run ' + str(run.id))} — fingerprint {run.fingerprint[:12] or '—'}"
    with st.expander(head, expanded=len(picked) == 1):
        if (table["ok"].fillna(0) == 0).all():
            st.error("No request of this run succeeded — the server was down or refused them "
                     "(errors below). Check the server on the Overview, then run it again.")
        note = bm.trust_note(run)
        if note:
            st.warning(note)  # once per run; the table's "trusted" column only marks the levels
        figures = {"level": table["level"], "requests": table["requests"], "ok": table["ok"],
                   "success": [fmt_value(v, "ratio") for v in table["success_rate"]]}
        if run.api == "images":
            figures.update({
                "per image p50 (s)": [_sec(v) for v in table["per_image_p50_s"]],
                "per image p99 (s)": [_sec(v) for v in table["per_image_p99_s"]],
                "s/step p50": [_sec(v) for v in table["s_per_step_p50"]],
                "images/min": [fmt_value(v, "count") for v in table["images_per_min"]],
            })
        else:
            figures.update({
                "TTFT p50": [fmt_value(v, "s") for v in table["ttft_p50_s"]],
                "TTFT p99": [fmt_value(v, "s") for v in table["ttft_p99_s"]],
                "ITL p50": [fmt_value(v, "s") for v in table["itl_p50_s"]],
                "E2E p99": [fmt_value(v, "s") for v in table["e2e_p99_s"]],
                "output tok/s": [fmt_value(v, "count") for v in table["output_tok_s"]],
            })
        figures.update({"req/s": [fmt_value(v, "rps") for v in table["rps"]],
                        "trusted": table["trust"], "errors": table["errors"]})
        st.dataframe(pd.DataFrame(figures), hide_index=True, width="stretch")
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
