"""Server: live charts over the chosen window with events on the time axis; args and version.

Series are SQL-bucketed (≤ 600 points each; minute and quarter-hour Rollups for long windows) by
dashboard/services/views/timeseries.py and cached for a few seconds; chart specs stay the same across
refreshes, so a rerun swaps data in the drawn charts (components/timeseries_charts.py). A server read
through Prometheus gets its metrics.* series from that Prometheus for the window
(services/views/prom_series.py), with a caption naming it, the step and the newest sample's age.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from dashboard.components import session
from dashboard.components.doctor_panel import doctor_section
from dashboard.components.format import STATUS_BADGE, fmt_age, fmt_ts
from dashboard.components.gpu_wall import draw_denoise_wall, draw_wall
from dashboard.components.scorecard import md_escape
from dashboard.components.timeseries_charts import stage_chart, timeseries_spec
from dashboard.services.views import gpu_wall_panel, image_panels, prom_series
from dashboard.services.views import timeseries as ts
from dashboard.services.views.overview import ServerDetail, server_detail
from scorecard import gpu_entries

ctx = session.bootstrap()
CHART_HEIGHT_PX = 280  # the whole chart element: plot, axis, two legend rows
PANEL_LABELS = {
    "latency": "Latency",
    "throughput": "Throughput",
    "batch": "Batch & queue",
    "token_usage": "KV usage",
    "cache_hit": "Cache hits",
    "spec": "Speculation",  # only for a server that speculates (its launch's speculative_algorithm)
    "priority": "Priority",  # only for a server whose launch has enable_priority_scheduling
    "hicache": "HiCache",  # only for a server whose launch has enable_hierarchical_cache
    "pd": "PD",  # only for a disaggregated service's prefill or decode server
    "router": "Router",  # only for a service's router, with latency (its other panels do not apply)
    "gpu": "GPUs",
}
PILL_OF = {"hicache_pool": "hicache", "pd_transfer": "pd"}  # a panel drawn under another panel's pill


@st.cache_data(ttl=5, show_spinner=False)
def _detail(url: str, name: str) -> ServerDetail | None:
    return server_detail(session.engine_for(url), name)


@st.cache_data(ttl=10, show_spinner=False)
def _panels(
    url: str, server_id: int, keys: tuple[str, ...], gpus: tuple[ts.GpuEntry, ...], since: float, until: float,
    prom: tuple[str, str, str] | None = None, priorities: tuple[str, ...] = (),
) -> tuple[dict[str, pd.DataFrame], str]:
    """(panel frames, Prometheus caption or ""); `prom` = (prometheus_url, selector, engine) of a server
    read through Prometheus: its metrics.* series come from there (prom_series.panel_series)."""
    # One read for every shown panel; hidden panels (the GPU metrics not picked) are never read.
    panels = [p for p in list(ts.PANELS) + ts.gpu_panels(list(gpus)) + ts.priority_panels(priorities)
              if p.key in keys]
    frames = ts.read_series(session.engine_for(url), server_id=server_id, panels=panels, since=since, until=until)
    if prom is None:
        return frames, ""
    return prom_series.panel_series(frames, panels, prom[0], prom[1], since, until, engine=prom[2])


@st.cache_data(ttl=30, show_spinner=False)
def _priorities(url: str, server_id: int) -> tuple[str, ...]:
    return tuple(ts.priorities(session.engine_for(url), server_id=server_id))


@st.cache_data(ttl=10, show_spinner=False)
def _extras(
    url: str, server_id: int, gpus: tuple[ts.GpuEntry, ...], since: float, until: float
) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """(probe TTFT per bucket, events, any sample in the window) for the window."""
    engine = session.engine_for(url)
    return (
        ts.probe_latency(engine, server_id=server_id, since=since, until=until),
        ts.events_in_window(engine, server_id=server_id, since=since, until=until),
        ts.has_samples(engine, server_id=server_id, since=since, gpus=list(gpus)),
    )


@st.cache_data(ttl=10, show_spinner=False)
def _image(url: str, server_id: int, since: float, until: float) -> dict[str, pd.DataFrame]:
    return image_panels.image_series(session.engine_for(url), server_id=server_id, since=since,
                                     until=until)


@st.cache_data(ttl=120, show_spinner=False)  # keyed by the window, whose `until` moves on a 10/60-s grid
def _wall(url: str, server_id: int, kind: str, since: float, until: float) -> dict:
    """The GPU-wall panel's read model (verdict per GPU, GPM chart, per-stage share and what-if)."""
    return gpu_wall_panel.wall_panel(session.engine_for(url), server_id=server_id, kind=kind,
                                     since=since, until=until)


