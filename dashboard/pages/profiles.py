"""Profiles: the launch profiles, what differs from the running one, validation, editing, and
one-click relaunch / stop of a managed server with a live status panel.

Thin: reads and actions go through dashboard.services.profile_admin / launcher; the runner does
the work (this page only records intents). Every control (Validate, Relaunch, Stop, Save) goes
through `auth.control_gate`: disabled until an operator signs in when a credential is configured,
hidden in read-only mode (components.auth has the rules).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard.components import auth, session
from dashboard.components.format import fmt_age
from dashboard.components.scorecard import md_escape
from dashboard.services import profile_admin, rerun
from dashboard.services.views.benchmarks import SweepRequestError
from launching import launcher, profiles
from present.format import request_label

ctx = session.bootstrap()
st.title("Profiles")
st.caption(
    f"Launch profiles live in `{ctx.settings.profiles_dir.name}/` (one TOML file each) and are "
    "mirrored into storage. One lifecycle action per server at a time: a relaunch requested "
    "while another is pending or running is refused."
)

states = profile_admin.managed_servers(ctx.engine)
table, specs, errors = profile_admin.profile_table(ctx.settings)
for err in errors:
    st.warning(err)
if (beyond := profile_admin.sandbox_warning(ctx.settings)) is not None:
    st.warning(beyond, icon="⚠️")
by_name = {s.name: s for s in specs}

# what is drawn; what a click does asks auth.actor_at_click when it arrives (dialogs and live
# panels rerun without this line)
can_act = auth.control_gate(ctx.settings) is not None
show_controls = not ctx.settings.read_only  # read-only hides them; otherwise disabled until sign-in
NEEDS_SIGN_IN = "sign in as an operator first"

# -- server -----------------------------------------------------------------------------------
names = [s.server.name for s in states]
server_name: str | None = None
if not names:
    st.info("No managed server: add one with `managed = true` and a `profile` in pitwall.toml (or run the demo).")
else:
    wanted = session.selected_server(ctx)
    server_name = st.selectbox("Managed server", names, index=names.index(wanted) if wanted in names else 0)
st.caption(profile_admin.restart_policy(ctx.engine, ctx.settings, server_name))
running_now = next((s.launch.profile_name for s in states if s.server.name == server_name and s.launch), None)

# -- live status of the newest lifecycle intent -------------------------------------------------


@st.fragment(run_every=1)
@session.safe("Relaunch status")
def status_panel() -> None:
    if server_name is None:
        return
    launch = profile_admin.current_launch(ctx.engine, server_name)
    if launch is not None:
        st.markdown(
            f"**{md_escape(server_name)}** runs profile **{md_escape(launch.profile_name or '—')}** "
            f"(`{launch.profile_hash or '—'}`), {profile_admin.launch_name(ctx.engine, server_name, launch)}, {launch.status}, "
            f"started {fmt_age(launch.started_at)}."
        )
    else:
        st.markdown(f"**{md_escape(server_name)}** is not running.")
    intent = profile_admin.latest_intent(ctx.engine, server_name)
    if intent is None:
        st.caption("No launch, stop or relaunch requested yet.")
        return
    _refresh_when_finished(int(intent.id or 0), intent.state)
    prog = intent.progress or {}
    stage = prog.get("stage") or intent.state
    head = (f"{request_label(intent.id, intent.kind, start=True)} ({md_escape((intent.payload or {}).get('profile') or '—')}) "
            f"by {md_escape(intent.requested_by)}: **{md_escape(stage)}**")
    # intent messages can end in a raw log line: escaped, so log text is shown as text
    message = md_escape(intent.message or "")
    if intent.state in ("pending", "running"):
        st.markdown(head)
        if intent.state == "pending" and not profile_admin.runner_alive(ctx.engine):
            st.warning("No runner is alive to carry this out; start it with `pitwall up`.")
        st.progress(min(max(float(prog.get("fraction") or 0.0), 0.0), 1.0), text=str(prog.get("detail") or intent.state))
    elif intent.state == "done":
        st.success(f"{head} — {message}")
    elif stage == "rolled back":
        st.warning(f"{head} — {message}")
        excerpt = (intent.result or {}).get("excerpt")
        if excerpt:
            with st.expander("Why: the failing log excerpt"):
                st.code(excerpt, language=None)
    else:
        st.error(f"{head} — {message}")
    if intent.kind == "relaunch" and intent.state == "done":
        rerun_panel(intent)


def _refresh_when_finished(intent_id: int, state: str) -> None:
    """A lifecycle request that finishes while this tab watches reruns the whole page, so the
    diff against what runs (drawn outside this panel) is not left stale."""
    seen = st.session_state.get(SEEN)
    st.session_state[SEEN] = (intent_id, state)
    if seen is not None and seen != (intent_id, state) and state not in ("pending", "running"):
        st.rerun()


def rerun_panel(intent: Any) -> None:
    """After a relaunch: rerun the replaced launch's last sweep on the new launch, then Compare."""
    rs = rerun.state(ctx.engine, intent)
    if not rs.offered:
        return
    if rs.baseline is None:
        st.caption("The launch this relaunch replaced has no finished sweep, so there is no baseline "
                   "workload to rerun; start a sweep on the Benchmarks page.")
        return
    if rs.rerun is None:
        st.caption(f"Baseline (the replaced launch's last sweep): {md_escape(rerun.workload_words(rs.baseline))}.")
        if show_controls and st.button("Rerun the baseline workload", disabled=not can_act, key="pw_rerun",
                                       help="the same sweep on the new launch, then Compare both runs"
                                       if can_act else NEEDS_SIGN_IN):
            actor = auth.actor_at_click(ctx.settings)
            if actor is not None and server_name is not None:
                try:
                    rerun.rerun_baseline(ctx.engine, server_name, rs.baseline, intent, actor=actor)
                except SweepRequestError as exc:
                    st.error(str(exc))
                else:
                    st.rerun()
        return
    run = rs.rerun
    if rs.compare_params is not None:
        st.success(f"Rerun done: run {run.id} on the new launch, baseline run {rs.baseline.id}.")
        st.page_link("dashboard/pages/compare.py", label=f"Compare run {rs.baseline.id} (before) with run {run.id} (after)",
                     icon=":material/compare_arrows:", query_params=rs.compare_params)
    elif run.status in ("pending", "running"):
        st.progress(min(max(float(run.progress or 0.0), 0.0), 1.0),
                    text=f"rerun of the baseline workload: run {run.id}, {run.status}")
    else:
        st.error(f"The rerun (run {run.id}) {run.status}: {md_escape(run.error or 'no reason recorded')}; "
                 "see the Benchmarks page.")

