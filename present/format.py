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

# The units table (what each unit key means, its chart axis and table format) is used here and
# re-exported: components, which may not import storage, read it through here.
from storage import units

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
#: order of scorecard/gpu_wall.py VERDICTS (the words live in storage/units.py UNITS).
VERDICT_WORDS = units.UNITS["verdict"].words


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_value(value: float | None, unit: str) -> str:
    """Format a base-unit value for display; None and NaN show as an em dash.

    How each unit reads (s: ms below 1 s; ratio: 0-1 as %; bytes: binary prefixes; bytes_s:
    TB/s or GB/s; verdict: a word of VERDICT_WORDS; ...) is storage/units.py UNITS' `text`; a unit
    not in that table shows three significant digits.
    """
    if _missing(value):
        return "—"
    assert value is not None
    return units.format_number(value, unit)


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
    return units.format_number(float(value), "bytes")


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
