"""Compare: scorecards of probe runs or launches side by side, config diff, workload check, exports.

With nothing picked it shows the scorecard of the sidebar's server over the sidebar's window.
The first pick is the baseline every delta is measured against; probe figures are compared at
the load levels the runs share (scorecard/matched.py), never across levels.

Query parameters preselect what to compare, so another page can link straight to a comparison:
`?runs=12,15` (probe run ids, the baseline first) or `?launches=3,4` (launch ids, the baseline
first). They are read on the first visit of a session; a linked id is offered however old when
that run is done or that launch recorded; ids that are not offered are named in a
warning and left out.
"""

from __future__ import annotations

import streamlit as st

from dashboard.components import auth, charts, session
from dashboard.components import scorecard as sc_view
from dashboard.components.format import grade_badge
from dashboard.components.scorecard import md_escape
from scorecard import compare as cmp_service
from scorecard.build import ScorecardError, build_scorecard
from scorecard.image_check import ImageCheck, ImageCheckError, image_check
from scorecard.model import Scorecard
from scorecard.slo import SloError

ctx = session.bootstrap()
st.title("Compare")


@st.cache_data(ttl=15, show_spinner="Scoring…")
def _card(url: str, what: str, ident: str, slo_key: str, kwh: float | None,
          window_s: int) -> Scorecard:
    settings = session.settings()
    engine = session.engine_for(url)
    common = {"settings_slo": settings.slo, "electricity_usd_per_kwh": kwh,
              "retention": dict(settings.retention)}
    if what == "run":
        return build_scorecard(engine, run_id=int(ident), **common)
    if what == "launch":
        return build_scorecard(engine, launch_id=int(ident), **common)
    return build_scorecard(engine, server=ident, since_s=float(window_s), **common)


@st.cache_data(ttl=15, show_spinner=False)
def _choices(url: str, what: str, linked: tuple[int, ...] = ()) -> list[tuple[int, str]]:
    """The newest runs / launches, and those a link names however old (if done / recorded)."""
    engine = session.engine_for(url)
    return (cmp_service.run_choices(engine, include=linked) if what == "run"
            else cmp_service.launch_choices(engine, include=linked))


def _ids(raw: str) -> tuple[list[int], list[str]]:
    """A link's comma-separated ids ("12,#15"): (ids, the parts that are not ids)."""
    ids, bad = [], []
    for part in (p.strip() for p in raw.split(",")):
        digits = part.lstrip("#")
        if digits.isdecimal() and digits.isascii():  # "²".isdigit() is True, int("²") raises
            ids.append(int(digits))
        elif part:
            bad.append(part)
    return ids, bad


@st.cache_data(ttl=60, show_spinner="Comparing images…")
def _image_check(url: str, run_a: int, run_b: int, ssim_min: float) -> ImageCheck:
    return image_check(session.engine_for(url), run_a=run_a, run_b=run_b, ssim_min=ssim_min)


def _preselect(options: list[tuple[int, str]], raw: str, key: str) -> None:
    """Seed the multiselect `key` from a comma-separated id list (once per session)."""
    if key in st.session_state:
        return
    known = {i for i, _ in options}
    named, unknown = _ids(raw)
    ids = [i for i in named if i in known]
    unknown += [str(i) for i in named if i not in known]
    if unknown:
        st.warning(f"Not offered to compare, left out: {md_escape(', '.join(unknown))} (only finished "
                   "probe runs and recorded launches can be compared; check the ids in the link).")
    st.session_state[key] = list(dict.fromkeys(ids))


settings = session.settings()
_linked = {"run": st.query_params.get("runs"), "launch": st.query_params.get("launches")}
if "cmp_what" not in st.session_state and (_linked["run"] or _linked["launch"]):
    st.session_state["cmp_what"] = "Probe runs" if _linked["run"] else "Launches"
what = st.segmented_control("Compare", ["Probe runs", "Launches"], default="Probe runs",
                            key="cmp_what") or "Probe runs"
kind = "run" if what == "Probe runs" else "launch"
options = _choices(ctx.url, kind, tuple(_ids(str(_linked[kind]))[0]) if _linked[kind] else ())
labels = dict(options)
if _linked[kind]:
    _preselect(options, str(_linked[kind]), f"cmp_pick_{kind}")
