"""Chart series for the Server page: which metrics each panel plots and how they are read.

Every series is SQL-bucketed by `storage.repo.bucketed_series` to at most MAX_POINTS (600) points
(windows of hours read the per-minute Rollup table, a 7-day window the 15-minute RollupQuarter),
so a 7-day panel over 1-second samples ships 336 points per series, never 600k. Values stay in base units
(seconds, 0-1 ratios, bytes, watts, °C); the chart component converts for display.

Panels (present/panels.py PANELS and GPU_PANELS: which series each panel plots) are read here.

A card in MIG mode (collectors/gpu.py) is a card plus one GPU entry per instance
(scorecard/gpu_entries.py): utilisation and memory are drawn per entry, so an instance is a series of
its own ("GPU 0 · MIG 3g.71gb (instance 1)", `gpu.<i>.mig<GPU_I_ID>.mem_used_bytes`); power and
temperature stay the card's ("GPU 0"), drawn once.

Cross-check a point: `sqlite3 pitwall.db "select avg(value) from sample where server_id=N and
metric='log.running_req' and ts between A and B"`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sqlalchemy.engine import Engine

from present import shown
from present.format import fmt_window
from present.panels import GPU_PANELS, PANELS, PRIORITY_KEYS, Panel, priority_of, priority_panel
from scorecard import gpu_entries as entries_svc
from scorecard.gpu_entries import CARD_FIELDS, GpuEntry
from storage import repo
from storage import series_keys as sk
from storage.kinds import EVENT_KINDS as _EVENT_KINDS

# A chart's plot is ~560 px wide in the two-column layout: more points than pixels cannot be
# seen, and every point costs the browser (Vega runs each row through interpreted expressions)
# and the server (Arrow, protobuf). Tiers widen buckets, so windows get: 15 min -> 450 points of
# 2 s, 1 h -> 600 of 6 s, 6 h -> 360 of 1 min, 24 h -> 480 of 3 min, 7 d -> 336 of 30 min.
MAX_POINTS = 600


#: every event kind, in taxonomy order (the Events page's filter)
EVENT_KINDS: tuple[str, ...] = tuple(_EVENT_KINDS)


def gpu_entries(engine: Engine, *, server_id: int, configured: list[int] | None = None) -> list[GpuEntry]:
    """GPU entries with telemetry for this server: each card (the configured ones, else what is
    stored), then each of its MIG instances with stored series (scorecard/gpu_entries.py)."""
    return entries_svc.gpu_entries(engine, server_id=server_id, configured=configured)


def gpu_panels(entries: Sequence[GpuEntry | int]) -> list[Panel]:
    """One panel per GPU_PANELS row, a series per GPU entry (an int is a whole card). A card's
    own fields (power, temperature) are drawn for the card only, never once per instance."""
    gpus = [e if isinstance(e, GpuEntry) else GpuEntry(int(e)) for e in entries]
    out = []
    for key, title, unit, field in GPU_PANELS:
        shown = [g for g in gpus if g.mig_id is None or field not in CARD_FIELDS]
        out.append(Panel(key, title, unit, tuple((g.key(field), g.label) for g in shown)))
    return out


def priorities(engine: Engine, *, server_id: int) -> list[str]:
    """The request priorities this server's queue gauges were broken down by (stored keys), highest
    first where they are numbers ("None", "HIGH" ... after them)."""
    found: set[str] = set()
    for pattern, _ in PRIORITY_KEYS:
        found.update(p for k in repo.metric_names(engine, server_id=server_id, prefix=sk.pattern_prefix(pattern))
                     if (p := priority_of(k)) is not None)

    def order(p: str) -> tuple[int, float, str]:
        try:
            return (0, -float(p), p)
        except ValueError:
            return (1, 0.0, p)

    return sorted(found, key=order)


def priority_panels(values: Sequence[str]) -> list[Panel]:
    """The Server page's per-priority panel, when the server broke its queues down by priority."""
    return [priority_panel(values)] if values else []


#: the shortest span a window is clamped to (a server seconds old still gets a readable axis)
MIN_SPAN_S = 60.0


