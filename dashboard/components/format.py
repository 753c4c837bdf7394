"""Formats and colours for pages: Streamlit badges here, everything else from present/format.py.

The number, time and byte formats and the colour tables live in present/format.py
(services may not import components; exports and export charts need them too) and are re-exported
here, so pages keep one import. This module adds what only Streamlit draws:
- grade_badge / GRADE_LABELS: a grade as a Streamlit badge (label, colour name).
- STATUS_BADGE: up = green, launching = orange, down = red, no data = grey.
"""

from __future__ import annotations

from present.format import (
    GRADE_COLORS,
    SERIES_COLORS,
    SEVERITY_COLORS,
    fmt_age,
    fmt_bytes,
    fmt_delta_pct,
    fmt_ts,
    fmt_value,
    fmt_window,
    units,
)

__all__ = [
    "GRADE_COLORS",
    "GRADE_LABELS",
    "SERIES_COLORS",
    "SEVERITY_COLORS",
    "STATUS_BADGE",
    "fmt_age",
    "fmt_bytes",
    "fmt_delta_pct",
    "fmt_ts",
    "fmt_value",
    "fmt_window",
    "grade_badge",
    "units",
]

GRADE_LABELS = {"pass": "pass", "warn": "warn", "fail": "fail", "none": "no grade yet"}
NO_TARGET_LABEL = "no target set"  # a dimension none of whose figures has a target: no grade will come

STATUS_BADGE = {
    "up": ("up", "green"),
    "down": ("down", "red"),
    "launching": ("launching", "orange"),
    "unknown": ("no data", "gray"),
}


def grade_badge(grade: str | None, *, no_target: bool = False) -> tuple[str, str]:
    """(label, streamlit colour) of a grade; unknown or missing grades read "no grade yet", or
    "no target set" when the dimension has no target (waiting would never grade it)."""
    key = grade if grade in GRADE_COLORS else "none"
    if key == "none" and no_target:
        return NO_TARGET_LABEL, GRADE_COLORS["none"][0]
    return GRADE_LABELS[key], GRADE_COLORS[key][0]
