"""Tune: find the best profile for a server unattended.

Pick candidate profiles and a workload, start (the runner relaunches the server under each,
runs the same probe workload, scores and ranks: runner/tunes.py), watch which candidate and
stage it is on with an ETA, stop it; read a finished tune: the verdict in one sentence above the
ranking (a winner, or a tie inside the measured spread, which has no winner), goodput with its
spread and a Pareto chart of cost against p99 latency (axes from zero), the winner's config diff
against the profile it started from, and "Apply winner" (a relaunch, behind the operator gate,
confirmed, audited; never offered for a tie). Candidates offered are of the server's kind; the
workload defaults to the server's own last sweep.

Starting, stopping and applying are controls behind `auth.control_gate`; the page does no work
itself: it records intents through dashboard/services/tune.py and reads them back.
"""

from __future__ import annotations

import streamlit as st

from dashboard.components import auth, session
from dashboard.components.scorecard import md_escape
from dashboard.services import tune
from dashboard.services.views import benchmarks as bm
from export import tune_doc
from export.charts import tune_goodput, tune_pareto
from present import tune_result
from present.format import request_label

ctx = session.bootstrap()
st.title("Tune")
st.caption("Relaunch a managed server under each candidate profile, run one workload, rank the candidates "
           "on goodput within the SLO, cost at that load, and stability. The server runs its original "
           "profile again at the end.")

name = session.server_or_stop(ctx, "No servers yet. Add one to `pitwall.toml` or run `pitwall up` for the demo.")


NO_TRACE = "— (the workload above)"


def _forget_pending() -> None:
    st.session_state.pop("tune_pending", None)


@st.dialog("Start a tune?", on_dismiss=_forget_pending)
def confirm(req: dict) -> None:
    st.write(f"**{md_escape(req['server'])}** is relaunched {len(req['profiles'])} times "
             f"({', '.join(map(md_escape, req['profiles']))}), then once more under its original profile"
             f"{' (or the winner)' if req['apply'] else ''}. It serves no other traffic reliably meanwhile.")
    a, b = st.columns(2)
    if a.button("Start tune", type="primary", key="tune_confirm"):
        _forget_pending()
        actor = auth.actor_at_click(ctx.settings)
        if actor is None:
            return
        try:
            tune.start_tune(session.engine_for(ctx.url), requested_by=actor, **req)
        except tune.TuneRequestError as exc:
            st.error(str(exc))
            return
        st.rerun()
    if b.button("Cancel", key="tune_cancel"):
        _forget_pending()
        st.rerun()


