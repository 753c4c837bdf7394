"""Alerts: what fires and what is pending, with its figure; the history with
durations; silences (create and expire behind the operator gate, audited); the rules with their
last evaluation; and the receivers with what waits in their outbox.

The runner evaluates and delivers (runner/alerts/); this page only reads, records silences
through dashboard/services/alerts/views.py and rule edits through rule_edits.py (the runner reads
those at its next pass). Summaries and labels are shown in st.dataframe,
which renders text literally.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.components import auth, session
from dashboard.components.format import fmt_ts, fmt_window
from dashboard.services.alerts import rule_edits, views
from runner.alerts.rules import SEVERITIES, AlertRuleError

ctx = session.bootstrap()
st.title("Alerts")
st.caption("The runner evaluates every rule on each server and sends what fires to Alertmanager and webhooks "
           "(see README, Alerts). Silences quiet notifications; the alert itself still shows here.")

ANY = "(any)"
DURATIONS = {"30 minutes": 1800.0, "1 hour": 3600.0, "2 hours": 7200.0, "4 hours": 14400.0,
             "8 hours": 28800.0, "1 day": 86400.0, "7 days": 604800.0}


def _minutes(seconds: float | None) -> str:
    """A duration as `45 s`, `12 min`, `3.5 h` or `2.0 d`."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 86400 else f"{seconds / 86400:.1f} d"


def _alert_table(rows: list[dict], *, history: bool) -> pd.DataFrame:
    table = pd.DataFrame({
        "state": [r["state"] for r in rows],
        "severity": [r["severity"] for r in rows],
        "rule": [r["rule"] for r in rows],
        "server": [r["server"] or "—" for r in rows],
        "value": [r["value"] for r in rows],
        "summary": [r["summary"] for r in rows],
        "since (UTC)": [fmt_ts(r["since"]) for r in rows],
        "duration": [_minutes(r["duration_s"]) for r in rows],
        "silenced": [bool(r["silenced"]) for r in rows],
        "server page": [r["link"] or None for r in rows],
    })
    if history:
        table.insert(7, "resolved (UTC)", [fmt_ts(r["resolved_at"]) if r["resolved_at"] else "open" for r in rows])
    return table


def _show(table: pd.DataFrame, key: str) -> None:
    st.dataframe(table, hide_index=True, width="stretch", key=key, placeholder="—", column_config={
        "value": st.column_config.NumberColumn("value", format="%.4g"),
        "server page": st.column_config.LinkColumn("server page", display_text="open"),
    })


@st.fragment(run_every=session.LIVE_REFRESH_S)
@session.safe("Open alerts")
def open_alerts() -> None:
    rows = views.alerts(session.engine_for(ctx.url), open_only=True)
    firing = sum(1 for r in rows if r["state"] == "firing")
    st.subheader(f"Firing and pending ({firing} firing, {len(rows) - firing} pending)")
    if not rows:
        st.success("Nothing is firing or pending.")
        return
    _show(_alert_table(rows, history=False), "al_open")


open_alerts()

with session.guard("Alert history"):
    window_s = session.selected_window_s()
    st.subheader(f"History, last {fmt_window(window_s)}")
    past = views.alerts(ctx.engine, open_only=False, since_s=float(window_s))
    if past:
        _show(_alert_table(past, history=True), "al_history")
    else:
        st.caption("No alert in this window (widen it in the sidebar).")

st.subheader("Silences")
can_act = False  # what is drawn; each action asks auth.actor_at_click when its click arrives
with session.guard("Silences"):
    sil = views.silences(ctx.engine)
    if sil:
        st.dataframe(pd.DataFrame({
            "id": [s["id"] for s in sil], "state": [s["state"] for s in sil], "rule": [s["rule"] for s in sil],
            "server": [s["server"] for s in sil], "until (UTC)": [fmt_ts(s["until"]) for s in sil],
            "reason": [s["reason"] for s in sil], "by": [s["by"] for s in sil],
            "expired by": [s["expired_by"] or "" for s in sil],
        }), hide_index=True, width="stretch", key="al_silences")
    else:
        st.caption("No silences.")
    can_act = auth.control_gate(ctx.settings) is not None
    if can_act:
        rule_names = [r["rule"] for r in views.rules(ctx.settings, ctx.engine)]
        with st.form("al_silence_form", border=True):
            st.markdown("**New silence**")
            c1, c2, c3 = st.columns(3)
            rule = c1.selectbox("Rule", [ANY, *rule_names], key="al_sil_rule")
            server = c2.selectbox("On server", [ANY, *session.server_names(ctx.url)], key="al_sil_server")
            length = c3.selectbox("For", list(DURATIONS), index=2, key="al_sil_for")
            reason = st.text_input("Reason", key="al_sil_reason", placeholder="e.g. planned maintenance of prod-a")
            submitted = st.form_submit_button("Silence", type="primary")
        if submitted and (actor := auth.actor_at_click(ctx.settings)):
            try:
                sid = views.create_silence(ctx.engine, rule=None if rule == ANY else rule,
                                           server=None if server == ANY else server,
                                           duration_s=DURATIONS[length], reason=reason, actor=actor)
            except views.SilenceError as exc:
                st.error(str(exc))
            else:
                st.toast(f"Silence {sid} created.")
                session.firing_alerts.clear()  # the sidebar's count shows it at once
                st.rerun()
        active = [s for s in sil if s["state"] == "active"]
        if active:
            c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
            labels = {s["id"]: f"#{s['id']} · {s['rule']} @ {s['server']} · {s['reason']}" for s in active}
            pick = c1.selectbox("Active silence", list(labels), format_func=lambda i: labels[i], key="al_expire_pick")
            if (c2.button("Expire now", key="al_expire") and pick is not None
                    and (actor := auth.actor_at_click(ctx.settings))):
                views.expire_silence(ctx.engine, silence_id=int(pick), actor=actor)
                session.firing_alerts.clear()
                st.rerun()



