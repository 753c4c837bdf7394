"""The single-file HTML export: inline CSS, charts as inline SVG (vl-convert), no scripts, no
links to anything outside the file, so it opens offline and can be mailed or attached to a review.

Colours follow present/format.py (GRADE_COLORS; better = green, worse = red).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from export import verdict
from export.charts import all_charts, chart_svg
from export.rows import delta_rows, figure_rows, level_rows, provenance_rows
from export.verdict import GRADE_MARK
from present.format import GRADE_COLORS
from scorecard.compare import Comparison
from scorecard.metric_specs import DIMENSION_LABELS, DIMENSIONS
from scorecard.model import Scorecard

VERDICT_COLORS = {"better": GRADE_COLORS["pass"][1], "worse": GRADE_COLORS["fail"][1],
                  "not comparable": GRADE_COLORS["warn"][1]}

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#212529;
max-width:1200px}
h1{font-size:1.5em;margin-bottom:4px}h2{font-size:1.2em;margin-top:28px;border-bottom:1px solid
#dee2e6;padding-bottom:4px}h3{font-size:1.05em}
table{border-collapse:collapse;margin:8px 0;font-size:.9em}
td,th{border:1px solid #dee2e6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f1f3f5}
.grades{display:flex;gap:12px;flex-wrap:wrap}
.grade{border-radius:8px;padding:10px 14px;min-width:220px;flex:1;color:#fff}
.grade h3{margin:0 0 6px 0}.grade ul{margin:0;padding-left:18px;font-size:.85em}
.note{background:#fff3bf;padding:6px 10px;border-radius:4px;margin:6px 0}
.warn{background:#ffe3e3;padding:6px 10px;border-radius:4px;margin:6px 0}
.chart{margin:12px 0}.muted{color:#868e96;font-size:.85em}
.subject{color:#495057;margin:2px 0}.verdict{border-left:4px solid #495057;padding:2px 12px;
margin:10px 0}.verdict .lead{font-weight:600;font-size:1.05em}
table.prov td:first-child{white-space:nowrap}
table.prov td:last-child{font-family:ui-monospace,monospace;font-size:.85em;word-break:break-word}
details{margin:8px 0}summary{cursor:pointer;color:#495057}
"""