# what is drawn; every action asks auth.actor_at_click when its click arrives (the live panel
# below reruns on its own, without this line, long after the sign-in may have expired)
can_act = auth.control_gate(ctx.settings) is not None
if can_act:
    kind = tune.server_kind(ctx.engine, name)
    default = tune.default_workload(ctx.engine, name)
    d_load = dict(default.sweep.get("workload") or {})
    d_levels = ",".join(f"{float(v):g}" for v in default.sweep.get("levels") or [])
    d_set = str(d_load.get("prompt_set") or "builtin")
    sets = list(bm.PROMPT_SETS) if d_set in bm.PROMPT_SETS else [d_set, *bm.PROMPT_SETS]
    with st.form(f"tune_form_{name}", border=True):
        st.markdown(f"**New tune of {md_escape(name)}** (server picked in the sidebar)")
        profiles = st.multiselect("Candidate profiles", tune.profile_names(ctx.engine, kind=kind),
                                  key=f"tune_profiles_{name}",
                                  help=f"Only {'image' if kind == 'image' else 'LLM'} profiles: "
                                       f"{name} is {'an image' if kind == 'image' else 'an LLM'} server.")
        st.caption(md_escape(default.text) + "; change a field below to tune under another workload.")
        c1, c2, c3, c4 = st.columns(4)
        workload = c1.selectbox("Workload", sets, index=sets.index(d_set), key=f"tune_workload_{name}")
        levels_text = c2.text_input("Concurrency levels" if default.sweep.get("mode") != "rate" else "Rates (req/s)",
                                    value=d_levels, key=f"tune_levels_{name}")
        requests = c3.number_input("Requests per level", min_value=1, max_value=10_000,
                                   value=int(default.sweep.get("requests") or 40), key=f"tune_requests_{name}")
        max_new = None
        if kind != "image":
            max_new = c4.number_input("Max new tokens", min_value=1, max_value=32_768,
                                      value=int(d_load.get("max_new_tokens") or 128), key=f"tune_max_new_{name}")
        traces = [NO_TRACE, *tune.trace_names(ctx.engine)]
        on_trace = st.selectbox("Or rank on a stored trace", traces, key=f"tune_trace_{name}",
                                help="Each candidate's highest speed-up of the trace within the SLO (the "
                                     "repeats of its search are the spread a tie is judged by); the fields "
                                     "above are then unused.")
        apply = st.checkbox("Leave the server on the winner (apply)", key="tune_apply")
        submitted = st.form_submit_button("Start tune…", type="primary")
    if submitted and on_trace != NO_TRACE:
        try:
            sweep = tune.trace_workload(ctx.engine, ctx.settings.slo, server=name, trace=str(on_trace))
        except tune.TuneRequestError as exc:
            st.error(str(exc))
        else:
            st.session_state["tune_pending"] = {"server": name, "profiles": list(profiles), "apply": bool(apply),
                                                "sweep": sweep}
    elif submitted:
        sweep = dict(default.sweep)
        changed = (workload != d_set or levels_text.replace(" ", "") != d_levels or int(requests) != sweep.get("requests")
                   or (max_new is not None and int(max_new) != int(d_load.get("max_new_tokens") or 128)))
        try:
            if changed:
                levels = bm.parse_levels(levels_text)
                sweep.update(levels=[float(v) for v in levels], requests=int(requests),
                             workload={**d_load, "prompt_set": str(workload),
                                       **({"max_new_tokens": int(max_new)} if max_new is not None else {})})
        except bm.SweepRequestError as exc:
            st.error(str(exc))
        else:
            st.session_state["tune_pending"] = {"server": name, "profiles": list(profiles), "apply": bool(apply),
                                                "sweep": sweep}
    if st.session_state.get("tune_pending") is not None:
        confirm(st.session_state["tune_pending"])


@st.fragment(run_every=1.0)
@session.safe("Tune progress")
def progress() -> None:
    active = [i for i in tune.list_tunes(session.engine_for(ctx.url), server=name, limit=5)
              if i.state in ("pending", "running")]
    if not active:
        if st.session_state.pop("tune_watching", None) is not None:
            st.rerun(scope="app")  # the tune just ended: draw its result view below
        return
    it = active[0]
    st.session_state["tune_watching"] = it.id
    prog = it.progress or {}
    st.markdown(f"**{request_label(it.id, 'tune', start=True)}** · {md_escape(str(prog.get('detail') or it.state))}")
    st.progress(float(prog.get("fraction") or 0.0), text=tune.eta_text(prog) or "estimating the time left…")
    if can_act and st.button("Stop after this step", key=f"tune_stop_{it.id}"):
        actor = auth.actor_at_click(ctx.settings)
        if actor is not None:
            tune.stop_tune(session.engine_for(ctx.url), int(it.id or 0), actor=actor)
            st.toast("The tune stops after the current step and restores the original profile.")


progress()

st.subheader("Tune runs")
runs = tune.list_tunes(ctx.engine, server=name, limit=20)
finished = [r for r in runs if r.result and r.result.get("candidates")]
if not finished:
    st.caption("No tune with results yet for this server.")
    st.stop()