@st.cache_data(ttl=30, show_spinner=False)
def _start(url: str, server_id: int, gpus: tuple[ts.GpuEntry, ...], panels: tuple[str, ...] | None,
           metrics: tuple[str, ...]) -> float | None:
    """Where the drawn series' data begin (a young server's window starts there)."""
    return ts.data_start(session.engine_for(url), server_id=server_id, gpus=list(gpus), panels=panels,
                         metrics=metrics)


def _window(panels: tuple[str, ...] | None = None, metrics: tuple[str, ...] = ()) -> tuple[float, float]:
    """The sidebar's window, clamped to the drawn series' data (services/views/timeseries.window)."""
    assert detail is not None and detail.server.id is not None
    return ts.window(window_s, first_ts=_start(ctx.url, detail.server.id, tuple(gpus), panels, metrics))


@st.cache_data(ttl=30, show_spinner=False)
def _gpus(url: str, server_id: int, configured: tuple[int, ...]) -> list[ts.GpuEntry]:
    return ts.gpu_entries(session.engine_for(url), server_id=server_id, configured=list(configured))


name = session.selected_server(ctx)
names = session.server_names(ctx.url)
if not names:
    st.title("Server")
    st.info("No servers yet. Add one to `pitwall.toml` (see the Overview page) or run `pitwall up` for the demo.")
    st.stop()
if name not in names:
    name = names[0]
detail = _detail(ctx.url, name)
if detail is None:
    st.error(f"Server {name!r} is not in the database; pick another in the sidebar.")
    st.stop()
assert detail.server.id is not None

label, color = STATUS_BADGE.get(detail.status, ("unknown", "gray"))
st.title(md_escape(detail.server.name))
st.markdown(
    f":{color}-badge[{label}] &nbsp; profile **{md_escape(detail.profile or '—')}** · "
    f"{detail.engine_label} **{md_escape(detail.engine_version or 'unknown')}** · {detail.server.kind} · "
    f"{'managed' if detail.server.managed else 'watched'}"
)
if detail.launch is not None:
    st.caption(
        f"{md_escape(detail.launch_name or 'launch')}: {detail.launch.status}, started {fmt_ts(detail.launch.started_at)}"
        f" ({fmt_age(detail.launch.started_at)})"
        + (f", ended {fmt_ts(detail.launch.ended_at)}: {detail.launch.end_reason or ''}"
           if detail.launch.ended_at else "")
    )
base_url = detail.server.base_url.replace("`", "")
st.caption(f"Base URL: `{base_url}`")  # a code span: markdown neither links nor interprets it
if detail.status == "down":
    st.warning("The server is down (health check failing). The Events page shows why; relaunch from Profiles.")

with st.expander("Server args and launch command", expanded=False):
    if detail.server_args:
        st.json(detail.server_args, expanded=False)
    else:
        st.caption("No server args recorded yet (the API collector reads /server_info once the server is up).")
    if detail.argv:
        st.code(" ".join(detail.argv), language=None)

window_s = session.selected_window_s()
gpus = _gpus(ctx.url, detail.server.id, tuple(detail.server.gpu_indices or ()))
live_every = session.LIVE_REFRESH_S if window_s <= 3600 else 30.0