def _e(v: object) -> str:
    return html.escape(str(v))


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    out = [f'<table class="{cls}"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head)
           + "</tr></thead><tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _grade_color(mark: str) -> str:
    for g, m in GRADE_MARK.items():
        if m == mark:
            return GRADE_COLORS[g][1]
    return GRADE_COLORS["none"][1]


def _figure_table(rows: list[list[str]]) -> str:
    out = ['<table><thead><tr><th>metric</th><th>value</th><th>grade</th><th>target</th>'
           "<th>note</th></tr></thead><tbody>"]
    for label, value, mark, target, note in rows:
        color = _grade_color(mark) if mark != GRADE_MARK["none"] else "inherit"
        out.append(f"<tr><td>{_e(label)}</td><td><b>{_e(value)}</b></td>"
                   f'<td style="color:{color};font-weight:600">{_e(mark)}</td>'
                   f"<td>{_e(target)}</td><td>{_e(note)}</td></tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _delta_table(cmp: Comparison) -> str:
    head = "".join(f"<th>{_e(t)}</th>" for t in ["metric", *cmp.titles])
    out = [f"<table><thead><tr>{head}</tr></thead><tbody>"]
    for d, row in zip(cmp.deltas, delta_rows(cmp), strict=True):
        cells = [f"<td>{_e(row[0])}</td>", f"<td>{_e(row[1])}</td>"]
        for text, said in zip(row[2:], d.verdicts[1:], strict=True):
            color = VERDICT_COLORS.get(said, "inherit")
            cells.append(f'<td style="color:{color}">{_e(text)}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _grade_cards(card: Scorecard) -> str:
    out = ['<div class="grades">']
    for d in DIMENSIONS:
        dim = card.dimensions[d]
        color = GRADE_COLORS.get(dim.grade, GRADE_COLORS["none"])[1]
        reasons = "".join(f"<li>{_e(r)}</li>" for r in dim.reasons)
        out.append(f'<div class="grade" style="background:{color}" data-dimension="{d}">'
                   f"<h3>{_e(DIMENSION_LABELS[d])}: {_e(GRADE_MARK[dim.grade])}</h3>"
                   f"<ul>{reasons}</ul></div>")
    out.append("</div>")
    return "".join(out)


def _grade_summary(cards: Sequence[Scorecard], titles: Sequence[str]) -> str:
    head = "".join(f"<th>{_e(t)}</th>" for t in ["dimension", *titles])
    out = [f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>']
    for row in verdict.grade_rows(cards):
        cells = "".join(f'<td style="color:{_grade_color(m)};font-weight:600">{_e(m)}</td>'
                        for m in row[1:])
        out.append(f"<tr><td>{_e(row[0])}</td>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _comparison_lead(cards: Sequence[Scorecard], cmp: Comparison) -> list[str]:
    """The comparison's verdict: one sentence per candidate with its grouped per-metric
    verdicts, whether the workloads match, the grades side by side, the deltas, the config diff."""
    body = ['<h2 id="verdict">Verdict</h2>']
    for i in range(1, len(cards)):
        groups = "".join(
            f'<li><b style="color:{VERDICT_COLORS.get(key, "inherit")}">'
            f"{_e(title)}:</b> {_e(', '.join(items))}</li>"
            for key, title, items in verdict.verdict_groups(cmp, i))
        body.append(f'<div class="verdict"><p class="lead">'
                    f"{_e(verdict.lead_sentence(cmp, cards, i))}</p><ul>{groups}</ul></div>")
    sentence, lines = verdict.comparability(cmp)
    if cmp.comparable:  # the notes (why some figures carry no verdict) and the output check
        items = "".join(f"<li>{_e(line)}</li>" for line in lines)
        body.append(f"<p>{_e(sentence)}</p>" + (f"<ul>{items}</ul>" if items else ""))
    else:
        items = "".join(f"<li>{_e(line)}</li>" for line in lines)
        body.append(f'<div class="warn"><b>{_e(sentence)}</b><ul>{items}</ul></div>')
    body.append("<h2>Grades</h2>" + _grade_summary(cards, cmp.titles))
    body.append("<h2>Deltas</h2>" + _delta_table(cmp))
    body.append("<h3>Config diff</h3>")
    body.append(_table(["setting", *cmp.titles], [[r["key"], *r["values"]] for r in cmp.config_diff])
                if cmp.config_diff else "<p>No flag or env differs.</p>")
    return body


def _card_body(card: Scorecard, level: int) -> list[str]:
    h = f"h{level}"
    body = [f"<{h}>Grades</{h}>" + _grade_cards(card)]
    body += [f'<p class="note">{_e(note)}</p>' for note in card.notes]
    for d in DIMENSIONS:
        body.append(f'<{h} id="{d}">{_e(DIMENSION_LABELS[d])}</{h}>')
        body.append(_figure_table(figure_rows(card, d)))
        if d == "stability" and card.errors_by_kind:
            body.append("<p>Errors by kind: " + _e(", ".join(
                f"{k} {n}" for k, n in sorted(card.errors_by_kind.items()))) + "</p>")
    if card.levels:
        head, rows = level_rows(card)
        body.append(f"<{h}>Load levels</{h}>" + _table(head, rows))
    return body


def to_html(cards: Sequence[Scorecard], comparison: Comparison | None = None) -> str:
    """The verdict first (a comparison's, then the grades), the figures and charts, then the
    provenance folded in a <details> (verdict.py's module docstring)."""
    title = ("Pitwall comparison: " if comparison else "Pitwall scorecard: ") + " vs ".join(
        c.title for c in cards)
    body: list[str] = [f"<h1>{_e(title)}</h1>"]
    for i, card in enumerate(cards):
        role = "" if comparison is None else ("Baseline: " if i == 0 else "Candidate: ")
        body.append(f'<p class="subject">{_e(role + verdict.subject_line(card))}</p>')
    if comparison is not None:
        body += _comparison_lead(cards, comparison)
        for card in cards:
            body.append(f'<h2 class="card">{_e(card.title)}</h2>')
            body += _card_body(card, 3)
    else:
        body += _card_body(cards[0], 2)
    body.append('<h2 id="charts">Charts</h2>')
    heading = None
    for name, chart in all_charts(cards):
        idx = name.split(":", 1)[0] if ":" in name else None
        if idx is not None and idx != heading:
            heading = idx
            body.append(f"<h3>{_e(cards[int(idx)].title)}</h3>")
        body.append(f'<div class="chart" data-chart="{_e(name)}">{chart_svg(chart)}</div>')
    body.append('<h2 id="provenance">Provenance</h2><details><summary>Versions, window, '
                "workload, server args and GPU of each scorecard</summary>")
    for card in cards:
        if comparison is not None:
            body.append(f"<h3>{_e(card.title)}</h3>")
        body.append(_table(["field", "value"], provenance_rows(card), "prov"))
    body.append("</details>")
    body.append('<p class="muted">Generated by Pitwall. Self-contained: no scripts, no network.</p>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
