"""Number formats and status colours used on every page (one place, so units stay consistent)."""

from __future__ import annotations

import math

STATUS_BADGE = {
    "up": ("up", "green"),
    "down": ("down", "red"),
    "launching": ("launching", "orange"),
    "unknown": ("no data", "gray"),
}


def fmt_value(value: float | None, unit: str) -> str:
    """Format a base-unit value for display; None and NaN show as an em dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if unit == "s":
        if abs(value) < 1:
            return f"{value * 1000:.1f} ms"
        return f"{value:.2f} s"
    if unit == "ratio":
        return f"{value * 100:.1f} %"
    if unit == "count":
        return f"{value:,.0f}"
    if unit == "tok_s":
        return f"{value:,.1f}"
    if unit == "usd":
        return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"
    if unit == "bytes":
        size = float(value)
        for u in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(size) < 1024 or u == "TiB":
                return f"{size:.1f} {u}"
            size /= 1024
    return f"{value:,.3g}"
