"""A tune run as a review document (Markdown, or single-file HTML with the charts inline as
SVG), verdict first: the verdict sentence (a winner, or a tie inside the measured goodput spread,
which has no winner: runner/tune_rank.py verdict), the ranking with each candidate's goodput
spread, status and reason, the goodput and Pareto charts (HTML), the winner's config diff against
the profile the tune started from, then what was tuned (server, candidates, workload, SLO) and
where every figure comes from (launch and probe run ids). Made on demand (the Tune page's download
buttons) and audited like the scorecard exports.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from export.charts import chart_svg, tune_goodput, tune_pareto
from export.escape import md_table, md_text
from export.html import CSS, _table
from present import tune_result
from present.format import request_label
from runner import tune_rank
from storage import repo
from storage.models import Intent
from storage.redact import redact_obj

TUNE_FORMATS = ("md", "html")
TUNE_MEDIA_TYPES = {"md": "text/markdown", "html": "text/html"}


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _rows(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    return [str(c) for c in frame.columns], [[_cell(v) for v in row] for row in frame.itertuples(index=False)]


def _facts(intent: Intent) -> list[tuple[str, str]]:
    """The header rows: server, state, candidates, workload, SLO, winner, elapsed."""
    result = intent.result or {}
    payload = intent.payload or {}
    elapsed = tune_result.elapsed_s(intent)
    return [
        ("server", str(result.get("server") or payload.get("server") or "?")),
        ("state", str(intent.state)),
        ("requested by", str(intent.requested_by)),
        ("candidates", ", ".join(payload.get("profiles") or [])),
        ("workload fingerprint", str(result.get("workload") or "?")),
        ("workload", json.dumps(redact_obj(payload.get("sweep") or {}), sort_keys=True)),
        ("SLO", json.dumps(result.get("slo") or {}, sort_keys=True)),
        ("winner", str(tune_result.winner(result) or "none")),
        ("running afterwards", str(result.get("restored_profile") or "?")),
        ("elapsed", f"{elapsed:.0f} s" if elapsed is not None else "?"),
    ]


def _sources(result: dict[str, Any]) -> list[list[str]]:
    return [[str(c["profile"]), str(c.get("launch_id") or "-"),
             ", ".join(str(r) for r in c.get("probe_run_ids") or []) or "-"]
            for c in tune_rank.public_json(result)["candidates"]]


def _title(intent: Intent) -> str:
    server = (intent.result or {}).get("server") or (intent.payload or {}).get("server") or "?"
    return f"{request_label(intent.id, 'tune', start=True)} of {server}"


def _verdict(intent: Intent) -> str:
    said = tune_result.verdict(intent.result or {})
    if said is not None:
        return said.text
    return f"Not ranked yet (the tune is {intent.state})."


def to_markdown(engine: Engine, intent: Intent) -> str:
    result = intent.result or {}
    out = [f"# {md_text(_title(intent))}", "", f"**{md_text(_verdict(intent))}**", "", "## Ranking", ""]
    out += [md_table(*_rows(tune_result.ranking_frame(result))), ""]
    diff = tune_result.winner_diff(engine, result)
    if diff is not None:
        out += ["## Winner against the profile the tune started from", ""]
        out += [md_table(*_rows(diff)) if not diff.empty else "The winner is the profile the server started from.", ""]
    out += ["## What was tuned", "", md_table(("", ""), _facts(intent)), ""]
    out += ["## Where the figures come from", "", md_table(("profile", "launch", "probe runs"), _sources(result)), ""]
    return "\n".join(out)


def to_html(engine: Engine, intent: Intent) -> str:
    result = intent.result or {}
    body = [f"<h1>{html.escape(_title(intent))}</h1>", f"<p><strong>{html.escape(_verdict(intent))}</strong></p>",
            "<h2>Ranking</h2>", _table(*_rows(tune_result.ranking_frame(result)))]
    goodput = tune_result.goodput_frame(result)
    if not goodput.empty:
        body.append(f'<div class="chart">{chart_svg(tune_goodput(goodput))}</div>')
    points = tune_result.pareto_frame(result)
    if not points.empty:
        label = "USD per image" if result.get("image") else "USD per 1M output tokens"
        body.append(f'<div class="chart">{chart_svg(tune_pareto(points, slo_ms=tune_result.slo_line_ms(result), cost_label=label))}</div>')
    else:
        body.append('<p class="muted">No candidate has both a cost and a p99 latency (is a GPU price configured?).</p>')
    diff = tune_result.winner_diff(engine, result)
    if diff is not None:
        body.append("<h2>Winner against the profile the tune started from</h2>")
        body.append(_table(*_rows(diff)) if not diff.empty
                    else '<p class="muted">The winner is the profile the server started from.</p>')
    body += ["<h2>What was tuned</h2>", _table(("", ""), _facts(intent)),
             "<h2>Where the figures come from</h2>", _table(("profile", "launch", "probe runs"), _sources(result))]
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(_title(intent))}</title>'
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>")


def tune_document(engine: Engine, intent_id: int, fmt: str, *, actor: str) -> bytes:
    """The review document of one tune run (audited as an export)."""
    if fmt not in TUNE_FORMATS:
        raise ValueError(f"Unknown tune export format {fmt!r}; use one of {', '.join(TUNE_FORMATS)}.")
    intent = repo.get_intent(engine, intent_id=intent_id)
    if intent is None or intent.kind != "tune":
        raise ValueError(f"No {request_label(intent_id, 'tune')}; pick one on the Tune page.")
    text = to_markdown(engine, intent) if fmt == "md" else to_html(engine, intent)
    repo.add_audit(engine, actor=actor, action="export", target="download",
                   detail={"format": fmt, "tune": intent_id})
    return text.encode("utf-8")


def maker(engine: Engine, intent_id: int, fmt: str, *, actor: Callable[[], str]) -> Callable[[], bytes]:
    """The document made on click (a download button's data), not on every rerun; `actor` gives
    the Audit actor when the click arrives (a sign-in can expire while the page stays open)."""
    return lambda: tune_document(engine, intent_id, fmt, actor=actor())


def tune_filename(intent_id: int, server: str, fmt: str) -> str:
    safe = server.replace("/", "_").replace(" ", "_")
    return f"pitwall-tune{intent_id}-{safe}.{fmt}"
