"""The Overview's fleet parts: filters, the sortable fleet table, fleet scorecards and their
download buttons. Data comes from dashboard/services/views/fleet*.py (the page caches it); this
module only lays it out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy.engine import Engine

from dashboard.components.format import units
from dashboard.services.views.fleet import (
    FLEET_WINDOW_S,
    FleetFilter,
    FleetRow,
    filter_options,
    server_link,
)
from export import fleet as fleet_export
from scorecard.metric_specs import DIMENSIONS

#: cards when the filters leave at most this many servers (view "auto"), the table above it
CARDS_MAX = 6
VIEWS = ("auto", "table", "cards")
#: cell text and colour of grades and statuses (plain words: Debian's Chromium has no emoji font)
GRADE_TEXT = {"pass": "pass", "warn": "warn", "fail": "FAIL", "none": "—"}
STATUS_TEXT = {"up": "up", "down": "DOWN", "launching": "launching", "unknown": "no data"}
CELL_COLORS = {"pass": "#d3f4dc", "up": "#d3f4dc", "warn": "#fdebc8", "launching": "#fdebc8",
               "FAIL": "#fbd5d5", "DOWN": "#fbd5d5"}
MISSING = "—"  # a figure the window does not have (no probe run, no price): not "None", not 0

#: table columns in order, with their width in pixels (fixed, so nothing is cut and a header sits
#: where the browser test clicks it)
TABLE_COLUMNS = {"server": 84, "open": 52, "status": 76, "host": 60, "model": 120, "profile": 64,
                 "grade": 64, "output_tok_s": 84, "rps": 64, "ttft_p95_s": 98, "queue": 62,
                 "kv_usage": 58, "cache_hit_rate": 92, "usd_per_mtok": 92, "success_rate": 84,
                 "alerts": 58, **{f"grade_{d}": 88 for d in DIMENSIONS}}
ROW_NUMBERS = ("alerts", "output_tok_s", "rps", "ttft_p95_s", "queue", "kv_usage", "cache_hit_rate",
               "usd_per_mtok", "success_rate", "images_per_min", "usd_per_image")
IMAGE_COLUMNS = {"images_per_min": 92, "usd_per_image": 92}
UNCHECKED_COLUMN = {"unchecked": 160}  # shown when a row has SLO targets the fleet view skips
MEDIA = {"csv": "text/csv", "json": "application/json", "md": "text/markdown"}


def filters(rows: Sequence[FleetRow], *, key: str = "fleet") -> FleetFilter:
    """Multiselects for host, model, profile and status, and a name search."""
    opts = filter_options(rows)
    a, b, c, d, e = st.columns([1, 1.4, 1, 1, 1.2])
    return FleetFilter(
        hosts=a.multiselect("Host", opts["hosts"], key=f"{key}-host", placeholder="all hosts"),
        models=b.multiselect("Model", opts["models"], key=f"{key}-model", placeholder="all models"),
        profiles=c.multiselect("Profile", opts["profiles"], key=f"{key}-profile", placeholder="all profiles"),
        statuses=d.multiselect("Status", opts["statuses"], key=f"{key}-status", placeholder="any status"),
        search=e.text_input("Server name", key=f"{key}-search", placeholder="search…"),
    )


def pick_view(n: int, *, key: str = "fleet-view") -> str:
    """"table" or "cards": the operator's choice, or by count ("auto")."""
    choice = st.segmented_control("View", VIEWS, default="auto", key=key,
                                  help=f"auto: cards for up to {CARDS_MAX} servers, the table above")
    if choice in ("table", "cards"):
        return str(choice)
    return "cards" if n <= CARDS_MAX else "table"


