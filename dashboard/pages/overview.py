"""Overview: the fleet table (one sortable row per server: status, host, model, profile, key
figures, alerts, SLO grades) with filters, or a card per server when the filters leave a few
(status, profile, firing alerts, four grades, key figures, GPUs, events); then a card per
disaggregated service (its prefill, decode and router servers joined: components/service.py);
then the fleet-wide scorecards per model or per profile, and exports of both.

Live: everything re-reads storage every LIVE_REFRESH_S inside a fragment (the page does not
rerun). The fleet rows come from one batched read (services/views/fleet.py: a fixed number of
queries at any fleet size); cards, a few dozen queries each, are built only for the servers shown.
"""

from __future__ import annotations

import time

import streamlit as st

from dashboard.components import auth, session
from dashboard.components import fleet as fleet_view
from dashboard.components.format import (
    STATUS_BADGE,
    fmt_age,
    fmt_bytes,
    fmt_value,
    grade_badge,
)
from dashboard.components.scorecard import md_escape
from dashboard.components.service import service_section
from dashboard.services.views.fleet import (
    FLEET_WINDOW_S,
    FleetFilter,
    FleetRow,
    filter_rows,
    fleet_rows,
)
from dashboard.services.views.fleet_scorecards import GROUP_BYS, fleet_scorecards
from dashboard.services.views.overview import (
    FIGURE_WINDOW_S,
    LOG_QUEUE_REQ,
    LOG_RUNNING_REQ,
    LOG_TOKEN_USAGE,
    METRICS_DIFFUSION_NUM_QUEUE_REQS,
    ServerCard,
    server_cards,
    source_label,
    unit_of,
)
from dashboard.services.views.service import service_cards
from export.fleet import fleet_meta
from scorecard import gpu_entries
from scorecard.metric_specs import DIMENSIONS
from scorecard.service import ServiceCard

ctx = session.bootstrap()
st.title("Overview")


@st.cache_data(ttl=4, show_spinner=False)
def _cards(url: str, names: tuple[str, ...]) -> list[ServerCard]:
    return server_cards(session.engine_for(url), settings=session.settings(), names=names)


@st.cache_data(ttl=4, show_spinner=False)
def _services(url: str) -> list[ServiceCard]:
    return service_cards(session.engine_for(url))


@st.cache_data(ttl=4, show_spinner=False)
def _rows(url: str) -> list[FleetRow]:
    return fleet_rows(session.engine_for(url), settings=session.settings())


