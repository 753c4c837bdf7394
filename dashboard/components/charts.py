"""Chart builders for pages: the scorecard charts of export/charts.py.

They are pure (DataFrame in, Altair chart out, no st.* calls) and live with the exports, which
render the same charts to SVG/PNG; pages import them from here and draw them with
`st.altair_chart(chart)`. Live-view charts are in timeseries_charts.py; `length_bars` draws a
trace's length buckets (the Traces page).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from export.charts import (
    compare_bars,
    latency_top,
    latency_vs_load,
    levels_frame,
    throughput_vs_load,
    time_series,
)

__all__ = ["compare_bars", "latency_top", "latency_vs_load", "length_bars", "levels_frame", "throughput_vs_load",
           "time_series"]


def length_bars(lengths: pd.DataFrame) -> alt.Chart:
    """A trace's requests per length bucket, input and output side by side, buckets in order
    (`tokens from` as the Traces page's service gives it: text labels, smallest first)."""
    long = lengths.melt(id_vars="tokens from", var_name="side", value_name="requests")
    return alt.Chart(long).mark_bar().encode(
        x=alt.X("tokens from:N", sort=list(lengths["tokens from"]), title="tokens (from)"),
        xOffset="side:N", y=alt.Y("requests:Q", title="requests"),
        color=alt.Color("side:N", title=None)).properties(height=260)