def table_frame(rows: Sequence[FleetRow]) -> pd.DataFrame:
    """The table as shown: status and grade words, percentages, the link; numbers stay numbers
    (None -> NaN, so a column sorts as numbers)."""
    data = []
    for r in rows:
        d = r.as_dict()
        d["status"] = STATUS_TEXT.get(r.status, r.status)
        for dim in DIMENSIONS:
            d[f"grade_{dim}"] = GRADE_TEXT.get(d[f"grade_{dim}"], "—")
        d["grade"] = GRADE_TEXT.get(r.grade, "—")
        d["open"] = server_link(r.name)
        # ratios as percentages so the column can format them; None stays missing
        for k in ("success_rate", "kv_usage", "cache_hit_rate"):
            d[k] = None if d[k] is None else d[k] * units.UNITS["ratio"].mult
        data.append(d)
    frame = pd.DataFrame(data)
    for k in ROW_NUMBERS:  # None -> NaN: a number column, sorted as numbers
        if k in frame.columns:
            frame[k] = pd.to_numeric(frame[k], errors="coerce")
    return frame


def table(rows: Sequence[FleetRow], *, key: str = "fleet-table") -> None:
    """The fleet table: one row per server; click a header to sort (numbers sort as numbers)."""
    frame = table_frame(rows)
    image = any(r.kind == "image" for r in rows)
    widths = {**TABLE_COLUMNS, **(IMAGE_COLUMNS if image else {}),
              **(UNCHECKED_COLUMN if any(r.unchecked for r in rows) else {})}
    num = st.column_config.NumberColumn
    config: dict[str, Any] = {
        "open": st.column_config.LinkColumn("", display_text="open", width="small",
                                            help="the server's live page"),
        "server": st.column_config.TextColumn("Server", pinned=True),
        "status": st.column_config.TextColumn("Status", width="small"),
        "host": st.column_config.TextColumn("Host", width="small", help="the runner host that owns it"),
        "model": st.column_config.TextColumn("Model"),
        "profile": st.column_config.TextColumn("Profile", width="small"),
        "grade": st.column_config.TextColumn("SLO", width="small", help="worst grade of the four dimensions"),
        **{f"grade_{d}": st.column_config.TextColumn(d.capitalize(), width="small") for d in DIMENSIONS},
        "alerts": num("Alerts", format="%d", width="small", help="firing alerts (silenced included)"),
        "output_tok_s": num("Out tok/s", format="%.0f", help="output tokens/s (scorecard: probe run, else server)"),
        "rps": num("Req/s", format="%.2f"),
        "ttft_p95_s": num("TTFT p95 (s)", format="%.3f", help="probe run in the window, else canary"),
        "queue": num("Queue", format="%d", width="small", help="newest queued requests"),
        "kv_usage": num("KV %", format="%.0f%%", width="small", help="newest KV cache usage"),
        "cache_hit_rate": num("Cache hit %", format="%.0f%%", width="small", help="radix cache hit rate"),
        "usd_per_mtok": num("USD/1M tok", format="$%.2f", help="GPU-hour price × GPUs ÷ output tok/s"),
        "success_rate": num("Success %", format="%.1f%%", width="small"),
        "images_per_min": num("Images/min", format="%.1f"),
        "usd_per_image": num("USD/image", format="$%.4f"),
        "unchecked": st.column_config.TextColumn(
            "Not checked here", help="SLO targets on figures the fleet view does not read (power, "
            "energy, GPU memory, GPU walls): the grades leave them out; the server's page checks them"),
    }
    for col, w in widths.items():
        config[col]["width"] = w
    shown = frame[list(widths)] if len(frame) else frame
    styled = shown.style.map(lambda v: f"background-color: {CELL_COLORS[v]}" if v in CELL_COLORS else "",
                             subset=["status", "grade", *(f"grade_{d}" for d in DIMENSIONS)])
    st.dataframe(styled, column_config=config, hide_index=True, placeholder=MISSING,
                 width="stretch", height=min(35 * (len(frame) + 1) + 3, 36 * 21), key=key)
    st.caption(f"{len(rows)} servers · figures over the last {FLEET_WINDOW_S // 60} min, each "
               "server's scorecard; grades against its SLO targets (except those listed under "
               "\"Not checked here\"). Click a header to sort.")