# The panel controls live inside the fragment: a click reruns the charts, not the whole page.
@st.fragment(run_every=live_every)
@session.safe("Live charts")
def charts() -> None:
    assert detail.server.id is not None
    sid = detail.server.id
    started_at = detail.launch.started_at if detail.launch is not None else None
    c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
    # an image server's pipeline has its own section above; of the LLM panels only GPUs apply
    role = detail.server.role
    labels = {"gpu": PANEL_LABELS["gpu"]} if detail.server.kind == "image" else {
        k: PANEL_LABELS[k] for k in ("latency", "router")} if role == "router" else {
        k: v for k, v in PANEL_LABELS.items()
        if (k != "spec" or detail.server_args.get("speculative_algorithm"))
        and (k != "priority" or detail.server_args.get("enable_priority_scheduling"))
        and (k != "hicache" or detail.server_args.get("enable_hierarchical_cache"))
        and (k != "pd" or role in ("prefill", "decode") or detail.server_args.get("disaggregation_mode") in ("prefill", "decode"))
        and k != "router"}
    shown = c1.pills(
        "Panels", list(labels), default=list(labels), format_func=labels.get,
        selection_mode="multi", key="server_panels",
    )
    mark_events = c2.toggle("Mark events", value=True, key="server_mark_events")
    # One GPU chart at a time (every GPU of the server as a series): four GPU charts would double
    # the page's paint time for figures an operator reads one at a time.
    gpu_metric = st.segmented_control(
        "GPU metric", [k for k, *_ in ts.GPU_PANELS], default="gpu_util",
        format_func={k: t for k, t, *_ in ts.GPU_PANELS}.get, key="server_gpu_metric",
    ) or "gpu_util"
    drawn = [k for k in PANEL_LABELS if k != "gpu" and k in (shown or [])]
    since, until = _window(tuple(drawn + ([gpu_metric] if "gpu" in (shown or []) else [])))
    probe, events, any_data = _extras(ctx.url, sid, tuple(gpus), since, until)
    ev = events if mark_events else None
    st.caption(
        f"{ts.window_caption(window_s, since, until, detail.server.name)} (until {fmt_ts(until)}), refreshed every "
        f"{live_every:.0f} s. Dashed lines are the server's histogram estimates; dots are canary "
        f"requests; vertical rules are events ({len(events)} in window)."
    )
    if not any_data and probe.empty and detail.server.kind == "image":
        st.caption(gpu_entries.absent_text(started_at, time.time(), in_window=True))
        return
    if not any_data and probe.empty:
        st.info(
            "No samples in this window. Pick a longer window in the sidebar; if the server is new, "
            "data appears within a few seconds once the runner collects (About / health)."
        )
        return
    wanted: list[tuple[str, str, str, tuple[str, ...], tuple[str, ...]]] = []
    if "latency" in (shown or []):
        wanted.append(("latency", "s", "TTFT: probes, canary and server estimate", ("(est.)",), ("canary TTFT",)))
    for key, title, unit in (
        ("throughput", "Throughput", "tok_s"),
        ("batch", "Running batch and queue", "count"),
        ("token_usage", "KV cache token usage", "ratio"),
        ("cache_hit", "Radix cache hit rate", "ratio"),
        ("spec", "Speculative decoding: tokens a step", "tok_step"),
        ("priority", "Running and queued by priority", "count"),
        ("hicache", "HiCache: prefix hits by tier", "tok_s"),
        ("hicache_pool", "HiCache host pool", "count"),
        ("pd", "PD queues", "count"),
        ("pd_transfer", "KV transfer", "s"),
        ("router", "Router: requests, errors, retries", "rps"),
    ):
        if PILL_OF.get(key, key) in (shown or []):
            wanted.append((key, unit, title, (), ()))
    if "gpu" in (shown or []):
        if not gpus:
            st.caption(gpu_entries.absent_text(started_at, time.time()))
        else:
            for key, title, unit, _ in ts.GPU_PANELS:
                if key == gpu_metric:
                    wanted.append((key, unit, title, (), ()))
    cols = st.columns(2)
    keys = tuple(w[0] for w in wanted)
    srv = detail.server
    prom = (srv.prometheus_url, srv.prometheus_selector or "", srv.engine) if srv.prometheus_url else None
    frames, prom_caption = _panels(ctx.url, sid, keys, tuple(gpus), since, until, prom,
                                   _priorities(ctx.url, sid) if "priority" in keys else ())
    if prom_caption:
        st.caption(prom_caption)
    for i, (key, unit, title, dashed, points) in enumerate(wanted):
        # a per-priority panel before any priority was stored has no series to read
        df = frames.get(key, pd.DataFrame(columns=["ts", "label", "value", "min", "max"]))
        if key == "latency" and not probe.empty:
            df = pd.concat([df, probe.assign(min=probe["value"], max=probe["value"])], ignore_index=True)
        with cols[i % 2]:
            if df.empty:
                st.markdown(f"**{title}**")
                st.caption(gpu_entries.absent_text(started_at, time.time(), in_window=True)
                           if key.startswith("gpu") else "No data in this window.")
                continue
            own = ts.chart_since(since, until, window_s, float(df["ts"].min()))
            spec = timeseries_spec(df, unit=unit, since=own, until=until, events=ev, title=title,
                                   dashed=dashed, points=points)
            # A stable key and a spec that only changes with the title, unit and series: a live
            # refresh or the events toggle swaps datasets in the drawn chart instead of rebuilding it.
            st.vega_lite_chart(spec, width="stretch", height=CHART_HEIGHT_PX, key=f"chart_{key}")