def _done(message: str) -> None:
    st.toast(message)
    st.rerun()


def rule_editor(rules: list[dict]) -> None:
    """Change one rule's threshold / for / severity / on, revert or delete a page edit, or add a
    rule as TOML; each checked by the [[alerts]] parser (its message on a bad value, nothing
    stored) and audited under the operator signed in when the click arrives. The runner picks
    the change up at its next evaluation pass."""
    by_name = {r["rule"]: r for r in rules}
    name = st.selectbox("Rule to change", list(by_name), key="al_rule_pick")
    if name is None:
        return
    rule = by_name[name]
    with st.form("al_rule_form", border=True):
        st.markdown(f"**{name}** ({rule['kind']}, from {rule['origin']})")
        c1, c2, c3, c4 = st.columns(4, vertical_alignment="bottom")
        value = c1.number_input("Threshold (base units)", value=float(rule["value"]), format="%g",
                                key=f"al_rule_value_{name}", disabled=rule["kind"] != "threshold")
        for_s = c2.number_input("For (s)", value=float(rule["for_s"]), format="%g", key=f"al_rule_for_{name}")
        severity = c3.selectbox("Severity", SEVERITIES, index=SEVERITIES.index(rule["severity"]),
                                key=f"al_rule_sev_{name}")
        enabled = c4.checkbox("On", value=bool(rule["enabled"]), key=f"al_rule_on_{name}")
        saved = st.form_submit_button("Save rule", type="primary")
    if saved and (actor := auth.actor_at_click(ctx.settings)):
        change = {"for_s": for_s, "severity": severity, "enabled": enabled}
        if rule["kind"] == "threshold":
            change["value"] = value
        try:
            rule_edits.edit_rule(ctx.settings, ctx.engine, name=name, change=change, actor=actor)
        except AlertRuleError as exc:
            st.error(str(exc))
        else:
            _done(f"Rule {name} saved; the runner uses it from its next evaluation.")
    if rule["origin"] in ("page edit", "added on page"):
        label = "Delete this rule" if rule["origin"] == "added on page" else "Revert to pitwall.toml"
        if st.button(label, key="al_rule_remove") and (actor := auth.actor_at_click(ctx.settings)):
            _done(f"Rule {name} {rule_edits.remove_edit(ctx.settings, ctx.engine, name=name, actor=actor)}.")
    with st.form("al_rule_add_form", border=True):
        text = st.text_area("New rule (TOML, as an [[alerts]] table of pitwall.toml)", key="al_rule_new",
                            placeholder='name = "queue-deep"\nkind = "threshold"\nmetric = "queue_max"\n'
                                        'op = ">"\nvalue = 64\nfor_s = 120')
        added = st.form_submit_button("Add rule")
    if added and (actor := auth.actor_at_click(ctx.settings)):
        try:
            new = rule_edits.add_rule(ctx.settings, ctx.engine, text=text, actor=actor)
        except AlertRuleError as exc:
            st.error(str(exc))
        else:
            _done(f"Rule {new.name} added; the runner uses it from its next evaluation.")


with session.guard("Rules"):
    st.subheader("Rules")
    rules = views.rules(ctx.settings, ctx.engine)
    st.dataframe(pd.DataFrame({
        "rule": [r["rule"] for r in rules], "on": [bool(r["enabled"]) for r in rules],
        "from": [r["origin"] for r in rules],
        "kind": [r["kind"] for r in rules], "what": [r["what"] for r in rules],
        "for": [_minutes(r["for_s"]) if r["for_s"] else "—" for r in rules],
        "severity": [r["severity"] for r in rules],
        "last evaluation (UTC)": [fmt_ts(r["last_eval"]) if r["last_eval"] else "never" for r in rules],
        "cost ms": [r["eval_ms"] for r in rules],
        "active on": [", ".join(r["active_on"]) for r in rules],
    }), hide_index=True, width="stretch", key="al_rules", height=35 * (len(rules) + 1) + 3,
        column_config={"cost ms": st.column_config.NumberColumn("cost ms", format="%.2f",
                                                                help="last evaluation, all servers")})
    if can_act:
        with st.expander("Edit rules (pitwall.toml stays the default; page edits override it)"):
            rule_editor(rules)
    recv = views.receiver_status(ctx.settings, ctx.engine)
    if recv:
        st.dataframe(pd.DataFrame(recv), hide_index=True, width="stretch", key="al_receivers")
    else:
        st.caption("No receiver configured: alerts show here only. Set alerting.alertmanager_url or "
                   "alerting.webhook_url (README, Alerts).")