SCORECARD_CONFIG: dict[str, Any] = {  # column order: the fleet's money and health first
    "group": st.column_config.TextColumn("Group", pinned=True),
    "fingerprint": st.column_config.TextColumn("Workload", help="probe workload fingerprint"),
    "servers": st.column_config.NumberColumn("Servers", format="%d"),
    "output_tok_s": st.column_config.NumberColumn("Σ out tok/s", format="%.0f"),
    "rps": st.column_config.NumberColumn("Σ req/s", format="%.2f"),
    "usd_per_mtok": st.column_config.NumberColumn("USD/1M tok", format="$%.2f"),
    "slo_met": st.column_config.NumberColumn("SLO met", format="percent"),
    "errors": st.column_config.NumberColumn("Errors", format="%d"),
    "ooms": st.column_config.NumberColumn("OOMs", format="%d"),
    "restarts": st.column_config.NumberColumn("Restarts", format="%d"),
    **{f"{n}_p{p}_s": st.column_config.NumberColumn(f"{n.upper()} p{p} (s)", format="%.3f")
       for n in ("ttft", "e2e") for p in (50, 95, 99)},
    "requests": st.column_config.NumberColumn("Pooled req", format="%d"),
    "note": st.column_config.TextColumn("Note"),
}
SCORECARD_CAPTION = (
    "Per group: **Σ out tok/s, Σ req/s** add each server's scorecard figure. **Latency** "
    "percentiles are exact over the POOLED probe requests (measured, successful, at each server's "
    "headline level, the one its own latency is from) of "
    "the group's probe runs in the window — only across runs of the same workload fingerprint; "
    "a group that ran several workloads shows one row per workload. **USD/1M tok** = Σ(GPU-hour "
    "price × GPUs) ÷ Σ output tok/s over the priced servers. **Errors, OOMs, restarts** are "
    "summed (restarts include crashes). **SLO met** is the share of graded servers whose graded "
    "dimensions all pass (warn does not meet; a dimension with no target is not counted)."
)


def scorecards(cards: Sequence[dict[str, Any]], *, key: str = "fleet-sc") -> None:
    frame = pd.DataFrame(list(cards))
    for c in frame.columns:
        if c not in ("group_by", "group", "fingerprint", "note"):
            frame[c] = pd.to_numeric(frame[c], errors="coerce")  # None -> NaN: sorts as a number
    if "fingerprint" in frame.columns:
        frame["fingerprint"] = frame["fingerprint"].fillna(MISSING)
    cols = [c for c in SCORECARD_CONFIG if c in frame.columns]
    st.dataframe(frame[cols] if len(frame) else frame, column_config=SCORECARD_CONFIG,
                 hide_index=True, placeholder=MISSING, width="stretch", key=key)
    st.caption(SCORECARD_CAPTION)


def downloads(engine: Engine, what: str, records: Callable[[], list[dict[str, Any]]],
              meta: dict[str, Any], *, actor: Callable[[], str], key: str) -> None:
    """CSV / JSON / Markdown buttons; the file is made (and audited under `actor()`, asked when
    the click arrives: auth.export_actor) on click."""
    cols = st.columns(len(fleet_export.FLEET_FORMATS))
    for col, fmt in zip(cols, fleet_export.FLEET_FORMATS, strict=True):
        col.download_button(fmt.upper(), data=_maker(engine, fmt, what, records, meta, actor),
                            file_name=fleet_export.fleet_filename(fmt, what), mime=MEDIA[fmt],
                            key=f"{key}-{fmt}", on_click="ignore", width="stretch")


def _maker(engine: Engine, fmt: str, what: str, records: Callable[[], list[dict[str, Any]]],
           meta: dict[str, Any], actor: Callable[[], str]) -> Callable[[], bytes]:
    def make() -> bytes:
        who = actor()  # first: an expired sign-in behind a viewer gate gets no file
        recs = records()
        data = fleet_export.render_fleet(fmt, what, recs, meta)
        fleet_export.record_fleet_export(engine, fmt=fmt, what=what, rows=len(recs),
                                         target="download", actor=who)
        return data

    return make

