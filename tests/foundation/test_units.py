"""Meta-tests of the one units table (storage/units.py UNITS):
- every unit a scorecard figure, a chart or a `fmt_value` call names is in the table;
- no module but storage/units.py keeps a table of its own (a dict literal keyed by unit keys);
- the table's text formats and chart axes read as the pages have always shown them.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from storage import units
from storage.units import UNITS

REPO = Path(__file__).resolve().parents[2]
CODE_DIRS = ("dashboard", "collectors", "runner", "storage", "simulator", "bench")
#: unit keys that name nothing else in the code: a dict literal keyed by two of them is a units table
DISTINCT_KEYS = {"ratio", "pct", "tok_s", "img_min", "usd_h", "usd_per_mtok", "bytes_s", "s_step", "sec",
                 "verdict"}


def _files() -> list[Path]:
    out = [p for d in CODE_DIRS for p in sorted((REPO / d).rglob("*.py"))]
    return [p for p in out if ".venv" not in p.parts] + [REPO / "app.py"]


def _literal_units() -> list[tuple[str, str]]:
    """(where, unit) of every literal unit in dashboard/: a `unit="..."` keyword (pandas' own
    `to_datetime(unit=)` left out) and the unit argument of fmt_value(value, "unit") and of the
    Benchmarks page's _chart(col, df, "unit", ...)."""
    found = []
    for path in sorted((REPO / "dashboard").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name == "to_datetime":
                continue
            for kw in node.keywords:
                if kw.arg == "unit" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    found.append((f"{rel}:{node.lineno}", kw.value.value))
            pos = {"fmt_value": 1, "_chart": 2}.get(name)
            if pos is not None and len(node.args) > pos:
                arg = node.args[pos]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append((f"{rel}:{node.lineno}", arg.value))
                if isinstance(arg, ast.IfExp):  # fmt_value(v, "img_min" if image else "tok_s")
                    for side in (arg.body, arg.orelse):
                        if isinstance(side, ast.Constant) and isinstance(side.value, str):
                            found.append((f"{rel}:{node.lineno}", side.value))
    return found


def test_every_scorecard_unit_is_in_the_table() -> None:
    from scorecard.metric_specs import METRIC_SPECS

    missing = sorted({f"{s.key}: {s.unit}" for s in METRIC_SPECS if units.unit(s.unit) is None})
    assert not missing, f"METRIC_SPECS names units storage/units.py UNITS lacks: {missing}"


def test_every_chart_panel_unit_is_in_the_table() -> None:
    from dashboard.services.views.image_panels import IMAGE_PANELS
    from dashboard.services.views.timeseries import GPU_PANELS, PANELS

    used = ({p.unit for p in PANELS} | {row[2] for row in GPU_PANELS}
            | {unit for _, unit in IMAGE_PANELS.values()})
    missing = sorted(u for u in used if units.unit(u) is None)
    assert not missing, f"chart panels name units storage/units.py UNITS lacks: {missing}"


def test_every_literal_unit_in_the_dashboard_is_in_the_table() -> None:
    found = _literal_units()
    assert len(found) > 10, "the scan found almost no unit literals: has the call shape changed?"
    missing = [f"{where} {u!r}" for where, u in found if u and units.unit(u) is None]
    assert not missing, f"units not in storage/units.py UNITS: {missing}"


def test_no_second_units_table() -> None:
    """A dict literal keyed by two or more unit keys outside storage/units.py is a second table
    (the charts' and the scorecards' DISPLAY tables were two, and they disagreed)."""
    tables = []
    for path in _files():
        rel = path.relative_to(REPO).as_posix()
        if rel == "storage/units.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                hit = keys & DISTINCT_KEYS
                if len(hit) >= 2:
                    tables.append(f"{rel}:{node.lineno} {sorted(hit)}")
    assert not tables, f"unit tables outside storage/units.py (read UNITS instead): {tables}"


def test_every_unit_reads_its_base_value() -> None:
    """Every unit formats a value, has words or steps, and ends with a catch-all step."""
    for key, u in UNITS.items():
        assert u.meaning and u.label, key
        assert u.text and u.text[-1].below is None, f"{key}: the last step must take any value"
        assert units.format_number(1.0, key), key
        assert not math.isnan(u.mult), key


@pytest.mark.parametrize(("value", "unit", "shown"), [
    (0.0123, "s", "12.3 ms"),  # under 1 s: ms
    (2.5, "s", "2.50 s"),
    (0.25, "ratio", "25.0 %"),
    (12.0, "img_min", "12.0 images/min"),
    (0.004, "usd", "$0.0040"),
    (12.5, "usd", "$12.50"),
    (0.0123, "j", "0.0123 J"),
    (1500.0, "j", "1,500 J"),
    (1536.0, "bytes", "1.5 KiB"),
    (1.5 * 2**30, "bytes", "1.5 GiB"),
    (4.8e12, "bytes_s", "4.80 TB/s"),
    (5e10, "bytes_s", "50.0 GB/s"),
    (3.0, "req_s", "3.00 req/s"),  # an alias of rps
    (1.0, "verdict", "compute"),
    (9.0, "verdict", "9"),  # not a verdict index: the number
    (12345.0, "no_such_unit", "1.23e+04"),
])
def test_format_number(value: float, unit: str, shown: str) -> None:
    assert units.format_number(value, unit) == shown


def test_chart_axes() -> None:
    assert units.axis("s") == (1000.0, "ms", ",.1~f")
    assert units.axis("bytes") == (1.0 / 2**30, "GiB", ",.1f")
    assert units.axis("img_min") == (1.0, "images/min", ",.1f")
    assert units.axis("no_such_unit") == (1.0, "", ",.3g")
    assert units.label("s") == "ms / s" and units.label("no_such_unit") == "no_such_unit"
    assert units.is_category("verdict") and not units.is_category("s")