@st.fragment(run_every=live_every)
@session.safe("Image charts")
def image_charts() -> None:
    """Where an image request's time goes, s/step, memory against the card, queue and batch."""
    assert detail.server.id is not None
    since, until = _window((), image_panels.START_KEYS)  # the requests' series, none of the LLM panels
    frames = _image(ctx.url, detail.server.id, since, until)
    st.subheader("Image pipeline")
    if image_panels.is_empty(frames):
        st.info("No diffusion stage, step or memory samples in this window: they come from the "
                "server's log (stage lines) and /metrics (--enable-metrics). Run a sweep or "
                "pick a longer window.")
        return
    # the stage chart with the denoising wall and what-if beside it, then the other panels
    top = st.columns(2)
    with top[0]:
        st.markdown(f"**{image_panels.IMAGE_PANELS['stages'][0]}**")
        if frames["stages"].empty:
            st.caption("No data in this window.")
        else:
            st.altair_chart(stage_chart(frames["stages"]), width="stretch", height=CHART_HEIGHT_PX,
                            key="chart_img_stages")
    with top[1]:
        draw_denoise_wall(_wall(ctx.url, detail.server.id, detail.server.kind, since, until)["stage"])
    cols = st.columns(2)
    rest = [(k, v) for k, v in image_panels.IMAGE_PANELS.items() if k != "stages"]
    for i, (key, (title, unit)) in enumerate(rest):
        df = frames[key]
        with cols[i % 2]:
            if df.empty:
                st.markdown(f"**{title}**")
                st.caption("No data in this window.")
            else:
                spec = timeseries_spec(df, unit=unit, since=since, until=until, title=title)
                st.vega_lite_chart(spec, width="stretch", height=CHART_HEIGHT_PX,
                                   key=f"chart_img_{key}")


# The time-series charts paint first (bench/dashboard_paint.py bounds their first paint). The GPU
# wall and the Doctor read a window of raw samples (most of a second for 7 days on a busy host);
# computed in the same run they held the charts' paint back by as much, as the browser drew the
# charts on a core shared with that work. So on a page's first run they draw LATER_S after the
# charts, from a fragment's first timed rerun; a later full run (another server, window or
# panel) draws them in place from their cached reads.
LATER_S = 2.0
later_key = f"server_later:{detail.server.id}:{window_s}"
later_ready = bool(st.session_state.get(later_key))
st.session_state[later_key] = True


@st.fragment(run_every=live_every if later_ready else LATER_S)
@session.safe("GPU wall and Doctor")
def later() -> None:
    """Which wall each GPU hits (bandwidth / compute / neither), then the Doctor's findings."""
    assert detail.server.id is not None
    if not later_ready and not st.session_state.get(f"{later_key}:drawn"):
        st.session_state[f"{later_key}:drawn"] = True  # the next (timed) run draws them
        st.subheader("GPU wall: what bounds the GPU")
        st.caption("Reading the GPU wall and the Doctor's evidence; they draw in a moment, after the charts.")
        return
    since, until = _window(("gpu_util",))  # GPM series start with the utilisation
    draw_wall(_wall(ctx.url, detail.server.id, detail.server.kind, since, until), since=since,
              until=until)
    doctor_section(ctx, detail.server.name, window_s)


charts()
if detail.server.kind == "image":
    image_charts()  # the image server's own charts: its pipeline, right below the GPU panel
later()
