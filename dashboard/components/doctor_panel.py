"""The doctor's section of the Server page (dashboard/services/doctor.py): each finding with its
evidence and time range, and "Make candidate profile" (behind the control gate) that writes the
suggested change as a profile derived from the server's own, ready for the Tune page."""

from __future__ import annotations

import streamlit as st

from dashboard.components import auth, session
from dashboard.components.format import fmt_ts
from dashboard.components.scorecard import md_escape
from dashboard.services import doctor
from dashboard.services.tune import TuneRequestError
from dashboard.services.views import timeseries as ts
from launching.profiles import candidates_dir


@st.cache_data(ttl=120, show_spinner=False)  # keyed by the window: `until` moves on a 10/60-s grid
def _reading(url: str, server: str, since: float, until: float) -> tuple[doctor.Evidence | None,
                                                                        list[doctor.Finding]]:
    """(evidence, findings) of a window; cached like the page's other reads (the 7-day read
    is raw samples of a dozen series, most of a second on a busy host)."""
    ev = doctor.gather(session.engine_for(url), server, since=since, until=until)
    return ev, (doctor.diagnose(ev) if ev is not None else [])


def doctor_section(ctx: session.AppContext, server: str, window_s: float) -> None:
    since, until = ts.window(window_s)  # on the charts' grid: a refresh reuses the reading
    ev, findings = _reading(ctx.url, server, since, until)
    st.subheader("Doctor")
    since = ev.since if ev is not None else since
    st.caption(f"Rules from {doctor.guidance(ev)} over {fmt_ts(since)} → {fmt_ts(until)} "
               "(the running launch only).")
    if not findings:
        st.caption("No finding in this window: no rule's evidence is there. What each rule read:")
        if ev is not None:  # the reading, so a quiet doctor is seen to have looked
            st.markdown("\n".join(f"- {md_escape(line)}" for line in doctor.checked(ev)))
        return
    can_act = auth.operator(ctx.settings) is not None  # drawn; the click asks actor_at_click
    for f in findings:
        with st.container(border=True):
            st.markdown(f"**{md_escape(f.title)}**  \n{md_escape(f.evidence)}  \n_{md_escape(f.suggestion)}_")
            change = ", ".join(f"--{k}={v}" for k, v in f.flags.items())
            st.code(change, language=None)
            if (can_act and st.button("Make candidate profile", key=f"doctor_{f.rule}")
                    and auth.actor_at_click(ctx.settings) is not None):
                try:
                    name = doctor.make_candidate(ctx.engine, ctx.settings.profiles_dir,
                                                  candidates_dir(ctx.settings.data_dir), server, f)
                except TuneRequestError as exc:
                    st.error(str(exc))
                else:
                    st.success(f"Profile {name} written to {candidates_dir(ctx.settings.data_dir)}; "
                               "pick it on the Tune page as a candidate.")
