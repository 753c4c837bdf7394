"""Chart builders for pages: the scorecard charts of export/charts.py.

They are pure (DataFrame in, Altair chart out, no st.* calls) and live with the exports, which
render the same charts to SVG/PNG; pages import them from here and draw them with
`st.altair_chart(chart)`. Live-view charts are in timeseries_charts.py.
"""

from __future__ import annotations

from export.charts import (
    compare_bars,
    latency_top,
    latency_vs_load,
    levels_frame,
    throughput_vs_load,
    time_series,
)

__all__ = ["compare_bars", "latency_top", "latency_vs_load", "levels_frame", "throughput_vs_load", "time_series"]
