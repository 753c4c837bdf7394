"""Hostile text through every Markdown and CSV export: server, model and profile
names, event messages and error strings a server sends stay text (export/
escape.py, one function per format).

Markdown is rendered with markdown-it-py (CommonMark + tables) and the HTML it makes must hold
no raw `<script>`/`<img>`, no `javascript:` link and no remote image, while the hostile text is
still shown (escaped, not dropped). CSV is read back with the csv module: a cell a spreadsheet
would run as a formula starts with `'`; numbers, negative ones included, stay numbers.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from markdown_it import MarkdownIt
from scorecard_seed import seed_alpha

from export import escape, formats, tune_doc
from export.fleet import FLEET_COLUMNS, fleet_meta, render_fleet
from scorecard.build import build_scorecard
from storage import repo

SCRIPT = "<script>alert(1)</script>"
JS_LINK = "[click me](javascript:alert(1))"
REMOTE_IMAGE = "![pixel](http://tracker.example/p.png)"
HTML_IMAGE = '<img src="http://tracker.example/i.png">'
AUTOLINK = "<javascript:alert(1)>"
REF_LINK = "[x][r]\n\n[r]: javascript:alert(1)"
BROKEN_LINES = "a | b\r\n# heading\n![y](http://tracker.example/q.png)"
MARKDOWN_ATTACKS = (SCRIPT, JS_LINK, REMOTE_IMAGE, HTML_IMAGE, AUTOLINK, REF_LINK, BROKEN_LINES)
FORMULAS = ('=HYPERLINK("http://evil.example","x")', "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
            "@SUM(A1:A9)", "\t=1+1", "\r=1+1")


def _render(md: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(md)


def _assert_inert(md: str) -> None:
    """The rendered Markdown holds no HTML, script, javascript: link or remote image."""
    html = _render(md)
    tags = set(re.findall(r"<\s*([a-zA-Z][a-zA-Z0-9]*)", html))
    assert tags <= {"h1", "h2", "p", "table", "thead", "tbody", "tr", "th", "td", "blockquote",
                    "ul", "li", "strong", "em", "code", "br"}, tags
    assert 'href="javascript' not in html.lower() and "<a " not in html
    assert "<img" not in html and "<script" not in html
    assert "&lt;script&gt;" in html  # shown as text, not dropped


def _csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _assert_no_formula(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                assert escape._NUMBER.fullmatch(cell), f"a formula reaches the sheet: {cell!r}"


# -- the one function per format -------------------------------------------------------------


@pytest.mark.parametrize("text", MARKDOWN_ATTACKS)
def test_md_text_renders_every_attack_as_its_own_text(text):
    html = _render(f"Server: {escape.md_text(text)}\n\n{escape.md_table(['name'], [[text]])}")
    assert "<a " not in html and "<img" not in html and "<script" not in html and "<h1" not in html
    assert html.count("<td>") == 1  # a pipe or a line break did not split the cell


@pytest.mark.parametrize("text", FORMULAS)
def test_csv_cell_prefixes_formulas(text):
    assert escape.csv_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-1.5, -2, 0.0, 3, "-0.25", "1e-06", "-inf", "+4", None, "plain", "a=b"])
def test_csv_cell_leaves_numbers_and_plain_text(value):
    assert escape.csv_cell(value) == value


# -- scorecard exports (formats.py) -------------------------------------------------------------


@pytest.fixture
def hostile_card(engine):
    ids = seed_alpha(engine, name=SCRIPT)
    card = build_scorecard(engine, run_id=ids["run_id"], settings_slo={"ttft_p99_s": 0.5})
    card.subject["profile_name"] = JS_LINK  # a profile name
    card.subject["run_name"] = REMOTE_IMAGE
    card.provenance["sglang_version"] = HTML_IMAGE  # what the server said about itself
    card.provenance["gpu_model"] = AUTOLINK
    card.notes.append(BROKEN_LINES)  # an event message
    card.notes.append(REF_LINK)
    card.dimensions["stability"].reasons.append(SCRIPT)
    fig = next(iter(card.figures.values()))
    fig.note = FORMULAS[0]  # an error string
    card.errors_by_kind[AUTOLINK] = 1
    return card


def test_scorecard_markdown_is_inert(hostile_card):
    md = formats.render("md", [hostile_card]).decode()
    _assert_inert(md)
    assert "javascript:alert(1)" in _render(md)  # the name is still shown, as text


def test_scorecard_comparison_markdown_is_inert(engine, hostile_card):
    other = seed_alpha(engine, name="=cmd|' /C calc'!A0", fingerprint="fp-b")
    second = build_scorecard(engine, run_id=other["run_id"], settings_slo={"ttft_p99_s": 0.5})
    _assert_inert(formats.render("md", [hostile_card, second]).decode())


def test_scorecard_csv_has_no_formula_and_numbers_stay_numbers(hostile_card):
    rows = _csv_rows(formats.render("csv", [hostile_card]).decode())
    _assert_no_formula(rows)
    head = rows[0]
    notes = [r[head.index("note")] for r in rows[1:]]
    assert "'" + FORMULAS[0] in notes
    values = [r[head.index("value")] for r in rows[1:] if r[head.index("value")]]
    assert values and all(escape._NUMBER.fullmatch(v) for v in values)


# -- fleet exports (fleet.py) -------------------------------------------------------------------


def _fleet_records() -> list[dict[str, Any]]:
    base = dict.fromkeys(FLEET_COLUMNS["table"])
    rows = []
    for i, text in enumerate([*MARKDOWN_ATTACKS, *FORMULAS]):
        rows.append({**base, "server": text, "model": FORMULAS[i % len(FORMULAS)],
                     "profile": MARKDOWN_ATTACKS[i % len(MARKDOWN_ATTACKS)], "host": "@h1",
                     "status": "up", "output_tok_s": -1.5 * i, "rps": -2, "alerts": i})
    return rows


def _meta() -> dict[str, Any]:
    return fleet_meta(window_s=900, until=1.7e9, filters={"search": JS_LINK, "model": [REMOTE_IMAGE]})


def test_fleet_markdown_is_inert():
    md = render_fleet("md", "table", _fleet_records(), _meta()).decode()
    _assert_inert(md)


def test_fleet_csv_has_no_formula_and_negative_numbers_stay_numbers():
    rows = _csv_rows(render_fleet("csv", "table", _fleet_records(), _meta()).decode())
    _assert_no_formula(rows)
    head = rows[0]
    assert [r[head.index("server")] for r in rows[1 + len(MARKDOWN_ATTACKS):]] == ["'" + f for f in FORMULAS]
    assert [r[head.index("rps")] for r in rows[1:]] == ["-2"] * (len(rows) - 1)
    assert rows[2][head.index("output_tok_s")] == "-1.5"


def test_fleet_scorecards_csv_and_markdown(engine):
    cards = [{"group_by": "model", "group": f, "fingerprint": SCRIPT, "servers": 2, "note": JS_LINK,
              "output_tok_s": -3.0} for f in FORMULAS]
    meta = fleet_meta(window_s=900, until=1.7e9, filters={"group_by": "model"})
    _assert_no_formula(_csv_rows(render_fleet("csv", "scorecards", cards, meta).decode()))
    _assert_inert(render_fleet("md", "scorecards", cards, meta).decode())


# -- the tune review document (tune_doc.py) ------------------------------------------------------


def test_tune_document_markdown_is_inert(engine):
    from pages.test_tune_page import RESULT

    cands = [{**c, "profile": p, "reason": r} for c, p, r in zip(
        RESULT["candidates"], (SCRIPT, JS_LINK, REMOTE_IMAGE), (HTML_IMAGE, AUTOLINK, BROKEN_LINES), strict=True)]
    result = {**RESULT, "candidates": cands, "winner": SCRIPT, "server": REF_LINK}
    srv = repo.upsert_server(engine, name=SCRIPT, base_url="http://127.0.0.1:1", managed=True)
    intent = repo.create_intent(engine, kind="tune", server_id=srv.id, requested_by=JS_LINK,
                                payload={"server": SCRIPT, "profiles": [c["profile"] for c in cands]})
    repo.update_intent(engine, intent_id=intent.id, state="done", result=result)
    _assert_inert(tune_doc.tune_document(engine, int(intent.id or 0), "md", actor="t").decode())
