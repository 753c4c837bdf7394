"""Streamlit widgets that draw scorecards, comparisons, SLO edits and export downloads.

Any page can show a scorecard with `scorecard_view(card)`; the numbers come from
scorecard (build, compare, slo) and export (formats), the
formats and colours from format.py.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Sequence

import pandas as pd
import streamlit as st
from sqlalchemy.engine import Engine

from collectors.engines import display_name
from dashboard.components.format import GRADE_COLORS, fmt_delta_pct, fmt_value, grade_badge, units
from export import formats
from scorecard import slo
from scorecard.compare import Comparison
from scorecard.compute import level_name
from scorecard.image_check import ImageCheck
from scorecard.metric_specs import (
    DIMENSION_LABELS,
    DIMENSIONS,
    SPECS_BY_KEY,
    specs_of,
)
from scorecard.model import ENGINE_VERSION_FIELD, Scorecard

VERDICT_STYLE = {
    "better": f"color: {GRADE_COLORS['pass'][1]}; font-weight: 600",
    "worse": f"color: {GRADE_COLORS['fail'][1]}; font-weight: 600",
    "not comparable": f"color: {GRADE_COLORS['warn'][1]}",
}  # a tie and every verdict-less figure stay uncoloured: the words carry the verdict


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>:~$])")


def md_escape(text: object) -> str:
    """Text from servers and profiles shown through st.markdown literally (no links, badges,
    LaTeX or HTML can be injected by a server or profile name)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def figures_frame(card: Scorecard, dimension: str) -> pd.DataFrame:
    rows = []
    for label, value, mark, target, note in formats.figure_rows(card, dimension):
        rows.append({"metric": label, "value": value, "grade": mark, "target": target,
                     "note": note})
    return pd.DataFrame(rows, columns=["metric", "value", "grade", "target", "note"])


def grade_row(card: Scorecard) -> None:
    """Four columns, one per dimension: the grade badge and why."""
    cols = st.columns(len(DIMENSIONS))
    for col, d in zip(cols, DIMENSIONS, strict=True):
        dim = card.dimensions[d]
        label, color = grade_badge(dim.grade, no_target=dim.no_target)
        with col.container(border=True):
            st.markdown(f"**{DIMENSION_LABELS[d]}** :{color}-badge[{label}]")
            for reason in dim.reasons[:4]:
                st.caption(md_escape(reason))


def scorecard_view(card: Scorecard, *, key: str = "sc", expanded: bool = True) -> None:
    """One scorecard: what it scores, grades, the figures per dimension, levels, provenance."""
    s = card.subject
    st.markdown(f"#### {md_escape(card.title)}")
    st.caption(md_escape(
        f"window {s.get('window_label')} · latency from {s.get('latency_source')}"
        + (f" · level {s['level']:g}" if s.get("level") is not None else "")
        + f" · fingerprint {card.provenance.get('fingerprint') or '—'}"
        + f" · {display_name(card.engine)} {card.provenance.get(ENGINE_VERSION_FIELD)}"
    ))
    for note in card.notes:
        st.info(md_escape(note))
    grade_row(card)
    tabs = st.tabs([DIMENSION_LABELS[d] for d in DIMENSIONS] + ["Levels", "Provenance"])
    for tab, d in zip(tabs, DIMENSIONS, strict=False):
        with tab:
            st.dataframe(figures_frame(card, d), hide_index=True, width="stretch")
            if d == "stability" and card.errors_by_kind:
                st.caption("Errors by kind: " + ", ".join(
                    f"{k} {n}" for k, n in sorted(card.errors_by_kind.items())))
    with tabs[len(DIMENSIONS)]:
        if card.levels:
            head, rows = formats.level_rows(card)
            st.dataframe(pd.DataFrame(rows, columns=head), hide_index=True, width="stretch")
        else:
            st.caption("No probe run behind this scorecard.")
    with tabs[len(DIMENSIONS) + 1]:
        st.dataframe(pd.DataFrame(formats.provenance_rows(card), columns=["field", "value"]),
                     hide_index=True, width="stretch")


def _spread_text(spread: Sequence[float] | None, unit: str) -> str:
    if spread is None:
        return "not measured"
    lo, hi = sorted(spread)
    return f"{fmt_value(lo, unit)}–{fmt_value(hi, unit)}"