labels = {f"{request_label(r.id, 'tune')} · {r.state} · {', '.join((r.payload or {}).get('profiles') or [])}": r for r in finished}
chosen = labels[st.selectbox("Tune run", list(labels), key="tune_pick")]
result = chosen.result or {}
open_run = chosen.state in ("pending", "running")
said = None if open_run else tune_result.verdict(result)
best = said.winner if said is not None else None
if said is None:
    st.info("Not ranked yet: the verdict comes when every candidate has been measured.")
elif said.tied:
    st.warning(md_escape(said.text))
elif best:
    st.success(md_escape(said.text))
else:
    st.info(md_escape(said.text))
st.markdown(f"Running now: {md_escape(str(result.get('restored_profile') or ('in progress' if open_run else '?')))} · workload fingerprint "
            f"`{md_escape(str(result.get('workload') or '?'))}`")
st.dataframe(tune_result.ranking_frame(result), hide_index=True, width="stretch", placeholder="—",
             column_config={"goodput req/s": st.column_config.NumberColumn(format="%.2f"),
                            "p99 TTFT ms": st.column_config.NumberColumn(format="%.0f"),
                            "p99 ITL ms": st.column_config.NumberColumn(format="%.1f"),
                            "output tok/s": st.column_config.NumberColumn(format="%.0f"),
                            "USD / 1M out": st.column_config.NumberColumn(format="%.3f")})

goodput = tune_result.goodput_frame(result)
if not goodput.empty:
    st.altair_chart(tune_goodput(goodput), width="stretch")
points = tune_result.pareto_frame(result)
if points.empty:
    st.caption("No candidate has both a cost and a p99 latency (is a GPU price configured?).")
else:
    cost_label = "USD per image" if result.get("image") else "USD per 1M output tokens"
    st.altair_chart(tune_pareto(points, slo_ms=tune_result.slo_line_ms(result), cost_label=cost_label), width="stretch")

export_cols = st.columns(len(tune_doc.TUNE_FORMATS) + 2)
for col, fmt in zip(export_cols, tune_doc.TUNE_FORMATS, strict=False):
    col.download_button(
        f"Review document ({fmt})",
        data=tune_doc.maker(ctx.engine, int(chosen.id or 0), fmt, actor=auth.export_actor(ctx.settings)),
        file_name=tune_doc.tune_filename(int(chosen.id or 0), name, fmt), mime=tune_doc.TUNE_MEDIA_TYPES[fmt],
        key=f"tune_dl_{fmt}", on_click="ignore", width="stretch")

diff = tune_result.winner_diff(ctx.engine, result)
if diff is not None:
    st.markdown("**Winner against the profile the tune started from**")
    if diff.empty:
        st.caption("The winner is the profile the server started from.")
    else:
        st.dataframe(diff, hide_index=True, width="stretch")

if (can_act and best and chosen.state == "done"
        and best != result.get("restored_profile")):  # nothing to apply when it already runs; a tie has no winner
    if st.button(f"Apply winner ({best})…", key="tune_apply_btn"):
        st.session_state["tune_apply_pending"] = chosen.id
    if st.session_state.get("tune_apply_pending") == chosen.id:
        st.warning(f"Relaunch {md_escape(name)} under **{md_escape(best)}**? It rolls back "
                   "if the profile does not come up.")
        a, b = st.columns(2)
        if a.button("Relaunch now", type="primary", key="tune_apply_yes"):
            st.session_state.pop("tune_apply_pending", None)
            actor = auth.actor_at_click(ctx.settings)
            try:
                if actor is not None:
                    sub = tune.apply_winner(ctx.engine, int(chosen.id or 0), actor=actor)
                    st.success(f"Relaunch requested ({request_label(sub.id, 'relaunch')}); follow it on the Profiles page.")
            except tune.TuneRequestError as exc:
                st.error(str(exc))
        if b.button("Cancel", key="tune_apply_no"):
            st.session_state.pop("tune_apply_pending", None)
            st.rerun()
