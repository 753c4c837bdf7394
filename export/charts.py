"""Scorecard charts: pandas DataFrame in, Altair chart out (no Streamlit calls, no storage reads).

The builders below are pure; pages draw them through dashboard/components/charts.py (which
re-exports them) with `st.altair_chart(chart)`, and exports render the same charts to SVG/PNG
through vl-convert (chart_svg, chart_png), so a chart looks the same in the dashboard and in a
review document. Inputs are in base units (epoch seconds, seconds, tokens/s); latency axes show
milliseconds.

| function | input columns | what |
|---|---|---|
| time_series | ts, value, metric (+ optional events: ts, kind, severity, message) | lines over time, events as vertical rules |
| latency_vs_load | level, <stat>_p50_s / _p95_s / _p99_s | latency percentiles against concurrency or rate |
| throughput_vs_load | level, rps and/or output_tok_s / images_per_min | throughput against concurrency or rate |
| compare_bars | label, metric, value | one bar per scorecard per metric |
| tune_pareto | profile, status, cost, p99_ms, winner | a tune's candidates: cost against p99 latency, SLO dashed; both axes from zero |
| tune_goodput | profile, goodput_rps, lo, hi, role | a tune's goodput per candidate from zero, the measured spread as a whisker |

card_charts(card) / all_charts(cards) pick the charts of one scorecard or a comparison, by name.
Their legends name series in words: a series key (`log.queue_req`) becomes the label the Server
page's legend shows for it ("queued"; SERIES_LABELS, read from present/panels.py PANELS, the
one table of series labels), so a review reads the same words as the dashboard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

from present.format import SERIES_COLORS, SEVERITY_COLORS
from present.panels import PANELS
from scorecard.metric_specs import SPECS_BY_KEY
from scorecard.model import Scorecard
from storage import series_keys as sk
from storage import units
from storage.redact import redact_obj

WIDTH, HEIGHT = 520, 220
PCT_COLORS = {"p50": SERIES_COLORS[0], "p95": SERIES_COLORS[1], "p99": SERIES_COLORS[2]}
#: series key -> the legend label the Server page gives it (present/panels.py PANELS)
SERIES_LABELS: dict[str, str] = {key: label for p in PANELS for key, label in (*p.series, *p.fallback)}


def _empty(title: str) -> alt.Chart:
    return (
        alt.Chart(pd.DataFrame({"text": ["no data"]}))
        .mark_text(size=14, color="#868e96")
        .encode(text="text:N")
        .properties(title=title, width=WIDTH, height=HEIGHT / 2)
    )


def time_series(
    df: pd.DataFrame,
    *,
    title: str,
    y_title: str,
    events: pd.DataFrame | None = None,
    scale: float = 1.0,
) -> alt.Chart | alt.LayerChart:
    """Lines per `metric` over `ts` (epoch s); `scale` converts for display (1000 for ms).
    Events become vertical rules coloured by severity, with the message as tooltip."""
    if df is None or df.empty:
        return _empty(title)
    data = df.assign(time=pd.to_datetime(df["ts"], unit="s", utc=True),
                     shown=df["value"].astype(float) * scale)
    lines = (
        alt.Chart(data)
        # samples are gauges held until the next one: draw steps, not slopes
        .mark_line(point=len(data) < 60, interpolate="step-after")
        .encode(
            x=alt.X("time:T", title="time (UTC)", axis=alt.Axis(format="%H:%M:%S")),
            y=alt.Y("shown:Q", title=y_title),
            color=alt.Color("metric:N", title=None, scale=alt.Scale(range=list(SERIES_COLORS)),
                            legend=alt.Legend(labelLimit=260)),
            tooltip=["metric:N", "time:T", alt.Tooltip("shown:Q", format=",.3g")],
        )
    )
    layers: list[alt.Chart] = [lines]
    if events is not None and not events.empty:
        ev = events.assign(time=pd.to_datetime(events["ts"], unit="s", utc=True))
        sev = list(SEVERITY_COLORS)
        layers.append(
            alt.Chart(ev)
            .mark_rule(strokeDash=[4, 3], strokeWidth=1.5)
            .encode(
                x="time:T",
                color=alt.Color("severity:N", scale=alt.Scale(
                    domain=sev, range=[SEVERITY_COLORS[s] for s in sev]), legend=None),
                tooltip=["kind:N", "severity:N", "message:N", "time:T"],
            )
        )
    return alt.layer(*layers).resolve_scale(color="independent").properties(
        title=title, width=WIDTH, height=HEIGHT)


def latency_vs_load(
    levels: pd.DataFrame, *, stat: str = "ttft", x_title: str = "concurrency",
    title: str | None = None, y_max: float | None = None,
) -> alt.Chart:
    """p50/p95/p99 of one latency stat (ttft, itl, tpot, e2e in ms; image in s) against load
    level, the axis from zero; `y_max` (in seconds) fixes its top, so charts drawn side by side
    share one scale (latency_top gives it)."""
    title = title or f"{stat.upper()} vs {x_title}"
    cols = {f"{stat}_p{p}_s": f"p{p}" for p in (50, 95, 99)}
    have = [c for c in cols if c in levels.columns] if levels is not None else []
    if levels is None or levels.empty or not have:
        return _empty(title)
    long = levels.melt(id_vars=["level"], value_vars=have, var_name="col", value_name="s")
    # per-image latency is seconds everywhere (an image takes seconds); token latencies are ms
    scale, unit, _ = units.axis("sec" if stat == "image" else "s")
    long = long.dropna(subset=["s"]).assign(pct=lambda d: d["col"].map(cols),
                                            ms=lambda d: d["s"].astype(float) * scale)
    if long.empty:
        return _empty(title)
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("level:Q", title=x_title, axis=alt.Axis(
                format="~g", tickMinStep=1 if x_title == "concurrency" else alt.Undefined)),
            y=alt.Y("ms:Q", title=("per-image latency" if stat == "image" else stat.upper())
                    + f" ({unit})", scale=alt.Scale(zero=True) if y_max is None
                    else alt.Scale(domain=[0, y_max * scale], nice=False)),
            color=alt.Color("pct:N", title=None, scale=alt.Scale(
                domain=list(PCT_COLORS), range=list(PCT_COLORS.values()))),
            tooltip=["level:Q", "pct:N", alt.Tooltip("ms:Q", format=",.1f")],
        )
        .properties(title=title, width=WIDTH, height=HEIGHT)
    )


def throughput_vs_load(
    levels: pd.DataFrame, *, columns: Sequence[str] = ("output_tok_s", "rps"),
    x_title: str = "concurrency", title: str = "Throughput vs load",
) -> alt.Chart | alt.HConcatChart:
    """One small chart per throughput column (their units differ) against load level."""
    have = [c for c in columns if levels is not None and c in levels.columns
            and levels[c].notna().any()]
    if not have:
        return _empty(title)
    charts = []
    for i, col in enumerate(have):
        charts.append(
            alt.Chart(levels.dropna(subset=[col]))
            .mark_line(point=True, color=SERIES_COLORS[(i + 4) % len(SERIES_COLORS)])
            .encode(
                x=alt.X("level:Q", title=x_title, axis=alt.Axis(format="~g")),
                y=alt.Y(f"{col}:Q", title=SPECS_BY_KEY[col].label if col in SPECS_BY_KEY
                        else col.replace("_", " ")),
                tooltip=["level:Q", alt.Tooltip(f"{col}:Q", format=",.2f")],
            )
            .properties(width=WIDTH // len(have) - 20, height=HEIGHT)
        )
    return alt.hconcat(*charts).properties(title=title)


def compare_bars(df: pd.DataFrame, *, title: str = "Comparison") -> alt.Chart:
    """Grouped bars: one per scorecard `label` for each `metric` (value in display units)."""
    if df is None or df.empty:
        return _empty(title)
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("label:N", title=None, axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("label:N", title=None, scale=alt.Scale(range=list(SERIES_COLORS)),
                            legend=alt.Legend(orient="bottom", direction="vertical",
                                              labelLimit=600)),
            column=alt.Column("metric:N", title=None),
            tooltip=["label:N", "metric:N", alt.Tooltip("value:Q", format=",.3g")],
        )
        .resolve_scale(y="independent")
        .properties(title=title, width=90, height=HEIGHT * 0.8)
    )


# ---------------------------------------------------------------------------------------------
# the charts of a scorecard (the HTML and PNG exports; the Compare page draws latency_vs_load)


def tune_pareto(points: pd.DataFrame, *, slo_ms: float | None, cost_label: str) -> alt.TopLevelMixin:
    """A tune's candidates as points (winner green), cost against p99 latency, the SLO as a dashed
    rule. Both axes start at zero: a cost axis fitted to the points magnified noise into a spread."""
    base = alt.Chart(points).encode(
        x=alt.X("cost:Q", title=cost_label, scale=alt.Scale(zero=True)),
        y=alt.Y("p99_ms:Q", title="p99 latency (ms)", scale=alt.Scale(zero=True)))
    layers: list[alt.Chart] = [
        base.mark_point(size=120, filled=True).encode(
            color=alt.Color("winner:N", title="winner",
                            scale=alt.Scale(domain=[True, False], range=[SERIES_COLORS[4], SERIES_COLORS[0]])),
            tooltip=["profile", "status", "cost", "p99_ms"]),
        base.mark_text(dy=-12).encode(text="profile:N"),
    ]
    if slo_ms is not None:
        layers.append(alt.Chart(pd.DataFrame({"y": [slo_ms]})).mark_rule(strokeDash=[6, 4], color="#d62728")
                      .encode(y="y:Q"))
    return alt.layer(*layers).properties(height=320, title="Cost vs p99 latency (SLO dashed)")


def tune_goodput(frame: pd.DataFrame) -> alt.TopLevelMixin:
    """Goodput per candidate (req/s, axis from zero), its measured spread [lo, hi] as a whisker;
    `role` colours the winner, the tied candidates and the rest."""
    base = alt.Chart(frame).encode(y=alt.Y("profile:N", title=None, sort=None, axis=alt.Axis(labelLimit=260)))
    bars = base.mark_bar(opacity=0.85).encode(
        x=alt.X("goodput_rps:Q", title="goodput (req/s within the SLO)", scale=alt.Scale(zero=True)),
        color=alt.Color("role:N", title=None, legend=alt.Legend(orient="top"),
                        scale=alt.Scale(domain=["winner", "tie", "other"],
                                        range=[SERIES_COLORS[4], SERIES_COLORS[1], SERIES_COLORS[0]])),
        tooltip=["profile", "goodput_rps", "lo", "hi", "role"])
    whiskers = base.mark_rule(strokeWidth=2, color="#212529").encode(x="lo:Q", x2="hi:Q")
    # a band of 40 px a candidate: Streamlit fits a fixed height's title, legend and axis inside
    # it (44 px a row drew no plot at all); a step height is the plot's own
    return alt.layer(bars, whiskers).properties(height=alt.Step(40),
                                                title="Goodput and its measured spread (whisker)")


def latency_top(frames: Sequence[pd.DataFrame], stat: str) -> float | None:
    """The highest p50/p95/p99 of `stat` (seconds) over several runs' level tables, 5 % above:
    one y scale for charts compared side by side (None when none has the stat)."""
    tops = [float(f[c].max()) for f in frames if f is not None and not f.empty
            for c in (f"{stat}_p{p}_s" for p in (50, 95, 99)) if c in f.columns and f[c].notna().any()]
    return max(tops) * 1.05 if tops else None


def levels_frame(card: Scorecard) -> pd.DataFrame:
    """The probe run's per-level table of a scorecard (one row per load level)."""
    return pd.DataFrame(card.levels)