picked = st.multiselect(
    f"{what} (the first is the baseline)", [i for i, _ in options],
    format_func=lambda i: labels.get(i, str(i)), key=f"cmp_pick_{kind}",
    placeholder="Pick two or more to compare",
)

# The SLO version makes cached cards expire when a target is edited in the UI.
slo_key = repr(sorted(settings.slo.items())) + str(st.session_state.get("_slo_version", 0))
cards: list[Scorecard] = []
try:
    if picked:
        cards = [_card(ctx.url, kind, str(i), slo_key, settings.electricity_usd_per_kwh,
                       session.selected_window_s()) for i in picked]
    else:
        server = session.selected_server(ctx)
        if server is None:
            st.info("No servers yet: add one to pitwall.toml, then run a probe sweep to compare.")
            st.stop()
        st.caption(f"Nothing picked: the scorecard of {server} over the sidebar's window.")
        cards = [_card(ctx.url, "window", server, slo_key, settings.electricity_usd_per_kwh,
                       session.selected_window_s())]
except (ScorecardError, SloError) as exc:
    st.error(str(exc))
    st.stop()
if (caption := cmp_service.resolution_caption(cards)) is not None:
    st.caption(caption)  # a window older than the raw samples kept is scored from rollups

if len(cards) > 1:
    st.subheader("Side by side")
    cols = st.columns(len(cards))
    stats = {"image" if c.subject.get("server_kind") == "image" else "ttft" for c in cards}
    # one latency scale for every chart, so the eye compares heights, not tick labels
    top = (charts.latency_top([charts.levels_frame(c) for c in cards], next(iter(stats)))
           if len(stats) == 1 else None)
    for col, card in zip(cols, cards, strict=True):
        with col:
            st.markdown(f"**{sc_view.md_escape(card.title)}**")
            for d, dim in card.dimensions.items():
                label, color = grade_badge(dim.grade)
                st.markdown(f"{d.title()} :{color}-badge[{label}]")
            image = card.subject.get("server_kind") == "image"
            st.altair_chart(charts.latency_vs_load(
                charts.levels_frame(card), stat="image" if image else "ttft",
                title="Per-image latency vs concurrency" if image else None, y_max=top),
                width="stretch")
    with session.guard("Comparison"):
        comparison = cmp_service.compare(cards)
        kind = str(cards[0].subject.get("server_kind") or "llm")
        for i, card in enumerate(cards[1:], start=1):
            line = cmp_service.headline(comparison, kind, i)
            if line:
                st.markdown(f"**{sc_view.md_escape(card.title)}** against the baseline: "
                            f"{sc_view.md_escape(line)}")
            elif comparison.refusal:
                st.markdown(f"**{sc_view.md_escape(card.title)}** against the baseline: no "
                            "headline (no load level in common, and no goodput within an SLO "
                            "on both sides).")
        sc_view.comparison_view(comparison)
    runs = [c.subject.get("run_id") for c in cards[:2]]
    if kind == "image" and None not in runs and runs[0] != runs[1]:
        st.subheader("Image check")
        with session.guard("Image check"):
            try:
                chk = _image_check(ctx.url, int(runs[0]), int(runs[1]),
                                   float(settings.compare.get("ssim_min", 0.95)))
            except ImageCheckError as exc:
                st.warning(str(exc))
            else:
                sc_view.image_check_view(chk, (cards[0].title, cards[1].title))

st.subheader("Exports")
sc_view.download_buttons(ctx.engine, cards, key="cmp-dl", actor=auth.export_actor(settings))

st.subheader("Scorecards")
for i, card in enumerate(cards):
    with st.expander(sc_view.md_escape(card.title), expanded=len(cards) == 1):
        sc_view.scorecard_view(card, key=f"card{i}")

with st.expander("SLO targets"):
    server = cards[0].subject.get("server")
    # targets regrade every page: editing them is a control, behind the one gate
    can_edit = auth.control_gate(settings) is not None
    sc_view.slo_editor(ctx.engine, server, settings.slo, key="cmp-slo", disabled=not can_edit,
                       actor=lambda: auth.actor_at_click(settings))
