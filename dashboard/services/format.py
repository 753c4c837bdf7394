"""Number, time and byte formats and the fixed colour meaning (pure: no Streamlit, no storage).

Services (scorecards, exports, export charts) and components share them, so a value reads the same
on a page and in a review document; dashboard/components/format.py re-exports them and adds the
Streamlit badges. Values arrive in base units (seconds, bytes, watts, 0-1 ratios, USD) and are
converted here for display only. Missing (None/NaN) always shows as an em dash, never 0.

Colour meaning is fixed across pages, charts and exports:
- GRADE_COLORS: pass = green, warn = amber, fail = red, no grade = grey (scorecards, cards).
- SEVERITY_COLORS: event marks on charts and the events table (info = blue, warning = amber,
  error = red, critical = dark red).
- SERIES_COLORS: chart series, in a colour-blind-safe order.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

# The names of launches ("demo launch 3") and requests ("relaunch R-17") are worded where the
# intent kinds are declared (the runner writes them too, and cannot import dashboard/).
from storage.kinds import launch_label, request_label  # noqa: F401  (re-exported)

# Streamlit badge colour names and hex values for charts; the two columns stay in step.
GRADE_COLORS: dict[str, tuple[str, str]] = {
    "pass": ("green", "#2f9e44"),
    "warn": ("orange", "#f08c00"),
    "fail": ("red", "#e03131"),
    "none": ("gray", "#868e96"),
}

SEVERITY_COLORS = {
    "info": "#1c7ed6",
    "warning": "#f08c00",
    "error": "#e03131",
    "critical": "#a61e4d",
}

# Series colours of charts (colour-blind-safe Tableau 10 order); latency percentiles always use
# the same colour for the same percentile on every chart.
SERIES_COLORS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)


#: What a "verdict" figure (a scorecard's `gpu_bound_by`) reads as, indexed by its value: the
#: order of dashboard/services/gpu_wall.py VERDICTS.
VERDICT_WORDS = ("memory bandwidth", "compute", "neither wall", "idle", "mixed")


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_value(value: float | None, unit: str) -> str:
    """Format a base-unit value for display; None and NaN show as an em dash.

    Units: s (ms below 1 s), ratio (0-1 -> %), pct (already %), count, tok_s, rps, usd,
    usd_per_mtok, bytes (binary prefixes), w, c (°C), j, img_min, usd_h (USD per hour),
    x (a multiplier, "2.30×"), bytes_s (bytes per second as TB/s or GB/s), verdict (an index
    into VERDICT_WORDS).
    """
    if _missing(value):
        return "—"
    assert value is not None
    if unit == "s":
        if abs(value) < 1:
            return f"{value * 1000:.1f} ms"
        return f"{value:.2f} s"
    if unit == "ratio":
        return f"{value * 100:.1f} %"
    if unit == "pct":
        return f"{value:.1f} %"
    if unit == "count":
        return f"{value:,.0f}"
    if unit == "tok_s":
        return f"{value:,.1f} tok/s"
    if unit in ("rps", "req_s"):
        return f"{value:,.2f} req/s"
    if unit == "img_min":
        return f"{value:,.1f} img/min"
    if unit == "usd_h":
        return f"${value:,.2f}/h"
    if unit == "x":
        return f"{value:,.2f}×"
    if unit == "usd":
        return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"
    if unit == "usd_per_mtok":
        return f"${value:,.3f} / 1M tok"
    if unit == "w":
        return f"{value:,.0f} W"
    if unit == "c":
        return f"{value:.0f} °C"
    if unit == "j":
        # energy per token is a fraction of a joule; whole joules only for large totals
        return f"{value:,.0f} J" if abs(value) >= 100 else f"{value:.3g} J"
    if unit == "bytes":
        return fmt_bytes(value)
    if unit == "bytes_s":  # decimal, as memory bandwidth is quoted (4.8 TB/s on an H200)
        return f"{value / 1e12:.2f} TB/s" if abs(value) >= 1e11 else f"{value / 1e9:,.1f} GB/s"
    if unit == "verdict":
        i = int(value)
        return VERDICT_WORDS[i] if 0 <= i < len(VERDICT_WORDS) else f"{value:g}"
    return f"{value:,.3g}"


def fmt_delta_pct(base: float | None, other: float | None) -> str:
    """Relative change base -> other as "+12.3 %"; an em dash when either is missing or base is 0."""
    if base is None or other is None or base == 0:
        return "—"
    return f"{(other - base) / abs(base) * 100:+.1f} %"


def fmt_bytes(value: float | None, *, missing: str = "—") -> str:
    """Bytes with binary prefixes ("1.5 GiB"); `missing` (an em dash unless told) for None/NaN."""
    if _missing(value):
        return missing
    assert value is not None
    size = float(value)
    for u in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or u == "TiB":
            return f"{size:.0f} {u}" if u == "B" else f"{size:.1f} {u}"
        size /= 1024
    return f"{value} B"


def fmt_ts(ts: float | None) -> str:
    """Epoch seconds -> 'YYYY-MM-DD HH:MM:SS UTC' (the dashboard shows UTC everywhere)."""
    if _missing(ts):
        return "—"
    assert ts is not None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_age(ts: float | None, now: float | None = None) -> str:
    """'12 s ago', '5 min ago', '3 h ago', '2 d ago'."""
    if _missing(ts):
        return "—"
    assert ts is not None
    age = max(0.0, (time.time() if now is None else now) - ts)
    if age < 90:
        return f"{age:.0f} s ago"
    if age < 90 * 60:
        return f"{age / 60:.0f} min ago"
    if age < 36 * 3600:
        return f"{age / 3600:.0f} h ago"
    return f"{age / 86400:.0f} d ago"


def fmt_window(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:.0f} d"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 60:.0f} min"