def _labelled(series: pd.DataFrame) -> pd.DataFrame:
    """`series` with each key in `metric` replaced by its legend label (a key without one stays)."""
    return series.assign(metric=series["metric"].map(lambda k: SERIES_LABELS.get(k, k)))


def card_charts(card: Scorecard) -> dict[str, alt.TopLevelMixin]:
    """The charts of one scorecard, by name; empty data gives a 'no data' panel."""
    x = "rate (req/s)" if card.subject.get("level_mode") == "rate" else "concurrency"
    levels = levels_frame(card)
    image = card.subject.get("server_kind") == "image"
    series = pd.DataFrame(card.series, columns=["metric", "ts", "value"])
    events = pd.DataFrame(card.events, columns=["ts", "kind", "severity", "message"])
    load = _labelled(series[series["metric"].isin([sk.LOG_RUNNING_REQ, sk.LOG_QUEUE_REQ])])
    out: dict[str, alt.TopLevelMixin] = {
        "latency_vs_load": latency_vs_load(levels, stat="image" if image else "ttft", x_title=x),
        "throughput_vs_load": throughput_vs_load(
            levels, columns=("images_per_min", "rps") if image else ("output_tok_s", "rps"),
            x_title=x),
        "batch_and_queue": time_series(load, title="Running batch and queue",
                                       y_title="requests", events=events),
    }
    canary = _labelled(series[series["metric"] == sk.CANARY_TTFT_S])
    if not canary.empty:
        scale, unit, _ = units.axis("s")
        out["canary_ttft"] = time_series(canary, title="Canary TTFT", y_title=unit,
                                         events=events, scale=scale)
    return out


