"""The tables every export format shows, as rows of display strings (formats.py writes them as
Markdown, html.py as HTML; the Scorecards page's component reads them too).

- `provenance_rows(card)`: (label, value) pairs of the subject and provenance: server, launch,
  profile, window and its resolution, probe run, workload fingerprint and spec, client
  self-check, Pitwall and engine versions (the engine by its display name), server args, GPU and driver;
- `figure_rows(card, dimension)`: metric, value, grade mark, target, note, one row per figure
  that applies (values in display units, fmt_value);
- `level_rows(card)`: the probe run's load levels (TTFT / E2E in seconds as displayed);
- `delta_rows(cmp)`: per metric the baseline and each candidate with its relative change in %.
"""

from __future__ import annotations

import json

from collectors.engines import display_name
from export.verdict import GRADE_MARK
from export.verdict import words as verdict_words
from present.format import fmt_ts, fmt_value, launch_label
from scorecard.compare import Comparison
from scorecard.metric_specs import SPECS_BY_KEY, specs_of
from scorecard.model import ENGINE_VERSION_FIELD, Scorecard
from storage import units


def provenance_rows(card: Scorecard) -> list[tuple[str, str]]:
    """(label, value) pairs of a scorecard's subject and provenance, for every format."""
    s, p = card.subject, card.provenance
    sc = p.get("self_check") or {}
    if sc:
        check = "trusted" if sc.get("trusted") else "NOT trusted"
        if sc.get("loop_lag_p99_s") is not None:
            check += f"; loop lag p99 {fmt_value(sc['loop_lag_p99_s'], 's')}"
        if sc.get("client_cpu_pct") is not None:
            check += f"; client CPU {sc['client_cpu_pct']:.0f} %"
    else:
        check = "no probe run"
    detail = p.get("fingerprint_detail")
    args = p.get("server_args") or {}
    return [
        ("Server", f"{s.get('server')} ({s.get('server_kind')}, {s.get('base_url')})"),
        ("Launch", "—" if s.get("launch_id") is None else launch_label(s.get("server"), s.get("launch_number"))),
        ("Profile", f"{s.get('profile_name') or '—'}"
                    + (f" ({s['profile_hash'][:12]})" if s.get("profile_hash") else "")),
        ("Window", f"{fmt_ts(s.get('since'))} → {fmt_ts(s.get('until'))} ({s.get('window_label')})"),
        ("Resolution", resolution_label(card)),
        ("Probe run", "—" if s.get("run_id") is None else f"#{s['run_id']}"
                      + (f" {s['run_name']}" if s.get("run_name") else "")),
        ("Headline level", "—" if s.get("level") is None else f"{s.get('level_mode')} {s['level']:g}"),
        ("Latency source", str(s.get("latency_source"))),
        ("Workload fingerprint", p.get("fingerprint") or "—"),
        ("Workload", json.dumps(detail, sort_keys=True) if detail else "—"),
        ("Workload spec", json.dumps(p.get("workload_spec"), sort_keys=True)
                          if p.get("workload_spec") else "—"),
        ("Client self-check", check),
        ("Pitwall version", str(p.get("pitwall_version"))),
        (f"{display_name(card.engine)} version", str(p.get(ENGINE_VERSION_FIELD))),
        ("Server args", json.dumps(args, sort_keys=True) if args else
                        (" ".join(p.get("argv") or []) or "unknown")),
        ("GPU", f"{p.get('gpu_model')} × {p.get('gpu_count')} (driver {p.get('gpu_driver')})"),
        ("Generated", fmt_ts(p.get("generated_at"))),
    ]


def resolution_label(card: Scorecard) -> str:
    """The window's resolution ("raw", or the rollup tiers read where retention removed the raw
    samples), with the series read from rollups named."""
    s = card.subject
    res = str(s.get("resolution") or "raw")
    rolled = sorted(m for m, r in (s.get("series_resolution") or {}).items() if r != "raw")
    return res if not rolled else f"{res} (from rollups: {', '.join(rolled)})"


def figure_rows(card: Scorecard, dimension: str) -> list[list[str]]:
    rows = []
    for spec in specs_of(dimension):
        f = card.figures[spec.key]
        if f.status == "not_applicable":
            continue
        value = fmt_value(f.value, spec.unit) if f.status == "ok" else (
            "not configured" if f.status == "not_configured" else "—")
        target = "" if f.target is None else (
            ("≥ " if spec.better == "higher" else "≤ ") + fmt_value(f.target, spec.unit))
        note = ("⚠ " if f.flagged else "") + f.note
        rows.append([spec.label, value, GRADE_MARK[f.grade], target, note])
    return rows


def level_rows(card: Scorecard) -> tuple[list[str], list[list[str]]]:
    image = card.subject.get("server_kind") == "image"
    head = ["level", "requests", "ok", "TTFT p50", "TTFT p99", "E2E p99", "req/s",
            units.label("img_min") if image else "out tok/s", "USD/1k req" if image else "USD/1M out tok"]
    rows = []
    for lv in card.levels:
        rows.append([
            f"{lv['level']:g}", str(lv["requests"]), str(lv["ok"]),
            fmt_value(lv.get("ttft_p50_s"), "s"), fmt_value(lv.get("ttft_p99_s"), "s"),
            fmt_value(lv.get("e2e_p99_s"), "s"), fmt_value(lv.get("rps"), "rps"),
            fmt_value(lv.get("images_per_min" if image else "output_tok_s"),
                      "img_min" if image else "tok_s"),
            fmt_value(lv.get("usd_per_1k_requests" if image else "usd_per_1m_output_tok"), "usd"),
        ])
    return head, rows


def delta_rows(cmp: Comparison) -> list[list[str]]:
    rows = []
    for d in cmp.deltas:
        spec = SPECS_BY_KEY[d.key]
        cells = [spec.label, fmt_value(d.values[0], spec.unit)]
        for v, rel, said in zip(d.values[1:], d.rel[1:], d.verdicts[1:], strict=True):
            pct = "" if rel is None else f" ({rel * 100:+.1f} %)"
            cells.append(f"{fmt_value(v, spec.unit)}{pct} {verdict_words(said)}")
        rows.append(cells)
    return rows