def _delta_rows(items: Sequence[tuple[dict[str, str], str, Sequence[float | None], Sequence[str],
                                      Sequence[list[float] | None]]],
                titles: Sequence[str]) -> None:
    """One table of figures against the baseline, short cells that never clip: for each card its
    value (with the change against the baseline), for each candidate its verdict in a word, and
    each card's measured spread in a column of its own; which card is which is said above it."""
    rows, styles = [], []
    with_spread = any(any(sp is not None for sp in spreads) for *_, spreads in items)
    for lead, key, values, verdicts, spreads in items:
        unit = SPECS_BY_KEY[key].unit
        row = dict(lead)
        row["baseline"] = fmt_value(values[0], unit)
        if with_spread:
            row["baseline spread"] = _spread_text(spreads[0] if spreads else None, unit)
        style = {c: "" for c in row}
        for i in range(1, len(titles)):
            name = "candidate" if len(titles) == 2 else f"candidate {i}"
            pct = "—" if units.is_category(unit) else fmt_delta_pct(values[0], values[i])
            row[name] = f"{fmt_value(values[i], unit)} ({pct})"
            row[f"{name}: verdict"] = verdicts[i]
            if with_spread:
                row[f"{name} spread"] = _spread_text(spreads[i] if len(spreads) > i else None, unit)
            style.update({name: "", f"{name}: verdict": VERDICT_STYLE.get(verdicts[i], "")})
            if with_spread:
                style[f"{name} spread"] = ""
        rows.append(row)
        styles.append(style)
    _styled(rows, styles)


def _styled(rows: list[dict[str, str]], styles: list[dict[str, str]]) -> None:
    df = pd.DataFrame(rows)
    if df.empty:
        return
    style_df = pd.DataFrame(styles, columns=df.columns)
    st.dataframe(df.style.apply(lambda _: style_df, axis=None), hide_index=True,
                 width="stretch", height=min(35 * (len(df) + 1) + 3, 720))


def _which(titles: Sequence[str]) -> str:
    names = ["baseline"] + (["candidate"] if len(titles) == 2
                            else [f"candidate {i}" for i in range(1, len(titles))])
    return "; ".join(f"{n}: {md_escape(t)}" for n, t in zip(names, titles, strict=True))


def comparison_view(cmp: Comparison) -> None:
    """What differs (one sentence), the refusal or the per-level deltas at matched load, the
    config diff and every figure's delta with its verdict in words."""
    # only the level sets differ, and a level is shared: the figures there compare, no warning
    if not cmp.refusal and (cmp.comparable or not any(cmp.level_workload_diff)):
        st.info(md_escape(cmp.summary))
    else:
        st.warning(md_escape(cmp.summary))
    if any(cmp.workload_diff):
        with st.expander("What differs in the workload"):
            st.markdown("\n".join(f"- {md_escape(t)}: {md_escape(line)}"
                                   for t, ls in zip(cmp.titles[1:], cmp.workload_diff, strict=True)
                                   for line in ls))
    if cmp.refusal:
        st.warning(md_escape(cmp.refusal))
    for title, line in zip(cmp.titles[1:], cmp.outputs, strict=False):
        if line:  # the candidate's greedy outputs against the baseline run's
            st.caption(f"{md_escape(title)}: {md_escape(line)}")
    if cmp.level_deltas:
        shown = ", ".join(level_name(cmp.level_mode, v) for v in cmp.shared_levels)
        st.markdown("##### At each shared load level")
        st.caption(f"Each level against the baseline's same level ({md_escape(shown)}); a "
                   "difference inside the measured spread (the level's requests cut into "
                   "repeats) is a tie.")
        st.caption(_which(cmp.titles) + ". A verdict outside both measured spreads is better "
                   "or worse; inside, a tie.")
        _delta_rows([({"level": level_name(cmp.level_mode, ld.level), "metric": SPECS_BY_KEY[ld.key].label},
                      ld.key, ld.values, ld.verdicts, ld.spreads) for ld in cmp.level_deltas],
                    cmp.titles)
    st.markdown("##### Config diff")
    if cmp.config_diff:
        st.dataframe(pd.DataFrame([[r["key"], *r["values"]] for r in cmp.config_diff],
                                  columns=["setting", *cmp.titles]),
                     hide_index=True, width="stretch")
    else:
        st.caption("No flag or env differs.")
    st.markdown("##### Figures")
    if cmp.matched_level is not None:
        st.caption(f"Probe figures at {level_name(cmp.level_mode, cmp.matched_level)}, the "
                   "highest load level every run measured.")
    for note in cmp.notes:
        st.caption(md_escape(note))
    st.caption(_which(cmp.titles) + ".")
    _delta_rows([({"dimension": SPECS_BY_KEY[d.key].dimension, "metric": SPECS_BY_KEY[d.key].label},
                  d.key, d.values, d.verdicts, d.spreads) for d in cmp.deltas], cmp.titles)