# -- profiles -----------------------------------------------------------------------------------
st.subheader("Profiles")
if table.empty:
    st.info("No profiles yet; create one below or add a TOML file to the profiles folder.")
else:
    st.dataframe(table, hide_index=True, width="stretch")

choices = list(by_name)
start = choices.index(running_now) if running_now in choices else 0
#: the picker's state key, per server (switching server starts again from what it runs)
PICKED = f"pw_profile-{server_name}"
picked = st.selectbox("Profile", choices, index=start, key=PICKED) if choices else None
spec = by_name.get(picked) if picked else None

if spec is not None and server_name is not None:
    running, diff = profile_admin.running_diff(ctx.engine, server_name, spec)
    if diff is None:
        st.caption(f"{server_name} is not running a known profile; nothing to diff against.")
    elif diff.empty:
        st.caption(f"{spec.name} launches exactly what {server_name} runs now ({running}).")
    else:
        st.markdown(f"**What changes on {md_escape(server_name)}** (running {md_escape(running)} → {md_escape(spec.name)})")
        st.dataframe(diff, hide_index=True, width="stretch")


CONFIRM = "pw_confirm"  # which confirmation dialog is open (UI state of this browser tab)
SEEN = f"pw_seen_intent-{server_name}"  # the (request, state) this tab last drew of this server


def _close_confirm() -> None:
    st.session_state.pop(CONFIRM, None)


def _open_relaunch(server: str) -> None:
    """The Relaunch… button's callback: the profile picked NOW (the picker's state as the click
    arrives), never the one the button was drawn with: a click right after a new pick can reach
    the button of the run before the pick, and would relaunch the old profile."""
    st.session_state[CONFIRM] = {"kind": "relaunch", "server": server, "profile": st.session_state[PICKED]}


@st.dialog("Confirm relaunch", on_dismiss=_close_confirm)
def confirm_relaunch(server: str, profile: str) -> None:
    srv = next(s for s in states if s.server.name == server)
    downtime = launcher.expected_downtime_s(ctx.engine, srv.server.id or 0, profile)
    dt = f"about {downtime:.0f} s (its last start)" if downtime is not None else "unknown (first start of this profile)"
    st.markdown(
        f"Relaunch **{server}** under profile **{profile}**?\n\n"
        f"The server stops (in-flight requests fail) and starts again; expected downtime {dt}. "
        "If the new profile does not come up, the last good profile is started again."
    )
    go, cancel = st.columns(2)
    if go.button("Relaunch now", type="primary"):
        _close_confirm()
        actor = auth.actor_at_click(ctx.settings)
        if actor is None:
            return
        try:
            profile_admin.request_action(ctx.engine, kind="relaunch", server_name=server, actor=actor, profile=profile)
        except launcher.LauncherError as exc:
            st.error(str(exc))
            return
        st.rerun()
    if cancel.button("Cancel"):
        _close_confirm()
        st.rerun()


@st.dialog("Confirm stop", on_dismiss=_close_confirm)
def confirm_stop(server: str) -> None:
    st.markdown(f"Stop **{md_escape(server)}**? In-flight requests fail; it stays down until launched again.")
    go, cancel = st.columns(2)
    if go.button("Stop now", type="primary"):
        _close_confirm()
        actor = auth.actor_at_click(ctx.settings)
        if actor is None:
            return
        try:
            profile_admin.request_action(ctx.engine, kind="stop", server_name=server, actor=actor)
        except launcher.LauncherError as exc:
            st.error(str(exc))
            return
        st.rerun()
    if cancel.button("Cancel"):
        _close_confirm()
        st.rerun()


