"""Time series of a Prometheus-sourced server read straight from its Prometheus (`query_range`),
for windows longer than what Pitwall stored (a 7-day view of a server it began watching today).

`read_window(url, selector, metrics, start, end, engine=...)` asks Prometheus for only the engine
series the requested `metrics.*` keys need, at a step matched to the window (window / MAX_POINTS,
never below the target's scrape interval), and turns each step into Pitwall keys through the
engine's own conversion (its Engine's `prometheus` reader, collectors/base.py PromReader): gauges
are the value at the step, counters the rate over the step, histograms windowed quantiles over
the step.

Gaps: `query_range` answers a step with the last sample up to 5 minutes old, so a server that
stopped without Prometheus noticing (Prometheus itself down or restarted: no staleness markers)
looks flat for 5 minutes. A second query, `max(timestamp(up{sel}) and up{sel} == 1)`, gives the
time of the last successful scrape at each step (one series, so cheap: every series of a scrape
carries that scrape's time; `timestamp()` must take the selector itself, since of an expression
it returns the evaluation time). A step whose scrape is older than GAP_FACTOR (1.5) scrape
intervals is a gap: every metric is NaN there (charts break the line), nothing is carried
forward. A step with no answer at all (a target that went down: Prometheus ends its series with
staleness markers) is NaN as well. The same rule as the collector
(collectors/prometheus_source.py), which stores only real scrapes. The step after a gap is
computed against the last step before it, as the collector does.

Cross-check a point: `curl "$PROM/api/v1/query_range?query=<metric>{...}&start=..&end=..&step=.."`.
Streamlit-free; the Server page calls it through a cached wrapper.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import pandas as pd

from collectors.base import CollectorError, PromReader
from collectors.engines import DEFAULT_ENGINE, get_engine
from collectors.prometheus_api import PromClient, gap_mask, matchers
from dashboard.services.views.timeseries import MAX_POINTS as TS_MAX_POINTS
from present.panels import Panel

MAX_POINTS = 1000  # steps per window at most (a chart is ~560 px wide; PromQL's cap is 11,000)
GAP_FACTOR = 1.5  # a step whose sample is older than this many scrape intervals is a gap


@dataclass(frozen=True)
class PromWindow:
    """One window read through Prometheus. `frame`: columns ts (s), metric, value (NaN = gap)."""

    url: str
    step_s: float
    scrape_interval_s: float
    last_sample_ts: float | None  # newest underlying sample in the window, s
    gap_steps: int  # steps marked as gaps
    frame: pd.DataFrame

    def caption(self, now: float) -> str:
        """"read through Prometheus <host> · step N s · last sample N s ago" for the page."""
        host = urlsplit(self.url).netloc or self.url
        age = "no sample in the window" if self.last_sample_ts is None else (
            f"last sample {max(0.0, now - self.last_sample_ts):.0f} s ago")
        return f"read through Prometheus {host} · step {self.step_s:g} s · {age}"


def step_for(window_s: float, scrape_interval_s: float, max_points: int = MAX_POINTS) -> float:
    """Seconds per point: window / max_points rounded up to a whole second, never below the
    scrape interval (a finer step would only repeat samples)."""
    return float(max(scrape_interval_s, math.ceil(window_s / max_points)))


def _reader(engine: str) -> PromReader:
    factory = get_engine(engine).prometheus
    if factory is None:
        raise ValueError(f"Pitwall cannot read {get_engine(engine).display_name}'s series through Prometheus; "
                         "its stored samples are shown.")
    return factory()


def read_window(url: str, selector: str, metrics: list[str], start: float, end: float, *,
                scrape_interval_s: float | None = None, max_points: int = MAX_POINTS,
                deadline_s: float = 30.0, engine: str = DEFAULT_ENGINE) -> PromWindow:
    """The `metrics` (metrics.* keys) of the server `selector` names, from start to end (s).

    Raises CollectorError (Prometheus down, a refused query, an answer over the cap) and
    ValueError (no metrics.* key asked for, or an engine Pitwall cannot read there); the message
    says what to do.
    """
    sel = matchers(selector)
    reader = _reader(engine)
    names = reader.range_names(metrics)
    start = round(start, 3)  # Prometheus's steps are whole milliseconds from start
    client = PromClient(url, deadline_s=deadline_s)
    try:
        target = client.target(sel)
        interval = scrape_interval_s or (target.interval_s if target else 15.0)
        strip = set(target.labels) if target else {"job", "instance"}
        step = step_for(end - start, interval, max_points)
        # steps are counted back from `end`, so the newest point is at the window's end
        start = round(end - math.floor((end - start) / step) * step, 3)
        series = client.range(f"{{{names},{sel}}}", start, end, step)
        stamps = client.range(f"max(timestamp(up{{{sel}}}) and up{{{sel}}} == 1)", start, end, step)
    finally:
        client.close()
    sample_at = {round(t, 3): v for s in stamps for t, v in s.points}
    snaps = reader.steps(series, strip)
    # every step of the window: a step Prometheus answers nothing for (a target that went down
    # leaves staleness markers, so its series end there) is a gap too, not a missing row
    grid = sorted({round(start + k * step, 3) for k in range(int((end - start) // step) + 1)}
                  | set(snaps) | set(sample_at))
    gaps = gap_mask(grid, [sample_at.get(t) for t in grid], GAP_FACTOR * interval)
    wanted = set(metrics)
    rows: list[tuple[float, str, float]] = []
    state = None
    for t, gap in zip(grid, gaps, strict=True):
        if gap or t not in snaps:
            rows.extend((t, m, math.nan) for m in sorted(wanted))
            continue
        values, state = reader.values_at(snaps[t], state, t)
        rows.extend((t, m, v) for m, v in sorted(values.items()) if m in wanted)
    last = max((v for v in sample_at.values() if not math.isnan(v)), default=None)
    frame = pd.DataFrame(rows, columns=["ts", "metric", "value"])
    return PromWindow(url, step, interval, last, sum(gaps), frame)


def _label_rows(win: PromWindow, labels: dict[str, str]) -> pd.DataFrame:
    part = win.frame[win.frame["metric"].isin(list(labels))]
    return pd.DataFrame({"ts": part["ts"].to_numpy(dtype=float),
                         "label": part["metric"].map(labels).to_numpy(),
                         "value": part["value"].to_numpy(dtype=float),
                         "min": part["value"].to_numpy(dtype=float),
                         "max": part["value"].to_numpy(dtype=float)})


def _prom_pairs(panel: Panel, stored: pd.DataFrame | None) -> dict[str, str]:
    """The panel's metrics.* series to read through Prometheus: its primary ones, plus its
    fallback ones when no other primary series (log.*, canary.*) has stored data in the window
    (the rule of timeseries.read_series)."""
    others = [label for key, label in panel.series if not key.startswith("metrics.")]
    on_primary = stored is not None and not stored.empty and bool(stored["label"].isin(others).any())
    pairs = panel.series if on_primary else panel.series + panel.fallback
    return {k: label for k, label in pairs if k.startswith("metrics.")}


def panel_series(stored: dict[str, pd.DataFrame], panels: list[Panel], url: str, selector: str,
                 since: float, until: float, *, now: float | None = None,
                 deadline_s: float = 5.0, engine: str = DEFAULT_ENGINE) -> tuple[dict[str, pd.DataFrame], str]:
    """The Server page's panels for a Prometheus-sourced server: `stored` (timeseries.read_series)
    with its metrics.* series replaced by the window read through Prometheus, and the caption
    ("read through Prometheus <host> · step N s · last sample N s ago"). When Prometheus cannot
    be read the stored panels stay and the caption says why."""
    wanted = {p.key: _prom_pairs(p, stored.get(p.key)) for p in panels}
    keys = sorted({k for pairs in wanted.values() for k in pairs})
    if not keys:
        return stored, ""
    try:
        win = read_window(url, selector, keys, since, until, max_points=TS_MAX_POINTS,
                          deadline_s=deadline_s, engine=engine)
    except (CollectorError, ValueError) as exc:
        host = urlsplit(url).netloc or url
        return stored, f"Prometheus {host} could not be read, showing stored samples: {exc}"
    out = dict(stored)
    for key, pairs in wanted.items():
        if not pairs:
            continue
        base = stored.get(key)
        keep = base[~base["label"].isin(list(pairs.values()))] if base is not None else None
        rows = _label_rows(win, pairs)
        out[key] = rows if keep is None or keep.empty else pd.concat([keep, rows], ignore_index=True)
    return out, win.caption(time.time() if now is None else now)
