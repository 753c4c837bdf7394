"""Pure DataFrame -> Altair charts for live views and benchmark curves (no st.* calls here).

Inputs are in base units (seconds, 0-1 ratios, bytes, W, °C); storage/units.py `axis(unit)`
converts them for the axis (latency in ms, ratios in %, bytes in GiB). Time is UTC epoch seconds and is drawn as a
temporal axis; events are vertical rules on the same axis, coloured by severity
(format.SEVERITY_COLORS) with kind and message in the tooltip.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from dashboard.components.format import SERIES_COLORS, SEVERITY_COLORS, units

SPARSE_POINTS = 200  # below this many points a `points` series also gets dots
LABEL_ROOM_PX = 30  # padding right of a time chart: half the widest time label ("08:36:45") and some
EVENT_KINDS_MARKED = (
    "oom", "prefill_oom", "decode_retract", "crash", "server_exit", "nccl_timeout",
    "relaunch_started", "relaunch_done", "relaunch_failed", "rollback", "health_down",
    "health_up", "health_flap", "server_ready", "warmup_failed",
)


def timeseries_spec(
    df: pd.DataFrame,
    *,
    unit: str,
    since: float,
    until: float,
    events: pd.DataFrame | None = None,
    title: str = "",
    height: int = 220,
    dashed: tuple[str, ...] = (),
    points: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Vega-Lite spec of lines of `df` (ts, label, value) over [since, until) with event rules on
    the same time axis, for `st.vega_lite_chart(spec)`; the data ride in `spec["datasets"]`.

    Built for a browser that keeps the chart open (bench/dashboard_paint.py measures it):
    - The spec's JSON depends only on the title, unit, series labels and the window's length, never
      on the data, the window's position or whether events are shown. Streamlit re-creates a Vega
      view (compile, parse, first render: ~60 ms a chart on a 2-core host) when the JSON changes
      and only swaps a dataset when the data change, so a live refresh or the events toggle costs
      a dataset swap per changed dataset, not a rebuilt chart.
    - One named dataset a layer and no filter transforms (Streamlit runs Vega expressions through
      an interpreter, so a per-row filter per layer is not free): `lines` (time, series, value),
      `events` (time, kind, severity, message; empty when events are off), `window` (its two
      ends: an invisible layer that pins the x domain to the whole window when data cover only
      part of it) and, while a `points` series is sparse, `dots` (its rows).
    - A plain dict, not Altair: Altair's to_dict (schema validation) costs ~50 ms a chart here.
    Times are epoch milliseconds on a UTC axis; labels containing any of `dashed` are drawn
    dashed (estimates); `points` labels also get dots while sparse (<= SPARSE_POINTS points).
    """
    mult, suffix, fmt = units.axis(unit)
    labels = sorted(str(x) for x in df["label"].unique()) if not df.empty else []
    lines = _lines_dataset(df, mult)
    sparse = [x for x in labels if x in points and int((lines["series"] == x).sum()) <= SPARSE_POINTS]
    marks = _events_dataset(events, since, until)
    x = _time_axis(since, until)
    time_tip = {"field": "time", "type": "temporal", "title": "time (UTC)", "format": "%Y-%m-%d %H:%M:%S",
                "formatType": "utc"}
    color = {
        "field": "series",
        "type": "nominal",
        "scale": {"domain": labels, "range": list(SERIES_COLORS[: max(1, len(labels))])},
        "legend": {"orient": "bottom", "title": None, "columns": 2, "symbolLimit": 0, "labelLimit": 260},
    }
    line_enc = {
        "x": x,
        "y": {"field": "value", "type": "quantitative", "title": suffix or None, "axis": {"format": fmt}},
        "color": color,
        "tooltip": [
            time_tip,
            {"field": "series", "type": "nominal"},
            {"field": "value", "type": "quantitative", "format": fmt, "title": suffix or "value"},
        ],
    }
    layers: list[dict[str, Any]] = [
        {"data": {"name": "window"}, "mark": {"type": "rule", "opacity": 0}, "encoding": {"x": x}},
        {
            "data": {"name": "lines"},
            "mark": {"type": "line", "strokeWidth": 1.5},
            "encoding": {
                **line_enc,
                "strokeDash": {
                    "field": "series",
                    "type": "nominal",
                    "scale": {"domain": labels or [""],
                              "range": [[5, 3] if any(d in x for d in dashed) else [1, 0] for x in labels]
                              or [[1, 0]]},
                    "legend": None,
                },
            },
        },
    ]
    if sparse:  # changes the spec only when a series crosses SPARSE_POINTS (a window switch)
        layers.append(
            {
                "data": {"name": "dots"},
                "mark": {"type": "point", "filled": True, "size": 18},
                "encoding": {**line_enc, "color": {**color, "legend": None}},  # the line's legend says it
            }
        )
    layers.append(_events_layer(x, time_tip))
    datasets = {"window": pd.DataFrame({"time": [since * 1000.0, until * 1000.0]}), "lines": lines, "events": marks}
    if sparse:
        datasets["dots"] = lines[lines["series"].isin(sparse)].reset_index(drop=True)
    return {
        # Canvas, not SVG: thousands of points paint several times faster (vega-embed reads
        # usermeta.embedOptions from the spec).
        "usermeta": {"embedOptions": {"renderer": "canvas"}},
        # room right of the plot for half a time label: Vega centres a tick's label on it and
        # hides one past the axis (labelBound) only on the layout it computes, which a live
        # dataset swap can leave stale, so a young server's last tick ("08:36:45", 5 s before
        # the window's end) was drawn past the canvas edge and cut
        "padding": {"left": 5, "top": 5, "bottom": 5, "right": LABEL_ROOM_PX},
        "title": title,
        "height": height,
        "datasets": datasets,
        "layer": layers,
        "resolve": {"scale": {"color": "independent"}},
    }


