"""Review exports of one scorecard or a comparison: Markdown, CSV, JSON, PNG (HTML: html.py).

Every format reads top down: the verdict first (verdict.py: the grades; for a
comparison one sentence per candidate naming both sides and their load levels, then per-metric
verdicts, the grades side by side, the deltas and the config diff), then the figures (and
charts), then the provenance: Markdown's final section, HTML's folded <details>, JSON's last key
of each scorecard (the comparison before the scorecards), PNG's title block the grades.

Every format carries the provenance (rows.py provenance_rows: Pitwall and engine versions, server
args, GPU model and driver, workload fingerprint and spec, window and its resolution, client
self-check). The resolution is "raw", or the rollup tiers ("1-minute rollup", "15-minute rollup")
a window older than the raw samples kept was read from (subject.resolution and, per series,
subject.series_resolution in JSON; the `resolution` column in CSV; a header row elsewhere). JSON is
`{"schema_version": 1, "kind": "pitwall.scorecards", "scorecards": [...], "comparison": ...}`
and validates against scorecard/scorecard.schema.json (model.SCHEMA_PATH).
CSV has one row per scorecard and figure. PNG is every chart (charts.py) stacked in one image
(vl-convert, no browser). `write_export` writes a file and records an Audit row (action
`export`); `write_file` is the one way an export file is written (the fleet CLI's too): a new
0600 file in the target's folder, renamed over the target, so an existing path is replaced,
never written through (a hard link elsewhere keeps its content); a path that is a symbolic link
(or a FIFO, a folder) is refused with one sentence, so `--output` can never truncate the file a
link points to.

No secret reaches an export: scorecards arrive redacted (scorecard/build.py), the chart specs
handed to vl-convert are redacted (charts.export_spec), and `render` passes every text format
through storage/redact.py once more as a last net.
"""

from __future__ import annotations

import io
import json
import math
import numbers
import os
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt
from sqlalchemy.engine import Engine

from export import verdict
from export.charts import all_charts, chart_png
from export.escape import csv_writer, md_table, md_text
from export.html import to_html
from export.rows import (
    delta_rows,
    figure_rows,
    level_rows,
    provenance_rows,
)
from export.verdict import GRADE_MARK
from present.format import fmt_value
from scorecard.compare import Comparison, compare
from scorecard.metric_specs import (
    DIMENSION_LABELS,
    DIMENSIONS,
    METRIC_SPECS,
)
from scorecard.model import SCHEMA_PATH, SCHEMA_VERSION, Scorecard
from storage import repo
from storage.errors import RequestError
from storage.files import private_dir
from storage.redact import redact_text

FORMATS = ("md", "html", "csv", "json", "png")
MEDIA_TYPES = {
    "md": "text/markdown",
    "html": "text/html",
    "csv": "text/csv",
    "json": "application/json",
    "png": "image/png",
}
#: what each export holds, in a line (the download buttons' help)
FORMAT_HELP = {
    "md": "Markdown for a review: the verdict first, then the figures, the provenance last",
    "html": "One offline page: the verdict, the figures and charts, the provenance folded",
    "csv": "One row per scorecard and figure, in base units",
    "json": "Everything, schema-checked: the comparison first, each card's grades first",
    "png": "The charts in one image, the grades and the verdict in its title",
}
CSV_COLUMNS = ("scorecard", "server", "launch_id", "run_id", "fingerprint", "dimension", "key",
               "label", "value", "unit", "display", "status", "source", "grade", "target",
               "note", "resolution")


class ExportError(RequestError, ValueError):
    """An export that cannot be written; the message says what to do."""


# ---------------------------------------------------------------------------------------------
# Markdown


def to_markdown(cards: Sequence[Scorecard], comparison: Comparison | None = None) -> str:
    """The verdict first (a comparison's, then the grades), then the figures, then the
    provenance as the final section (module docstring of verdict.py)."""
    parts: list[str] = []
    if comparison is None:
        card = cards[0]
        parts.append(f"# Pitwall scorecard: {md_text(card.title)}\n")
        parts.append(md_text(verdict.subject_line(card)) + "\n")
        parts.extend(_md_card(card))
    else:
        parts.append("# Pitwall comparison: " + md_text(" vs ".join(comparison.titles)) + "\n")
        for i, card in enumerate(cards):
            role = "Baseline" if i == 0 else "Candidate"
            parts.append(f"- {role}: {md_text(verdict.subject_line(card))}")
        parts.extend(_md_comparison(cards, comparison))
        for card in cards:
            parts.append(f"\n# Scorecard: {md_text(card.title)}\n")
            parts.extend(_md_card(card))
    parts.append("\n# Provenance\n" if comparison is not None else "\n## Provenance\n")
    for card in cards:
        if comparison is not None:
            parts.append(f"\n## {md_text(card.title)}\n")
        parts.append(md_table(["field", "value"], provenance_rows(card)))
    return "\n".join(parts).rstrip() + "\n"


