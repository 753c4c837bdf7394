"""A disaggregated service's card on the Overview: its members (role, status, a link to each
Server page), the joined figures, the time to first token split by where it went, and the
router's workers. Reads a ServiceCard (scorecard/service.py); no I/O."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard.components.format import STATUS_BADGE, fmt_value
from dashboard.components.scorecard import md_escape
from scorecard.service import ServiceCard, removed, unhealthy_workers, worker_member

ROLE_COLORS = {"router": "violet", "prefill": "blue", "decode": "green"}
CB_WORDS = {0: "closed", 1: "open", 2: "half open"}
#: (figure key, label, unit, help)
FIGURES = (
    ("client_ttft_p99_s", "TTFT p99 (client)", "s", "the canary's time to first token through the router, p99"),
    ("itl_p99_s", "ITL p99 (decode)", "s", "the decode servers' inter-token latency, p99 (the worst one)"),
    ("kv_transfer_p50_s", "KV transfer p50 (est.)", "s", "one request's KV cache from prefill to decode, median, "
     "estimated from the histogram's buckets (coarse: 250 then 500 ms)"),
    ("kv_transfer_p99_s", "KV transfer p99 (est.)", "s", "one request's KV cache from prefill to decode, p99, "
     "estimated from the histogram's buckets"),
    ("kv_transfer_speed_p50_bytes_s", "Transfer speed p50", "bytes_s", "the prefill servers' per-request KV speed"),
    ("output_tok_s", "Output tok/s", "tok_s", "the decode servers' generated tokens/s"),
    ("usd_per_mtok", "USD / 1M tok", "usd_per_mtok", "every member's GPU-hours over the decode servers' output"),
    ("transfer_failures_per_s", "Transfer failures/s", "rps", "failed KV handshakes and transfers/s, all members"),
)


def service_section(cards: list[ServiceCard], window_words: str) -> None:
    st.subheader("Services")
    st.caption(f"Disaggregated services (`service` and `role` in pitwall.toml), joined over {window_words}: "
               "a part no member measured reads —.")
    for card in cards:
        with st.container(border=True, key=f"service_{card.name}"):
            _card(card)


def _card(card: ServiceCard) -> None:
    st.markdown(f"#### {md_escape(card.name)}  :gray-badge[disaggregated]")
    cols = st.columns(max(len(card.members), 1))
    for col, m in zip(cols, card.members, strict=False):
        label, color = STATUS_BADGE.get(m.status, ("unknown", "gray"))
        col.markdown(f":{ROLE_COLORS.get(m.role, 'gray')}-badge[{m.role}] **{md_escape(m.name)}** :{color}-badge[{label}]")
        col.page_link("dashboard/pages/server.py", label="Server page", icon=":material/open_in_new:",
                      query_params={"server": m.name})
    if card.missing_roles:
        st.warning(f"This service has no {' and no '.join(card.missing_roles)} server in pitwall.toml; its "
                   "card cannot join what that role measures.")
    bad = unhealthy_workers(card)
    if bad:
        st.error("The router calls these workers unhealthy or has opened their circuit breaker: "
                 + ", ".join(md_escape(u) for u in bad))
    for m in card.members:
        for title, evidence in m.findings:
            st.warning(f"**Doctor on {md_escape(m.name)}: {md_escape(title)}.** {md_escape(evidence)}")
    metric_cols = st.columns(4)
    for i, (key, label, unit, tip) in enumerate(FIGURES):
        metric_cols[i % 4].metric(label, fmt_value(card.figures.get(key), unit), help=tip)
    _ttft_split(card)
    if card.workers:
        st.markdown("**The router's workers**")
        st.dataframe(pd.DataFrame([{"worker": u, "member": _member_text(card, u), "health": ("—" if h is None else "removed" if removed(h, c) else "healthy" if h >= 1 else "unhealthy"),
                                    "circuit breaker": CB_WORDS.get(int(c), "—") if c is not None and c >= 0 else "—",
                                    "in flight (mean)": "—" if a is None else f"{a:.2f}"} for u, h, c, a in card.workers]),
                     hide_index=True, width="stretch")


def _member_text(card: ServiceCard, url: str) -> str:
    m = worker_member(card, url)
    return f"{m.name} ({m.role})" if m is not None else "not in pitwall.toml"


def _ttft_split(card: ServiceCard) -> None:
    parts = [p for p in card.ttft_parts if p.seconds is not None]
    if not parts:
        st.caption("Time to first token by part: no prefill or decode stage figures in the window yet.")
        return
    share = card.transfer_share
    total = fmt_value(card.ttft_server_s, "s")
    head = f"**Where the time to first token goes** (mean a request; the decode servers' TTFT mean {total}"
    head += f"; the KV transfer is {share * 100:.0f} % of the time)" if share is not None else ")"
    st.markdown(head)
    frame = pd.DataFrame([{"part": p.name, "ms": p.seconds * 1e3, "role": p.role, "from": p.source,  # type: ignore[operator]
                           "order": i, "ttft": "TTFT"} for i, p in enumerate(parts)])
    chart = alt.Chart(frame).mark_bar(size=26).encode(
        x=alt.X("ms:Q", title="ms", stack="zero"),
        y=alt.Y("ttft:N", axis=None),
        color=alt.Color("part:N", sort=[p.name for p in parts], legend=None),
        order=alt.Order("order:Q"),
        tooltip=["part:N", alt.Tooltip("ms:Q", format=",.1f"), "role:N", "from:N"],
    ).properties(height=36)
    st.altair_chart(chart, width="stretch")
    st.caption(" · ".join(f"{p.name} {fmt_value(p.seconds, 's')}" for p in parts) + " (left to right)")
    missing = [p.name for p in card.ttft_parts if p.seconds is None]
    if missing:
        st.caption("Not measured in the window: " + ", ".join(missing) + ".")
