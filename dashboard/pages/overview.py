"""Overview: every server as a card with status and latest figures."""

from __future__ import annotations

import streamlit as st

from dashboard.components import session
from dashboard.components.format import STATUS_BADGE, fmt_value
from dashboard.services.overview import server_cards

ctx = session.bootstrap()
st.title("Overview")

cards = server_cards(ctx.engine)
if not cards:
    st.info(
        "No servers yet. Add one to `pitwall.toml` and restart Pitwall:\n\n"
        "```toml\n[[servers]]\nname = \"prod-a\"\nbase_url = \"http://127.0.0.1:30000\"\n"
        "log_path = \"/var/log/sglang/server.log\"\ngpu_hourly_usd = 3.80\n```\n"
        "With no servers configured, `pitwall up` runs the demo (the bundled simulator)."
    )
    st.stop()

cols = st.columns(min(len(cards), 3))
for i, card in enumerate(cards):
    with cols[i % len(cols)].container(border=True):
        label, color = STATUS_BADGE.get(card.status, ("unknown", "gray"))
        st.markdown(f"#### {card.name}  :{color}-badge[{label}]")
        st.caption(
            f"{card.base_url} · {card.kind} · {'managed' if card.managed else 'watched'}"
            f" · profile {card.profile or '—'} · SGLang {card.sglang_version or '—'}"
        )
        a, b, c = st.columns(3)
        a.metric("Running", fmt_value(card.figures.get("log.running_req"), "count"))
        b.metric("Queue", fmt_value(card.figures.get("log.queue_req"), "count"))
        c.metric("Gen tok/s", fmt_value(card.figures.get("log.gen_throughput_tok_s"), "tok_s"))
        d, e, f = st.columns(3)
        d.metric("Canary TTFT", fmt_value(card.figures.get("canary.ttft_s"), "s"))
        e.metric("KV usage", fmt_value(card.figures.get("log.token_usage"), "ratio"))
        f.metric("Health RTT", fmt_value(card.figures.get("api.health_latency_s"), "s"))
        if card.events is not None and not card.events.empty:
            st.caption("Latest events")
            st.dataframe(
                card.events[["kind", "severity", "message"]],
                hide_index=True,
                width="stretch",
            )