def _md_card(card: Scorecard) -> list[str]:
    parts = ["\n## Grades\n", md_table(
        ["dimension", "grade", "why"],
        [[DIMENSION_LABELS[d], GRADE_MARK[card.dimensions[d].grade],
          "; ".join(card.dimensions[d].reasons)] for d in DIMENSIONS])]
    for note in card.notes:
        parts.append(f"\n> {md_text(note)}")
    for d in DIMENSIONS:
        parts.append(f"\n## {DIMENSION_LABELS[d]}\n")
        parts.append(md_table(["metric", "value", "grade", "target", "note"],
                              figure_rows(card, d)))
        if d == "stability" and card.errors_by_kind:
            parts.append("\nErrors by kind: " + ", ".join(
                f"{md_text(k)} {md_text(n)}" for k, n in sorted(card.errors_by_kind.items())))
    if card.levels:
        head, rows = level_rows(card)
        parts.append("\n## Load levels\n")
        parts.append(md_table(head, rows))
    return parts


def _md_comparison(cards: Sequence[Scorecard], cmp: Comparison) -> list[str]:
    parts = ["\n## Verdict\n"]
    for i in range(1, len(cards)):
        parts.append(f"**{md_text(verdict.lead_sentence(cmp, cards, i))}**\n")
        for _, title, items in verdict.verdict_groups(cmp, i):
            parts.append(f"- {md_text(title)}: {md_text(', '.join(items))}")
        parts.append("")
    sentence, lines = verdict.comparability(cmp)
    parts.append(md_text(sentence) if cmp.comparable else f"**{md_text(sentence)}**\n")
    parts.extend(f"- {md_text(line)}" for line in lines)
    parts.append("\n## Grades\n")
    parts.append(md_table(["dimension", *cmp.titles], verdict.grade_rows(cards)))
    parts.append("\n## Deltas\n")
    parts.append(md_table(["metric", *cmp.titles], delta_rows(cmp)))
    parts.append("\n## Config diff\n")
    parts.append(md_table(["setting", *cmp.titles],
                          [[r["key"], *r["values"]] for r in cmp.config_diff])
                 if cmp.config_diff else "No flag or env differs.")
    return parts


# ---------------------------------------------------------------------------------------------
# CSV, JSON


def to_csv(cards: Sequence[Scorecard]) -> str:
    buf = io.StringIO()
    w = csv_writer(buf)  # every cell through escape.csv_cell: no formula from a server's text
    w.writerow(CSV_COLUMNS)
    for card in cards:  # METRIC_SPECS order: dimension by dimension, as every other format
        for spec in METRIC_SPECS:
            if (f := card.figures.get(spec.key)) is None:
                continue
            w.writerow([
                card.title, card.subject.get("server"), card.subject.get("launch_id"),
                card.subject.get("run_id"), card.provenance.get("fingerprint"), spec.dimension,
                spec.key, spec.label, "" if f.value is None else repr(float(f.value)), spec.unit,
                fmt_value(f.value, spec.unit), f.status, f.source, f.grade,
                "" if f.target is None else repr(float(f.target)), f.note,
                str(card.subject.get("resolution") or "raw"),
            ])
    return buf.getvalue()


#: a scorecard's keys in JSON in reading order: what it is, its verdict, figures, provenance last
CARD_KEY_ORDER = ("title", "subject", "dimensions", "figures", "errors_by_kind", "levels", "notes",
                  "series", "events", "provenance")


def json_document(cards: Sequence[Scorecard], comparison: Comparison | None = None
                  ) -> dict[str, Any]:
    """The JSON export: the comparison (the verdict) before the scorecards, each scorecard's
    grades before its figures and its provenance last; same keys as always, only their order."""
    def ordered(d: dict[str, Any]) -> dict[str, Any]:
        return {**{k: d[k] for k in CARD_KEY_ORDER if k in d}, **d}

    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "pitwall.scorecards",
        "generated_at": time.time(),
        "comparison": None if comparison is None else comparison.to_dict(),
        "scorecards": [ordered(c.to_dict()) for c in cards],
    }


