"""Draws the Server page's "GPU wall" panel and the denoising what-if from the read model of
dashboard/services/views/gpu_wall_panel.py (no I/O here: the page passes the cached view in)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard.components.format import fmt_ts, fmt_value
from dashboard.components.scorecard import md_escape
from dashboard.components.timeseries_charts import timeseries_spec

# badge colour per verdict: the two walls get their own colours, everything else stays quiet
VERDICT_COLORS = {"bandwidth": "blue", "compute": "violet", "power": "red", "neither": "orange", "idle": "gray",
                  "mixed": "gray"}
CHART_HEIGHT_PX = 220


def draw_wall(view: dict[str, Any], *, since: float, until: float) -> None:
    """Per GPU the verdict with its evidence, then DRAM bandwidth and tensor activity over time."""
    st.subheader("GPU wall: what bounds the GPU")
    if not view["cards"]:
        if view["not_available"]:
            st.info(view["not_available"])
        else:
            st.caption("No GPU telemetry in this window (no NVML on this host, no dcgm-exporter "
                       "configured, or no GPUs assigned).")
        return
    # Evidence first, two figures a row (four in 3/5 of the page clipped "Achieved bandwidth"
    # and its "8.2 GB/s of 4.8 TB/s"), then the chart across the whole width so its legend fits.
    for card in view["cards"]:
        color = VERDICT_COLORS.get(card["verdict"], "gray")
        st.markdown(f"**{md_escape(card['title'])}** &nbsp; :{color}-badge[bound by: "
                    f"{card['bound_by']}] &nbsp; {md_escape(card['reason'])}")
        cols = st.columns(4 if len(card["evidence"]) <= 2 else 2)
        for i, (label, text, help_text) in enumerate(card["evidence"]):
            cols[i % len(cols)].metric(label, text, help=help_text)
        st.caption(f"Share of the window per verdict: {card['shares_text']}.")
    capped = " (the last 6 h of the chosen window)" if view["verdict_since"] > since else ""
    st.caption(f"Window {fmt_ts(view['verdict_since'])} – {fmt_ts(until)}{capped}. Rules "
               f"{view['rules']}.")
    if view["not_available"]:
        st.caption(view["not_available"])
    if view["series"].empty:
        st.caption("No GPM samples to draw in this window.")
    else:
        spec = timeseries_spec(view["series"], unit="ratio", since=since, until=until,
                               title="DRAM bandwidth and tensor activity")
        st.vega_lite_chart(spec, width="stretch", height=CHART_HEIGHT_PX, key="chart_gpu_wall")


def draw_denoise_wall(stage: dict[str, Any] | None) -> None:
    """Share of denoising time per wall, and the per-step what-if on a card the reader picks."""
    st.markdown("**Denoising: which wall, and the step on another card**")
    if stage is None or not stage["available"]:
        st.caption(stage["why_not"] if stage else "Not an image server.")
        return
    c1, c2 = st.columns(2)  # three in a row clipped their labels on a half page
    c1.metric("Bandwidth-bound share", fmt_value(stage["bandwidth_share"], "ratio"),
              help="share of DenoisingStage time whose GPM samples were bound by memory bandwidth")
    c2.metric("Compute-bound share", fmt_value(stage["compute_share"], "ratio"),
              help="share of DenoisingStage time whose GPM samples were bound by compute")
    c1.metric("Held by power", fmt_value(stage.get("power_share") or 0.0, "ratio"),
              help="share of DenoisingStage time whose GPM samples were compute work with the SM clock "
                   "held by the board's power (or thermal) limit")
    st.caption(f"{stage['covered_s']:.1f} s of the window's {stage['stage_s']:.1f} s of "
               "DenoisingStage had GPM samples (pooled over the server's GPUs).")
    if stage["step_s"] is None:
        st.caption("No per-step timing in this window (the DenoisingStage 'average time per step' "
                   "line or /metrics DenoisingStep): no what-if.")
        return
    if not stage["what_if"]:
        st.caption(f"{fmt_value(stage['step_s'], 's')} per step now; this card is not in GPU_SPECS, "
                   "so there is no what-if.")
        return
    rows = {r["card"]: r for r in stage["what_if"]}
    pick = st.selectbox("What if this ran on", list(rows), key="gpu_wall_what_if")
    row = rows.get(pick or "") or stage["what_if"][0]
    # the words carry the direction ("2.04× slower"); the arrow follows them, never up for a slowdown
    st.metric(f"Seconds per step on {row['card']} (what-if)", fmt_value(row["step_s"], "s"),
              delta=row["speed"], delta_color="off", delta_arrow=row["direction"])
    st.caption(f"Now {fmt_value(stage['step_s'], 's')} per step on {stage['spec']} "
               f"({stage['step_source']}). Assumption: {row['note']}.")