def download_buttons(engine: Engine, cards: Sequence[Scorecard], *, actor: Callable[[], str],
                     key: str = "dl") -> None:
    """One download button per export format; the file is made (and audited under `actor()`,
    asked when the click arrives: auth.export_actor) on click."""
    cols = st.columns(len(formats.FORMATS))
    for col, fmt in zip(cols, formats.FORMATS, strict=True):
        col.download_button(
            fmt.upper(),
            data=_maker(engine, fmt, list(cards), actor),
            file_name=formats.default_filename(fmt, cards),
            mime=formats.MEDIA_TYPES[fmt],
            help=formats.FORMAT_HELP[fmt],
            key=f"{key}-{fmt}",
            on_click="ignore",
            width="stretch",
        )


def _maker(engine: Engine, fmt: str, cards: list[Scorecard], actor: Callable[[], str]) -> Callable[[], bytes]:
    def make() -> bytes:
        who = actor()  # first: an expired sign-in behind a viewer gate gets no file
        data = formats.render(fmt, cards)
        formats.record_export(engine, fmt=fmt, cards=cards, target="download", actor=who)
        return data

    return make


def slo_editor(engine: Engine, server: str | None, settings_slo: dict | None, *,  # type: ignore[type-arg]
               actor: Callable[[], str | None], key: str = "slo", disabled: bool = False) -> None:
    """Edit one SLO target (globally or for this server); stored in the database under the
    operator `actor()` names when Save arrives (auth.actor_at_click: None, and nothing saved,
    after a sign-in expired)."""
    current = slo.resolve(server, settings_slo, slo.load_overrides(engine))
    rows = [{"metric": t.key, "target": t.target, "warn bound": t.warn, "from": t.origin}
            for t in current.targets.values()]
    st.dataframe(pd.DataFrame(rows, columns=["metric", "target", "warn bound", "from"]),
                 hide_index=True, width="stretch")
    gradable = [s.key for d in DIMENSIONS for s in specs_of(d) if s.better != "none"]
    with st.form(f"{key}-form", border=True):
        a, b, c = st.columns(3)
        metric = a.selectbox("Metric", gradable, key=f"{key}-metric")
        target = b.number_input("Target (base units: s, 0-1, USD)", value=None, format="%g",
                                key=f"{key}-target")
        scope = c.radio("Scope", [f"server {server}" if server else "global", "global"],
                        key=f"{key}-scope", horizontal=True)
        st.caption("Leave the target empty and save to remove a UI target.")
        # `and not disabled`: a crafted client message cannot press a button drawn disabled
        if st.form_submit_button("Save target", disabled=disabled) and not disabled and (who := actor()):
            try:
                slo.save_override(engine, server=server if scope.startswith("server") else None,
                                  key=metric, target=target, actor=who)
            except slo.SloError as exc:
                st.error(str(exc))
            else:
                # cached scorecards key on this, so they are re-graded
                st.session_state["_slo_version"] = st.session_state.get("_slo_version", 0) + 1
                st.rerun()


def image_check_view(chk: ImageCheck, titles: tuple[str, str]) -> None:
    """The image check: overall verdict, then per (prompt, seed) the two thumbnails side by side
    with PSNR, SSIM and the verdict."""
    color = "green" if chk.verdict == "same pictures" else "red"
    if not chk.pairs:
        st.info("Neither run kept images to compare (runs older than the image check, or a "
                "server that answers with URLs): run the sweep again on both profiles.")
        return
    st.markdown(f"Image check: :{color}-badge[{md_escape(chk.verdict)}] · SSIM ≥ "
                f"{chk.ssim_min:g} reads same picture (setting `compare.ssim_min`) · lowest SSIM "
                f"{'—' if chk.min_ssim is None else f'{chk.min_ssim:.4f}'}")
    for pair in chk.pairs:
        a, b, verdict = st.columns([2, 2, 3], vertical_alignment="center")
        for col, thumb, title in ((a, pair.thumb_a, titles[0]), (b, pair.thumb_b, titles[1])):
            if thumb:
                col.image(base64.b64decode(thumb), caption=md_escape(title), width=160)
            else:
                col.caption(f"{md_escape(title)}: no image kept")
        psnr = "—" if pair.psnr_db is None else (
            "∞ (identical)" if pair.psnr_db == float("inf") else f"{pair.psnr_db:.1f} dB")
        ssim = "—" if pair.ssim is None else f"{pair.ssim:.4f}"
        pc = "green" if pair.verdict == "same picture" else "red"
        verdict.markdown(f"prompt **{md_escape(pair.prompt)}**, seed {pair.seed}  \n"
                         f"PSNR {psnr} · SSIM {ssim}  \n:{pc}-badge[{md_escape(pair.verdict)}]")