def _finite(obj: Any) -> Any:
    """A copy of a JSON-able value with every +Inf, -Inf and NaN (a /metrics gauge can say
    `+Inf`) replaced by null: strict JSON has no such numbers. Numpy scalars become floats."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (bool, int, str)) or obj is None:
        return obj
    if isinstance(obj, numbers.Real):
        f = float(obj)
        return f if math.isfinite(f) else None
    return obj


def to_json(cards: Sequence[Scorecard], comparison: Comparison | None = None) -> str:
    """Strict JSON (no Infinity/NaN: non-finite figures are null)."""
    return json.dumps(_finite(json_document(cards, comparison)), indent=2, sort_keys=False,
                      allow_nan=False, default=float)


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


# ---------------------------------------------------------------------------------------------
# PNG (the charts are charts.py's, shared with the HTML export)


PNG_TITLE_CHARS = 110  # a title line wider than the stacked charts would be cut off


def png_title(cards: Sequence[Scorecard], comparison: Comparison | None = None
              ) -> dict[str, Any]:
    """The PNG's title block: what is scored, then the verdict in words (each card's grades;
    for a comparison, each candidate's sentence against the baseline) as subtitle lines."""
    lines = [f"{c.title}: " + ", ".join(f"{r[0]} {r[1]}" for r in verdict.grade_rows([c]))
             for c in cards]
    if comparison is not None:
        lines = [verdict.lead_sentence(comparison, cards, i) for i in range(1, len(cards))] + lines
    lines = [part for line in lines for part in textwrap.wrap(line, PNG_TITLE_CHARS)]
    return {"text": " vs ".join(c.title for c in cards), "subtitle": lines, "anchor": "start",
            "fontSize": 16, "subtitleFontSize": 12, "subtitleColor": "#495057", "offset": 12}


def to_png(cards: Sequence[Scorecard], comparison: Comparison | None = None) -> bytes:
    """Every chart of the export stacked in one PNG, under a title block with the verdict."""
    parts: list[Any] = [c for _, c in all_charts(cards)]
    stacked = alt.vconcat(*parts).properties(title=alt.TitleParams(**png_title(cards, comparison)))
    return chart_png(stacked)


# ---------------------------------------------------------------------------------------------


def render(fmt: str, cards: Sequence[Scorecard]) -> bytes:
    """The export of one scorecard (or a comparison of several) in one format, as bytes."""
    if fmt not in FORMATS:
        raise ExportError(f"Unknown export format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if not cards:
        raise ExportError("Nothing to export: no scorecard.")
    cmp = compare(list(cards)) if len(cards) > 1 else None
    if fmt == "png":
        return to_png(cards, cmp)
    if fmt == "md":
        text = to_markdown(cards, cmp)
    elif fmt == "csv":
        text = to_csv(cards)
    elif fmt == "json":
        text = to_json(cards, cmp)
    else:
        text = to_html(cards, cmp)
    return redact_text(text).encode()


def default_filename(fmt: str, cards: Sequence[Scorecard]) -> str:
    s = cards[0].subject
    bits = [str(s.get("server") or "server")]
    if s.get("run_id") is not None:
        bits.append(f"run{s['run_id']}")
    elif s.get("launch_id") is not None:
        bits.append(f"launch{s['launch_id']}")
    if len(cards) > 1:
        bits.append(f"vs{len(cards) - 1}")
    safe = "-".join(bits).replace("/", "_").replace(" ", "_")
    return f"pitwall-{safe}.{fmt}"


def record_export(engine: Engine, *, fmt: str, cards: Sequence[Scorecard], target: str,
                  actor: str) -> None:
    repo.add_audit(engine, actor=actor, action="export", target=target, detail={
        "format": fmt,
        "scorecards": [c.title for c in cards],
        "runs": [c.subject.get("run_id") for c in cards],
        "launches": [c.subject.get("launch_id") for c in cards],
    })


def write_export(engine: Engine, *, fmt: str, cards: Sequence[Scorecard], path: Path,
                 actor: str = "cli") -> Path:
    """Render, write to `path` (write_file) and audit; returns the path."""
    write_file(path, render(fmt, cards))
    record_export(engine, fmt=fmt, cards=cards, target=str(path), actor=actor)
    return path


def write_file(path: Path, data: bytes) -> Path:
    """Write an export to `path` (missing parent folders created 0700): the bytes go to a new
    0600 file beside it (O_EXCL), then replace `path` by rename (module docstring). ExportError
    with one sentence on a symbolic link, a path that is not a regular file, or an OSError."""
    if path.is_symlink():
        raise ExportError(f"{path} is a symbolic link; Pitwall does not write through links (that "
                          "would overwrite the file it points to): give --output a plain file path.")
    if path.exists() and not path.is_file():
        raise ExportError(f"{path} exists and is not a regular file; give --output a file path.")
    tmp: str | None = None
    try:
        private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        with os.fdopen(fd, "wb") as f:  # mkstemp: O_CREAT | O_EXCL, mode 0600
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # replaces the name itself: a link swapped in meanwhile, not its target
        tmp = None
    except OSError as exc:
        raise ExportError(f"Cannot write {path}: {exc.strerror or exc}; choose another --output."
                          ) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path