def _card(card: ServerCard, firing: dict[str, list[dict]]) -> None:
    label, color = STATUS_BADGE.get(card.status, ("unknown", "gray"))
    head, link, score = st.columns([3, 1.3, 1.8], vertical_alignment="center")
    head.markdown(f"#### {md_escape(card.name)}  :{color}-badge[{label}]")
    params = {"server": card.name, "window": session.selected_window_key()}
    link.page_link("dashboard/pages/server.py", label="Open", icon=":material/open_in_new:",
                   query_params=params, help="live charts of this server")
    score.page_link("dashboard/pages/compare.py", label="Scorecard", icon=":material/download:",
                    query_params=params, help="the full scorecard, with exports")
    st.caption(
        f"{md_escape(card.base_url)} · {card.kind} · {'managed' if card.managed else 'watched'}"
        f" · profile **{md_escape(card.profile or '—')}** · {card.engine_label} {md_escape(card.engine_version or '—')}"
    )
    if card.status == "down":
        st.warning("Health check failing — the server is down. See Events for why; relaunch from Profiles.")
    elif card.status == "unknown":
        st.info(
            f"No health data in the last minute (last sample {fmt_age(card.last_seen)}). "
            "Is the runner running? See About / health."
        )
    for alert in firing.get(card.name, []):  # a silenced alert still shows, quieter
        text = f"**{md_escape(alert['rule'])}**: {md_escape(alert['summary'])}"
        if alert["silenced"]:
            st.warning(f"{text} (silenced)", icon=":material/notifications_paused:")
        else:
            st.error(text, icon=":material/notifications_active:")
    grades = st.columns(4)
    for col, dim in zip(grades, DIMENSIONS, strict=True):
        g_label, g_color = grade_badge(card.grades.get(dim), no_target=dim in card.no_target)
        col.markdown(f"**{dim.capitalize()}**  \n:{g_color}-badge[{g_label}]",
                     help=card.grade_reasons.get(dim))
    if card.no_target:  # waiting would never grade these: say where targets are set
        st.page_link("dashboard/pages/compare.py", label="Set SLO targets (Compare → SLO targets)",
                     icon=":material/tune:", query_params=params,
                     help=f"no target set for {', '.join(card.no_target)}; or under [slo] in pitwall.toml")
    if card.kind == "image":
        _image_figures(card)
    else:
        _llm_figures(card)
    if card.gpus:
        split = {g.index for g in card.gpus if g.mig_id is not None}  # cards in MIG mode
        for gpu in card.gpus:
            mem = gpu.mem_ratio
            name = gpu.label or f"GPU {gpu.index}"
            memory = f"mem {fmt_bytes(gpu.mem_used_bytes)} / {fmt_bytes(gpu.mem_total_bytes)}"
            power = f"{fmt_value(gpu.power_w, 'w')} · {fmt_value(gpu.temp_c, 'c')}"
            if gpu.mig_id is not None:  # an instance has memory; power and heat are the card's
                text = f"{name} · {memory}"
            elif gpu.index in split and gpu.mem_used_bytes is None:  # its memory is its instances'
                text = f"{name} (MIG mode) · {power}"
            else:
                text = f"{name} · {memory} · util {fmt_value(gpu.util_ratio, 'ratio')} · {power}"
            st.progress(min(max(mem if mem is not None else 0.0, 0.0), 1.0), text=text)
    else:
        st.caption(gpu_entries.absent_text(card.started_at, time.time()))
    if card.events is not None and not card.events.empty:
        ev = card.events.assign(when=[fmt_age(t) for t in card.events["ts"]])
        st.dataframe(
            ev[["when", "kind", "severity", "message"]],
            hide_index=True,
            width="stretch",
            height=35 * (len(ev) + 1) + 3,
        )
    else:
        st.caption("No events yet.")


def _llm_figures(card: ServerCard) -> None:
    # three figures with a help icon a row: four in a card half the page wide clipped their labels
    # at 1400 px ("Output to…", "USD / 1M t…")
    a, b, c = st.columns(3)
    window = f"last {FIGURE_WINDOW_S // 60} min"
    a.metric("p99 TTFT", fmt_value(card.key.get("ttft_p99_s"), "s"), help=f"{source_label(card, 'ttft_p99_s')}, {window}")
    b.metric("Output tok/s", fmt_value(card.key.get("output_tok_s"), "count"),
             help=f"{source_label(card, 'output_tok_s')}, {window}")
    c.metric("USD / 1M tok", fmt_value(card.key.get("usd_per_mtok"), "usd"),
             help="GPU-hour price × GPUs ÷ output throughput; set gpu_hourly_usd to see it")
    d, e, f, g = st.columns(4)
    d.metric("Success", fmt_value(card.key.get("success_rate"), "ratio"),
             help=f"{source_label(card, 'success_rate')}, {window}")
    e.metric("Running", fmt_value(card.figures.get(LOG_RUNNING_REQ), unit_of(LOG_RUNNING_REQ)))
    f.metric("Queue", fmt_value(card.figures.get(LOG_QUEUE_REQ), unit_of(LOG_QUEUE_REQ)))
    g.metric("KV usage", fmt_value(card.figures.get(LOG_TOKEN_USAGE), unit_of(LOG_TOKEN_USAGE)))