def _lines_dataset(df: pd.DataFrame, mult: float) -> pd.DataFrame:
    """The `lines` dataset: time (epoch ms), series (the label), value (in display units)."""
    return pd.DataFrame(
        {
            "time": df["ts"].to_numpy(dtype=float) * 1000.0 if not df.empty else np.empty(0),
            "series": df["label"].astype(str).to_numpy() if not df.empty else np.empty(0, dtype=object),
            "value": df["value"].to_numpy(dtype=float) * mult if not df.empty else np.empty(0),
        }
    )


def _events_dataset(events: pd.DataFrame | None, since: float, until: float) -> pd.DataFrame:
    """The `events` dataset: the marked kinds inside [since, until) as time (epoch ms), kind,
    severity (missing: info) and message (its first 160 characters); empty without events."""
    ev = events if events is not None and not events.empty else None
    if ev is not None:
        ev = ev[ev["kind"].isin(EVENT_KINDS_MARKED) & (ev["ts"] >= since) & (ev["ts"] < until)]
    return pd.DataFrame(
        {
            "time": ev["ts"].to_numpy(dtype=float) * 1000.0 if ev is not None else np.empty(0),
            "kind": ev["kind"].astype(str).to_numpy() if ev is not None else np.empty(0, dtype=object),
            "severity": ev["severity"].fillna("info").astype(str).to_numpy()
            if ev is not None else np.empty(0, dtype=object),
            "message": ev["message"].fillna("").astype(str).str.slice(0, 160).to_numpy()
            if ev is not None else np.empty(0, dtype=object),
        }
    )


def _time_axis(since: float, until: float) -> dict[str, Any]:
    """The x encoding every layer shares: UTC time, labelled by the window's length."""
    return {
        "field": "time",
        "type": "temporal",
        "title": None,
        "scale": {"type": "utc", "nice": False},
        # one label format per window (Vega's default mixes "12:52" with "01 PM"); seconds on a
        # young server's few minutes (ticks 30 s apart would all read "14:35")
        "axis": {"format": "%H:%M:%S" if until - since <= 900 else "%H:%M" if until - since <= 2 * 86400
                 else "%b %d", "labelOverlap": True,
                 # the first and last labels inside the axis, and none drawn past it: at 1400 px a
                 # young server's last tick ("16:24:15") ran past the canvas edge and was cut
                 "labelFlush": True, "labelBound": True},
    }


def _events_layer(x: dict[str, Any], time_tip: dict[str, Any]) -> dict[str, Any]:
    """Dashed vertical rules at the events, coloured by severity (SEVERITY_COLORS)."""
    return {
        "data": {"name": "events"},
        "mark": {"type": "rule", "strokeWidth": 1.5, "strokeDash": [4, 3], "opacity": 0.8},
        "encoding": {
            "x": x,
            "color": {
                "field": "severity",
                "type": "nominal",
                "scale": {"domain": list(SEVERITY_COLORS), "range": list(SEVERITY_COLORS.values())},
                "legend": None,
            },
            "tooltip": [
                time_tip,
                {"field": "kind", "type": "nominal"},
                {"field": "severity", "type": "nominal"},
                {"field": "message", "type": "nominal"},
            ],
        },
    }


