"""Exports of the Overview's fleet table and fleet scorecards: CSV, JSON and Markdown.

`render_fleet(fmt, what, records, meta)` renders `what` ("table": fleet rows, FleetRow.as_dict;
"scorecards": fleet_scorecards.fleet_scorecards dicts) with the export conventions of
formats.py: the window, its resolution, the generated-at time and the filters applied travel
with the data; numbers stay in base units (s, tok/s, USD, 0-1 ratios), missing is empty (CSV)
or null (JSON), never 0.

- CSV: a header row of FLEET_COLUMNS[what] (plus `window_s`, `resolution`, `generated_at` on
  every row, as the scorecard CSV carries its resolution), one row per server or group.
- JSON: `{"schema_version": 1, "kind": "pitwall.fleet.<what>", "window_s", "since", "until",
  "resolution", "generated_at", "filters", "rows": [...]}` (strict JSON: NaN/Inf are null).
- Markdown: a header with the window and filters, then one table (figures formatted for reading).

Rows hold no base URL, argv or env; every text format still passes storage/redact.py once more.
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Engine

from export.escape import csv_writer, md_table, md_text
from export.formats import ExportError, _finite
from present.format import fmt_ts, fmt_value
from scorecard.metric_specs import DIMENSIONS, FLEET_LATENCY_KEYS, FLEET_ROW_FIGURES, SPECS_BY_KEY
from storage import repo
from storage.redact import redact_text

FLEET_FORMATS = ("csv", "json", "md")
FLEET_KINDS = ("table", "scorecards")
FLEET_COLUMNS: dict[str, tuple[str, ...]] = {
    "table": ("server", "status", "host", "model", "profile", "kind", "output_tok_s", "rps",
              "ttft_p95_s", "ttft_p99_s", "cache_hit_rate", "usd_per_mtok", "success_rate",
              "images_per_min", "usd_per_image", "queue", "kv_usage", "alerts",
              *(f"grade_{d}" for d in DIMENSIONS), "grade", "unchecked"),
    "scorecards": ("group_by", "group", "fingerprint", "servers", "output_tok_s", "rps",
                   "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "e2e_p50_s", "e2e_p95_s",
                   "e2e_p99_s", "requests", "usd_per_mtok", "priced", "errors", "ooms",
                   "restarts", "slo_met", "graded", "note"),
}
META_COLUMNS = ("window_s", "resolution", "generated_at")
#: column -> unit key (storage/units.py UNITS) of the Markdown table: the scorecard's own unit of each figure
COLUMN_UNITS = {**{row: SPECS_BY_KEY[key].unit for row, key in FLEET_ROW_FIGURES.items()},
         **{k: "s" for k in FLEET_LATENCY_KEYS}, "kv_usage": "ratio", "slo_met": "ratio"}


def fleet_meta(*, window_s: float, until: float, filters: dict[str, Any] | None = None,
               resolution: str = "raw") -> dict[str, Any]:
    """What every fleet export carries besides its rows."""
    return {"window_s": float(window_s), "since": until - window_s, "until": until,
            "resolution": resolution, "generated_at": time.time(), "filters": dict(filters or {})}


def _plain(v: Any) -> Any:
    """A cell as data: NaN/None -> None, numpy scalars -> Python numbers."""
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v.item() if hasattr(v, "item") else v


def _check(fmt: str, what: str) -> None:
    if fmt not in FLEET_FORMATS:
        raise ExportError(f"Unknown fleet export format {fmt!r}; use one of {', '.join(FLEET_FORMATS)}.")
    if what not in FLEET_KINDS:
        raise ExportError(f"Unknown fleet export {what!r}; use one of {', '.join(FLEET_KINDS)}.")


def to_csv(what: str, records: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    cols = FLEET_COLUMNS[what] + META_COLUMNS
    buf = io.StringIO()
    w = csv_writer(buf)  # every cell through escape.csv_cell
    w.writerow(cols)
    for r in records:
        row = {**{k: _plain(r.get(k)) for k in FLEET_COLUMNS[what]},
               **{k: meta[k] for k in META_COLUMNS}}
        w.writerow(["" if row[k] is None else row[k] for k in cols])
    return buf.getvalue()


def to_json(what: str, records: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    doc = {"schema_version": 1, "kind": f"pitwall.fleet.{what}", **meta,
           "rows": [{k: _plain(r.get(k)) for k in FLEET_COLUMNS[what]} for r in records]}
    return json.dumps(_finite(doc), indent=2, allow_nan=False, default=float)


def to_markdown(what: str, records: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    title = "Fleet table" if what == "table" else "Fleet scorecards"
    flt = ", ".join(md_text(f"{k}: {', '.join(map(str, v)) if isinstance(v, (list, tuple)) else v}")
                    for k, v in meta["filters"].items() if v) or "none"
    head = [f"# {title}", "",
            f"Window: last {meta['window_s'] / 60:g} min ({fmt_ts(meta['since'])} → {fmt_ts(meta['until'])}), "
            f"resolution {md_text(meta['resolution'])}; generated {fmt_ts(meta['generated_at'])}; filters: {flt}.", ""]
    cols = FLEET_COLUMNS[what]
    rows = [[_display(k, _plain(r.get(k))) for k in cols] for r in records]
    return "\n".join(head) + md_table(cols, rows) + "\n"


def _display(key: str, v: Any) -> str:
    if v is None:
        return "—"
    if key in COLUMN_UNITS and isinstance(v, (int, float)):
        return fmt_value(float(v), COLUMN_UNITS[key])
    return str(v)


def render_fleet(fmt: str, what: str, records: Sequence[dict[str, Any]], meta: dict[str, Any]) -> bytes:
    """A fleet export as bytes (module docstring); ExportError on an unknown format or kind."""
    _check(fmt, what)
    text = {"csv": to_csv, "json": to_json, "md": to_markdown}[fmt](what, records, meta)
    return redact_text(text).encode()


def fleet_filename(fmt: str, what: str) -> str:
    return f"pitwall-fleet-{what}.{fmt}"


def record_fleet_export(engine: Engine, *, fmt: str, what: str, rows: int, target: str,
                        actor: str) -> None:
    """The Audit row of a fleet export (action `export`, as scorecard exports)."""
    repo.add_audit(engine, actor=actor, action="export", target=target,
                   detail={"format": fmt, "fleet": what, "rows": rows})