def _image_figures(card: ServerCard) -> None:
    """An image server's figures: per-image latency, images/min, $/image, s/step, memory."""
    k = card.key
    window = f"scorecard, last {FIGURE_WINDOW_S // 60} min"
    a, b, c = st.columns(3)  # three a row: four clipped "Peak memory" and "Energy / image"
    a.metric("Image p50", fmt_value(k.get("image_p50_s"), "s"),
             help=f"per-image latency, p99 {fmt_value(k.get('image_p99_s'), 's')} ({window})")
    b.metric("Images/min", fmt_value(k.get("images_per_min"), "count"), help=window)  # unit in the label
    c.metric("USD / image", fmt_value(k.get("usd_per_image"), "usd"),
             help="GPU-hour price × GPUs ÷ images per hour; set gpu_hourly_usd to see it")
    d, e, f = st.columns(3)
    d.metric("Success", fmt_value(k.get("success_rate"), "ratio"), help=window)
    e.metric("s / step", fmt_value(k.get("image_step_s"), "s"),
             help="denoising seconds per step (diffusion log, else stage metrics or probes)")
    f.metric("Peak memory", fmt_bytes(k.get("peak_mem_bytes")),
             help=f"headroom {fmt_bytes(k.get('mem_headroom_bytes'))} at peak")
    g, h, _ = st.columns(3)
    g.metric("Queue", fmt_value(card.figures.get(METRICS_DIFFUSION_NUM_QUEUE_REQS),
                                unit_of(METRICS_DIFFUSION_NUM_QUEUE_REQS)))
    h.metric("Energy / image", fmt_value(k.get("energy_j_per_image"), "j"),
             help="NVML energy counter deltas ÷ images (needs GPU telemetry)")


def _filters_text(flt: FleetFilter) -> dict[str, object]:
    return {"host": list(flt.hosts), "model": list(flt.models), "profile": list(flt.profiles),
            "status": list(flt.statuses), "search": flt.search}


def _fleet_scorecards(rows: list[FleetRow], flt: FleetFilter, now: float) -> None:
    st.subheader("Fleet scorecards")
    by = st.segmented_control("Group by", GROUP_BYS, default="model", key="fleet-group") or "model"
    cards = fleet_scorecards(rows, by=str(by))
    fleet_view.scorecards(cards)
    actor = auth.export_actor(session.settings())
    meta = fleet_meta(window_s=FLEET_WINDOW_S, until=now, filters={**_filters_text(flt), "group_by": by})
    st.markdown("**Export the fleet table**")
    fleet_view.downloads(ctx.engine, "table", lambda: [r.as_dict() for r in rows], meta,
                         actor=actor, key="fleet-dl-table")
    st.markdown("**Export the fleet scorecards**")
    fleet_view.downloads(ctx.engine, "scorecards", lambda: cards, meta, actor=actor,
                         key="fleet-dl-sc")


@st.fragment(run_every=session.LIVE_REFRESH_S)
@session.safe("Overview")
def live_overview() -> None:
    alive, summary = session.runner_status(ctx.url)
    if not alive:
        st.warning(summary + " Figures below stop updating until it runs.")
    all_rows = _rows(ctx.url)
    if not all_rows:
        st.info(
            "No servers yet. Add one to `pitwall.toml` and restart Pitwall:\n\n"
            "```toml\n[[servers]]\nname = \"prod-a\"\nbase_url = \"http://127.0.0.1:30000\"\n"
            "log_path = \"/var/log/llm/prod-a.log\"\ngpu_hourly_usd = 3.80\n```\n"
            "With no servers configured, `pitwall up` runs the demo (the bundled simulator)."
        )
        return
    flt = fleet_view.filters(all_rows)
    rows = filter_rows(all_rows, flt)
    view = fleet_view.pick_view(len(rows))
    if not rows:
        st.info("No server matches these filters; clear one to see more.")
    elif view == "table":
        fleet_view.table(rows)
    else:
        _card_grid(tuple(r.name for r in rows))
    services = _services(ctx.url)
    if services:
        service_section(services, f"the last {FIGURE_WINDOW_S // 60} min")
    _fleet_scorecards(rows, flt, time.time())


def _card_grid(names: tuple[str, ...]) -> None:
    cards = _cards(ctx.url, names)
    firing: dict[str, list[dict]] = {}
    for alert in session.firing_alerts(ctx.url):
        firing.setdefault(alert["server"], []).append(alert)
    cols = st.columns(min(len(cards), 2))
    for i, card in enumerate(cards):
        with cols[i % len(cols)].container(border=True, key=f"card_{card.name}"):
            _card(card, firing)


live_overview()