def curves_chart(
    df: pd.DataFrame, *, x: str, y: str, unit: str, title: str, height: int = 260
) -> alt.Chart:
    """Benchmark curves: one line per series (e.g. run or percentile) over a load level.

    `df` columns: `x`, `y` (base units), series, trusted (bool); untrusted levels are hollow.
    """
    mult, suffix, fmt = units.axis(unit)
    data = df.copy()
    data["shown"] = data[y].astype(float) * mult
    data["trust"] = data["trusted"].map({True: "trusted", False: "NOT trusted"}).fillna("unknown")
    labels = sorted(data["series"].astype(str).unique())
    levels = sorted(data[x].dropna().unique().tolist())
    base = alt.Chart(data).encode(
        # ordinal: sweep levels (1, 4, 8, 16...) evenly spaced, no fractional ticks
        x=alt.X(f"{x}:O", title="concurrency" if x == "level" else x, sort=levels,
                axis=alt.Axis(labelAngle=0)),
        y=alt.Y("shown:Q", title=suffix or y, axis=alt.Axis(format=fmt)),
        color=alt.Color(
            "series:N",
            scale=alt.Scale(domain=labels, range=list(SERIES_COLORS[: max(1, len(labels))])),
            legend=alt.Legend(orient="bottom", title=None),
        ),
        tooltip=[
            alt.Tooltip("series:N"),
            alt.Tooltip(f"{x}:O"),
            alt.Tooltip("shown:Q", format=fmt, title=suffix or y),
            alt.Tooltip("trust:N", title="client self-check"),
        ],
    )
    line = base.mark_line(strokeWidth=1.5)
    pts = base.mark_point(size=60).encode(
        fill=alt.condition("datum.trusted", alt.Color("series:N"), alt.value("transparent")),
        shape=alt.Shape("trust:N", legend=alt.Legend(orient="bottom", title=None)),
    )
    return alt.layer(line, pts).properties(title=title, height=height)


def tradeoff_chart(df: pd.DataFrame, *, height: int = 300) -> alt.Chart:
    """Latency/throughput trade-off across runs: x output tok/s, y p99 TTFT (ms), one line a run.

    `df` columns: series (run label), level, output_tok_s, ttft_p99_s, trusted.
    """
    data = df.copy()
    data["ttft_p99_ms"] = data["ttft_p99_s"].astype(float) * units.UNITS["s"].mult
    data["trust"] = data["trusted"].map({True: "trusted", False: "NOT trusted"}).fillna("unknown")
    labels = sorted(data["series"].astype(str).unique())
    base = alt.Chart(data).encode(
        x=alt.X("output_tok_s:Q", title="output tok/s", axis=alt.Axis(format=",.0f")),
        y=alt.Y("ttft_p99_ms:Q", title="TTFT p99 (ms)", axis=alt.Axis(format=",.0f")),
        color=alt.Color(
            "series:N",
            scale=alt.Scale(domain=labels, range=list(SERIES_COLORS[: max(1, len(labels))])),
            legend=alt.Legend(orient="bottom", title=None),
        ),
        order=alt.Order("level:Q"),
        tooltip=[
            alt.Tooltip("series:N", title="run"),
            alt.Tooltip("level:Q"),
            alt.Tooltip("output_tok_s:Q", format=",.1f"),
            alt.Tooltip("ttft_p99_ms:Q", format=",.1f", title="TTFT p99 ms"),
            alt.Tooltip("trust:N", title="client self-check"),
        ],
    )
    line = base.mark_line(strokeWidth=1.5)
    pts = base.mark_point(size=60).encode(
        fill=alt.condition("datum.trusted", alt.Color("series:N"), alt.value("transparent")),
        shape=alt.Shape("trust:N", legend=alt.Legend(orient="bottom", title=None)),
    )
    return alt.layer(line, pts).properties(title="Latency / throughput trade-off", height=height)


def gauge_bar(df: pd.DataFrame, *, unit: str, title: str, height: int = 120) -> alt.Chart:
    """Horizontal bars of a current value per GPU (df: label, value) for the Overview cards."""
    mult, suffix, fmt = units.axis(unit)
    data = df.assign(shown=df["value"].astype(float) * mult)
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None),
            x=alt.X("shown:Q", title=suffix or None, axis=alt.Axis(format=fmt)),
            tooltip=[alt.Tooltip("label:N"), alt.Tooltip("shown:Q", format=fmt, title=suffix)],
        )
        .properties(title=title, height=height)
    )


def stage_chart(df: pd.DataFrame, *, height: int = 200, last: int = 40) -> alt.Chart:
    """Stacked bars of seconds per request by stage (image servers' Server page): one bar per
    time bucket that had requests (the newest `last`, oldest left), its height the average
    request's seconds, split by stage. Buckets are categories, not a time scale, so a bar stays
    readable when requests are sparse in a long window."""
    keep = sorted(df["ts"].unique())[-last:]
    # in time order: the categories' order is the order they first appear in the data, so a
    # bucket that only a later stage has would otherwise land after the newest one
    data = df[df["ts"].isin(keep)].sort_values("ts", kind="stable").assign(
        time=lambda d: pd.to_datetime(d["ts"], unit="s", utc=True).dt.strftime("%H:%M:%S"))
    return (
        alt.Chart(data, height=height)
        .mark_bar()
        .encode(
            x=alt.X("time:O", title="requests ending at (UTC)", sort=None,
                    axis=alt.Axis(labelAngle=-45, labelOverlap=True)),
            y=alt.Y("sum(value):Q", stack="zero", title="s per request"),
            color=alt.Color("label:N", title="stage",
                            legend=alt.Legend(orient="right", labelLimit=180)),
            tooltip=[alt.Tooltip("time:O", title="time (UTC)"), alt.Tooltip("label:N", title="stage"),
                     alt.Tooltip("value:Q", title="seconds", format=".3f")],
        )
    )