def comparison_chart(cards: Sequence[Scorecard]) -> alt.TopLevelMixin:
    keys = ("ttft_p99_s", "output_tok_s", "radix_hit_rate", "usd_per_1m_output_tok")
    rows = []
    for c in cards:
        for k in keys:
            v = c.value(k)
            if v is not None:
                scale = units.axis(SPECS_BY_KEY[k].unit)[0]
                rows.append({"label": c.title, "metric": SPECS_BY_KEY[k].label, "value": v * scale})
    return compare_bars(pd.DataFrame(rows), title="Key figures (ms, tok/s, %, USD)")


def all_charts(cards: Sequence[Scorecard]) -> list[tuple[str, alt.TopLevelMixin]]:
    out: list[tuple[str, alt.TopLevelMixin]] = []
    if len(cards) > 1:
        out.append(("comparison", comparison_chart(cards)))
    for i, card in enumerate(cards):
        for name, ch in card_charts(card).items():
            out.append((f"{i}:{name}" if len(cards) > 1 else name, ch))
    return out


def export_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The Vega-Lite spec (data included) handed to vl-convert, redacted (storage/redact.py):
    an event message on a chart's tooltip layer carries no secret into an SVG or PNG."""
    spec: dict[str, Any] = redact_obj(chart.to_dict())
    return spec


def chart_svg(chart: alt.TopLevelMixin) -> str:
    import vl_convert as vlc

    svg: str = vlc.vegalite_to_svg(export_spec(chart))
    return svg


def chart_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    png: bytes = vlc.vegalite_to_png(export_spec(chart), scale=scale)
    return png