if spec is not None and show_controls:
    cols = st.columns(4)
    if cols[0].button("Validate", disabled=not can_act,
                      help=f"flags ({profile_admin.flag_check_help()}), env, guardrails, and the "
                           "preflight on a server (driver, GPU architecture, memory plan); runs in the runner" if can_act else NEEDS_SIGN_IN):
        actor = auth.actor_at_click(ctx.settings)
        if actor is not None:
            profile_admin.request_validation(ctx.engine, profile=spec.name, server_name=server_name, actor=actor)
    if server_name is not None:
        cols[1].button("Relaunch…", type="primary", disabled=not can_act,
                       help=f"relaunch {server_name} under {spec.name}" if can_act else NEEDS_SIGN_IN,
                       on_click=_open_relaunch, args=(server_name,))
        cols[2].button("Stop…", disabled=not can_act, help=f"stop {server_name}" if can_act else NEEDS_SIGN_IN,
                       on_click=st.session_state.__setitem__, args=(CONFIRM, {"kind": "stop", "server": server_name}))


@st.fragment(run_every=1)
@session.safe("Validation")
def validation_panel(profile: str) -> None:
    """The newest validation of this profile, live: progress while the runner checks it, then
    the verdict and every issue (as text: messages can quote the engine's own output)."""
    intent = profile_admin.latest_validation(ctx.engine, profile)
    if intent is None:
        return
    prog = intent.progress or {}
    if intent.state in ("pending", "running"):
        with st.status(f"Validating {profile}…", state="running", expanded=True):
            if intent.state == "pending" and not profile_admin.runner_alive(ctx.engine):
                st.warning("No runner is alive to carry this out; start it with `pitwall up`.")
            st.progress(min(max(float(prog.get("fraction") or 0.0), 0.0), 1.0),
                        text=str(prog.get("detail") or "waiting for the runner"))
        return
    result = intent.result or {}
    message = md_escape(intent.message or "")
    if intent.state == "done" and result.get("ok"):
        st.success(message)
    else:
        st.error(message or f"Validation {intent.state}.")
    for issue in result.get("issues") or []:
        {"error": st.error, "warning": st.warning}.get(issue.get("severity"), st.info)(
            md_escape(str(issue.get("message"))))


# the live status right under the buttons that were clicked, not above the fold
status_panel()

if spec is not None:
    validation_panel(spec.name)

pending = st.session_state.get(CONFIRM)
if can_act and pending:
    if pending["kind"] == "relaunch":
        confirm_relaunch(pending["server"], pending["profile"])
    else:
        confirm_stop(pending["server"])

# -- edit -----------------------------------------------------------------------------------------
if can_act:
    st.subheader("Edit or create")
    form_tab, raw_tab = st.tabs(["Form", "Raw TOML"])
    base = spec or profiles.ProfileSpec(name="new-profile", model_path="Qwen/Qwen2.5-7B-Instruct")
    with form_tab, st.form("profile_form"):
        name = st.text_input("Name", base.name)
        description = st.text_input("Description", base.description)
        model_path = st.text_input("Model path", base.model_path)
        entrypoint = st.text_input("Entrypoint", base.entrypoint, help=profile_admin.entrypoint_help())
        st.caption("Flags without dashes; values as TOML: `0.8`, `true`, `\"lpm\"`.")
        flags = st.data_editor(
            [{"flag": k, "value": profile_admin.toml_literal(v)} for k, v in base.flags.items()] or [{"flag": "", "value": ""}],
            num_rows="dynamic", key=f"flags_{base.name}", width="stretch",
        )
        env = st.data_editor(
            [{"name": k, "value": v} for k, v in base.env.items()] or [{"name": "", "value": ""}],
            num_rows="dynamic", key=f"env_{base.name}", width="stretch",
        )
        if st.form_submit_button("Save profile") and (actor := auth.actor_at_click(ctx.settings)):
            try:
                saved, changes = profile_admin.save_form(
                    ctx.engine, ctx.settings, name=name, description=description, model_path=model_path,
                    entrypoint=entrypoint, flags=[(r.get("flag") or "", str(r.get("value") or "")) for r in flags],
                    env=[(r.get("name") or "", str(r.get("value") or "")) for r in env], actor=actor,
                )
                st.success(f"Saved {saved.name} ({len(changes)} change(s)); validate it before relaunching.")
            except profile_admin.ProfileError as exc:
                st.error(str(exc))
    with raw_tab, st.form("profile_raw"):
        text = st.text_area("TOML", profiles.dump_profile(base), height=320)
        if st.form_submit_button("Save TOML") and (actor := auth.actor_at_click(ctx.settings)):
            try:
                saved, changes = profile_admin.save_toml(ctx.engine, ctx.settings, text, actor)
                st.success(f"Saved {saved.name} ({len(changes)} change(s)).")
            except profile_admin.ProfileError as exc:
                st.error(str(exc))

with st.expander("Audit: who did what"):
    st.dataframe(profile_admin.audit_frame(ctx.engine), hide_index=True, width="stretch")
