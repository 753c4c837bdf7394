"""The image pipeline's stage chart (components/timeseries_charts.stage_chart) draws its bars in
time order: its x is categorical in the order the categories first appear in the data, so the
rows must be in time order, not grouped by stage (a bucket that only a later stage had was drawn
after the newest bar: "18:35:59, 18:36:37, 18:37:17, 18:36:17" on a demo's Server page)."""

from __future__ import annotations

import pandas as pd

from dashboard.components.timeseries_charts import stage_chart


def test_bars_are_in_time_order_when_stages_cover_different_buckets() -> None:
    t0 = 1_796_400_000.0
    rows = [("DenoisingStage", t0 + s, 4.0) for s in (0, 60, 120)]  # sorted by stage, then time
    rows += [("TextEncodingStage", t0 + s, 0.1) for s in (0, 30, 60, 90, 120)]
    df = pd.DataFrame(rows, columns=["label", "ts", "value"])
    spec = stage_chart(df).to_dict()
    data = next(iter(spec["datasets"].values()))
    order = list(dict.fromkeys(r["time"] for r in data))
    assert order == sorted(order) and len(order) == 5, order


def test_only_the_newest_buckets_are_kept() -> None:
    t0 = 1_796_400_000.0
    df = pd.DataFrame([("DenoisingStage", t0 + 10 * i, 1.0) for i in range(50)], columns=["label", "ts", "value"])
    data = next(iter(stage_chart(df, last=40).to_dict()["datasets"].values()))
    assert len({r["time"] for r in data}) == 40
