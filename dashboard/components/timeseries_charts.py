"""Pure DataFrame -> Altair charts for live views and benchmark curves (no st.* calls here).

Inputs are in base units (seconds, 0-1 ratios, bytes, W, °C); `DISPLAY` converts them for the
axis (latency in ms, ratios in %, bytes in GiB). Time is UTC epoch seconds and is drawn as a
temporal axis; events are vertical rules on the same axis, coloured by severity
(format.SEVERITY_COLORS) with kind and message in the tooltip.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard.components.format import SERIES_COLORS, SEVERITY_COLORS

# unit -> (multiplier to display, axis suffix, d3 format)
DISPLAY: dict[str, tuple[float, str, str]] = {
    "s": (1000.0, "ms", ",.1f"),
    "ratio": (100.0, "%", ".1f"),
    "pct": (1.0, "%", ".1f"),
    "count": (1.0, "", ",.0f"),
    "tok_s": (1.0, "tok/s", ",.0f"),
    "rps": (1.0, "req/s", ",.2f"),
    "bytes": (1.0 / 2**30, "GiB", ",.1f"),
    "w": (1.0, "W", ",.0f"),
    "c": (1.0, "°C", ".0f"),
}
EVENT_KINDS_MARKED = (
    "oom", "prefill_oom", "decode_retract", "crash", "server_exit", "nccl_timeout",
    "relaunch_started", "relaunch_done", "relaunch_failed", "rollback", "health_down",
    "health_up", "server_ready", "warmup_failed",
)


def _time(ts: pd.Series) -> pd.Series:
    return pd.to_datetime(ts.astype(float), unit="s", utc=True)


def event_rules(events: pd.DataFrame | None, since: float, until: float) -> alt.Chart | None:
    """Vertical rules at each event (kinds worth seeing on a chart), coloured by severity."""
    if events is None or events.empty:
        return None
    ev = events[events["kind"].isin(EVENT_KINDS_MARKED)]
    ev = ev[(ev["ts"] >= since) & (ev["ts"] < until)]
    if ev.empty:
        return None
    data = pd.DataFrame(
        {
            "time": _time(ev["ts"]),
            "kind": ev["kind"].astype(str),
            "severity": ev["severity"].fillna("info").astype(str),
            "message": ev["message"].fillna("").astype(str).str.slice(0, 160),
        }
    )
    return (
        alt.Chart(data)
        .mark_rule(strokeWidth=1.5, strokeDash=[4, 3], opacity=0.8)
        .encode(
            x=alt.X("time:T"),
            color=alt.Color(
                "severity:N",
                scale=alt.Scale(domain=list(SEVERITY_COLORS), range=list(SEVERITY_COLORS.values())),
                legend=None,
            ),
            tooltip=[
                alt.Tooltip("time:T", title="time", format="%Y-%m-%d %H:%M:%S"),
                alt.Tooltip("kind:N"),
                alt.Tooltip("severity:N"),
                alt.Tooltip("message:N"),
            ],
        )
    )


def timeseries_chart(
    df: pd.DataFrame,
    *,
    unit: str,
    since: float,
    until: float,
    events: pd.DataFrame | None = None,
    title: str = "",
    height: int = 200,
    dashed: tuple[str, ...] = (),
    points: tuple[str, ...] = (),
) -> alt.LayerChart:
    """Lines of `df` (ts, label, value) over [since, until) with event rules on the time axis.

    Labels containing any of `dashed` are drawn dashed (estimates); labels in `points` also get
    dots (sparse client-side samples such as the canary).
    """
    mult, suffix, fmt = DISPLAY.get(unit, (1.0, "", ",.3g"))
    labels = sorted(df["label"].unique()) if not df.empty else []
    data = pd.DataFrame(
        {
            "time": _time(df["ts"]) if not df.empty else pd.Series([], dtype="datetime64[ns, UTC]"),
            "series": df["label"].astype(str) if not df.empty else pd.Series([], dtype=str),
            "value": (df["value"].astype(float) * mult) if not df.empty else pd.Series([], dtype=float),
        }
    )
    data["dash"] = [any(d in s for d in dashed) for s in data["series"]]
    domain = [pd.Timestamp(since, unit="s", tz="UTC"), pd.Timestamp(until, unit="s", tz="UTC")]
    x = alt.X("time:T", title=None, scale=alt.Scale(domain=[d.isoformat() for d in domain]))
    y = alt.Y("value:Q", title=suffix or None, axis=alt.Axis(format=fmt))
    color = alt.Color(
        "series:N",
        scale=alt.Scale(domain=labels, range=list(SERIES_COLORS[: max(1, len(labels))])),
        legend=alt.Legend(orient="bottom", title=None),
    )
    tooltip = [
        alt.Tooltip("time:T", title="time", format="%Y-%m-%d %H:%M:%S"),
        alt.Tooltip("series:N"),
        alt.Tooltip("value:Q", format=fmt, title=suffix or "value"),
    ]
    base = alt.Chart(data).encode(x=x, y=y, color=color, tooltip=tooltip)
    lines = base.mark_line(strokeWidth=1.5, interpolate="linear").encode(
        strokeDash=alt.StrokeDash(
            "dash:N", scale=alt.Scale(domain=[False, True], range=[[1, 0], [5, 3]]), legend=None
        )
    )
    layers: list[alt.Chart] = [lines]
    if points:
        dots = base.transform_filter(
            alt.FieldOneOfPredicate(field="series", oneOf=[s for s in labels if s in points])
        ).mark_point(size=18, filled=True)
        layers.append(dots)
    rules = event_rules(events, since, until)
    if rules is not None:
        layers.append(rules)
    chart = alt.layer(*layers).resolve_scale(color="independent")
    return chart.properties(title=title, height=height)


def curves_chart(
    df: pd.DataFrame, *, x: str, y: str, unit: str, title: str, height: int = 260
) -> alt.Chart:
    """Benchmark curves: one line per series (e.g. run or percentile) over a load level.

    `df` columns: `x`, `y` (base units), series, trusted (bool); untrusted levels are hollow.
    """
    mult, suffix, fmt = DISPLAY.get(unit, (1.0, "", ",.3g"))
    data = df.copy()
    data["shown"] = data[y].astype(float) * mult
    data["trust"] = data["trusted"].map({True: "trusted", False: "NOT trusted"}).fillna("unknown")
    labels = sorted(data["series"].astype(str).unique())
    base = alt.Chart(data).encode(
        x=alt.X(f"{x}:Q", title=x, scale=alt.Scale(type="linear", zero=False)),
        y=alt.Y("shown:Q", title=suffix or y, axis=alt.Axis(format=fmt)),
        color=alt.Color(
            "series:N",
            scale=alt.Scale(domain=labels, range=list(SERIES_COLORS[: max(1, len(labels))])),
            legend=alt.Legend(orient="bottom", title=None),
        ),
        tooltip=[
            alt.Tooltip("series:N"),
            alt.Tooltip(f"{x}:Q"),
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
    data["ttft_p99_ms"] = data["ttft_p99_s"].astype(float) * 1000.0
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
    mult, suffix, fmt = DISPLAY.get(unit, (1.0, "", ",.3g"))
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