def chart_since(since: float, until: float, window_s: float, first_ts: float | None) -> float:
    """Where one chart's axis starts: a young server's (a window clamped to its data: `since`
    after `until - window_s`) chart whose own series begin later (a series that starts with the
    first sweep) starts at its own first sample, on the 10-s grid and at least MIN_SPAN_S before
    `until`, so it is not mostly empty; any other chart keeps the page's window."""
    if first_ts is None or since <= until - window_s or first_ts <= since:
        return since
    return max(since, min(float(int(first_ts // 10) * 10), until - MIN_SPAN_S))


def window(window_s: float, now: float | None = None, first_ts: float | None = None) -> tuple[float, float]:
    """[since, until) with `until` on a grid, so reads within one step share a cache entry and
    an unchanged chart is not re-sent: 10 s for windows up to 6 h, 60 s beyond (their points are
    minutes or more, so a step of 60 s hides nothing; the 7-day view then moves once a minute,
    not on every 30-s refresh).

    With `first_ts` (where the server's data begin, `data_start`) a window reaching back before
    it starts there instead (on a 10-s grid, at least MIN_SPAN_S long): a 3-minute-old server
    fills the chart rather than the right-most sliver of a 1-hour axis, and its 7-day view reads
    raw seconds rather than one 30-minute bucket (a single point, which a line cannot draw)."""
    now = time.time() if now is None else now
    step = 10 if window_s <= 6 * 3600 else 60
    until = float(int(now // step) * step + step)
    since = until - window_s
    if first_ts is not None and first_ts > since:
        until = float(int(now // 10) * 10 + 10)  # a short span: a 60-s step would leave a blank tail
        since = max(until - window_s, min(float(int(first_ts // 10) * 10), until - MIN_SPAN_S))
    return since, until


def data_start(engine: Engine, *, server_id: int, gpus: Sequence[GpuEntry | int] = (),
               panels: Sequence[str] | None = None, metrics: Sequence[str] = ()) -> float | None:
    """Epoch seconds of the oldest value in any tier (raw, minute or quarter rollup) of the
    series drawn: those of the `panels` keys (every panel when None) and `metrics`;
    None with no data yet. Where a young server's window starts (`window`): the drawn series,
    not everything, so GPU memory read while the server loads does not leave the charts'
    first minute blank."""
    drawn = [p for p in list(PANELS) + gpu_panels(gpus) if panels is None or p.key in panels]
    keys = sorted({m for p in drawn for m, _ in p.series + p.fallback} | set(metrics))
    return repo.first_ts(engine, server_id=server_id, metrics=keys)


def window_caption(window_s: float, since: float, until: float, server: str) -> str:
    """"Window: last 1 h" or, when `window` clamped it to a young server's data, "showing the
    3 minutes since demo started; window 1 h"."""
    chosen = fmt_window(window_s)
    if until - since >= window_s:
        return f"Window: last {chosen}"
    return f"Showing the {_span_words(until - since)} since {server} started; window {chosen}"


def _span_words(span_s: float) -> str:
    """120 -> "2 minutes", 7200 -> "2 hours" (rounded to the unit)."""
    for unit_s, word in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if span_s >= unit_s:
            n = round(span_s / unit_s)
            return f"{n} {word}{'s' if n != 1 else ''}"
    return f"{round(span_s)} seconds"


def read_series(
    engine: Engine,
    *,
    server_id: int,
    panels: list[Panel],
    since: float,
    until: float,
    max_points: int = MAX_POINTS,
) -> dict[str, pd.DataFrame]:
    """{panel key: DataFrame(ts, label, value, min, max)} with one SQL query for every panel.

    Fallback series are read only for panels whose primary series have no data in the window.
    """
    wanted = sorted({m for p in panels for m, _ in p.series})
    df = repo.bucketed_series(engine, server_id=server_id, metrics=wanted, since=since, until=until,
                              max_points=max_points)
    present = set(df["metric"].unique()) if not df.empty else set()
    fallback = sorted({m for p in panels if not present & {m for m, _ in p.series} for m, _ in p.fallback})
    if fallback:
        fb = repo.bucketed_series(
            engine, server_id=server_id, metrics=fallback, since=since, until=until, max_points=max_points
        )
        if not fb.empty:
            df = pd.concat([df, fb], ignore_index=True) if not df.empty else fb
            present |= set(fb["metric"].unique())
    out: dict[str, pd.DataFrame] = {}
    for p in panels:
        pairs = p.series if present & {m for m, _ in p.series} else p.fallback
        labels = dict(pairs)
        part = df[df["metric"].isin(list(labels))] if not df.empty else df
        if part.empty:
            out[p.key] = pd.DataFrame(columns=["ts", "label", "value", "min", "max"])
            continue
        out[p.key] = pd.DataFrame(
            {
                "ts": part["ts"].to_numpy(dtype=float),
                "label": part["metric"].map(labels).to_numpy(),
                "value": part["avg"].to_numpy(dtype=float),
                "min": part["min"].to_numpy(dtype=float),
                "max": part["max"].to_numpy(dtype=float),
            }
        )
    return out


def probe_latency(
    engine: Engine, *, server_id: int, since: float, until: float, max_runs: int = 20
) -> pd.DataFrame:
    """Probe TTFT p50/p99 per bucket from the sweeps that ran in the window (exact, numpy).

    Columns: ts, label ("probe TTFT p50" / "probe TTFT p99"), value (seconds). Probe requests
    are few (hundreds per sweep), so they are read per run rather than bucketed in SQL.
    """
    runs = [
        r
        for r in repo.list_probe_runs(engine, server_id=server_id, limit=max_runs)
        if (r.started_at or r.created_at) < until and (r.finished_at or time.time()) >= since
    ]
    frames = []
    for r in runs:
        assert r.id is not None
        req = repo.probe_requests(engine, run_id=r.id)
        if req.empty:
            continue
        req = req[(~req["warmup"].astype(bool)) & req["ok"].astype(bool) & req["ttft_s"].notna()]
        req = req[(req["start_ts"] >= since) & (req["start_ts"] < until)]
        if not req.empty:
            frames.append(req[["start_ts", "ttft_s"]])
    if not frames:
        return pd.DataFrame(columns=["ts", "label", "value"])
    allreq = pd.concat(frames, ignore_index=True)
    bucket = max(1.0, np.ceil((until - since) / 300))  # ~300 buckets: sweeps are short bursts
    allreq["ts"] = (allreq["start_ts"] // bucket) * bucket
    g = allreq.groupby("ts")["ttft_s"]
    p50 = g.quantile(0.5).rename("probe TTFT p50")
    p99 = g.quantile(0.99).rename("probe TTFT p99")
    wide = pd.concat([p50, p99], axis=1).reset_index()
    return wide.melt(id_vars="ts", var_name="label", value_name="value")


def events_in_window(
    engine: Engine, *, server_id: int, since: float, until: float, limit: int = 300
) -> pd.DataFrame:
    """Events to mark on the time axis (newest `limit`); columns of repo.list_events, message
    and raw redacted (present/shown.py)."""
    return shown.frame(repo.list_events(engine, server_id=server_id, since=since, until=until, limit=limit))


def list_events(
    engine: Engine,
    *,
    server_id: int | None = None,
    kinds: list[str] | None = None,
    since: float | None = None,
    limit: int = 1000,
) -> pd.DataFrame:
    """Events newest first (the Events page); columns of repo.list_events, message and raw
    redacted (present/shown.py)."""
    return shown.frame(repo.list_events(engine, server_id=server_id, kinds=kinds, since=since, limit=limit))


def server_ids(engine: Engine) -> dict[str, int]:
    """{server name: id} of every configured server."""
    return {s.name: int(s.id) for s in repo.list_servers(engine) if s.id is not None}


def has_samples(engine: Engine, *, server_id: int, since: float,
                gpus: Sequence[GpuEntry | int] | None = None) -> bool:
    """True when any charted metric of the server has a sample newer than `since` (indexed
    newest-sample lookups, a few ms; windows always end now)."""
    keys = [m for p in PANELS for m, _ in p.series + p.fallback]
    latest = repo.latest_samples(engine, server_id=server_id, metrics=keys)
    if any(ts >= since for ts, _ in latest.values()):
        return True
    # a card in MIG mode has no utilisation (nor memory) of its own: its power, or an instance's memory
    entries = [e if isinstance(e, GpuEntry) else GpuEntry(int(e)) for e in gpus or []]
    gpu = [e.key(f) for e in entries for f in ("util_ratio", "mem_used_bytes", "power_w")]
    return any(ts >= since for ts, _ in repo.latest_samples(engine, server_id=server_id, metrics=gpu).values())
