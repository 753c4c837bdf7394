"""Exports: Markdown renders tables, CSV round-trips, JSON validates against its schema, PNG is a
PNG, and `pitwall export` writes files, audits them and fails in one line."""

from __future__ import annotations

import csv
import io
import json

import jsonschema
import pandas as pd
import pytest
from markdown_it import MarkdownIt
from scorecard_seed import DETAIL_A, seed_alpha, seed_canary_only

from cli.common import parse_duration
from cli.export import export_cli
from export import formats
from scorecard.build import build_scorecard
from scorecard.metric_specs import METRIC_SPECS, metric_table_markdown
from storage import repo


@pytest.fixture
def cards(engine):
    a = seed_alpha(engine, name="a")
    b = seed_alpha(engine, name="b", ttft_scale=2.0, fingerprint="fp-b",
                   detail=dict(DETAIL_A, levels=[8], max_new_tokens=256))
    return [build_scorecard(engine, run_id=a["run_id"], settings_slo={"ttft_p99_s": 0.5}),
            build_scorecard(engine, run_id=b["run_id"], settings_slo={"ttft_p99_s": 0.5})]


def _tables(md: str) -> list[list[list[str]]]:
    """Every rendered <table> as rows of cell texts (CommonMark + GFM tables)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    tables, rows, row, in_cell = [], [], [], False
    for t in tokens:
        if t.type == "table_open":
            rows = []
        elif t.type == "tr_open":
            row = []
        elif t.type in ("th_open", "td_open"):
            in_cell = True
            row.append("")
        elif t.type in ("th_close", "td_close"):
            in_cell = False
        elif t.type == "inline" and in_cell:
            row[-1] = t.content
        elif t.type == "tr_close":
            rows.append(row)
        elif t.type == "table_close":
            tables.append(rows)
    return tables


def test_markdown_renders_tables_with_provenance_and_four_dimensions(cards):
    md = formats.to_markdown(cards[:1])
    tables = _tables(md)
    grades = {r[0]: r[1] for r in tables[0][1:]}  # the verdict first
    assert grades == {"Latency": "PASS", "Throughput": "—", "Cost": "—", "Stability": "FAIL"}
    latency = {r[0]: r[1] for r in tables[1][1:]}
    assert latency["TTFT p50"] == "250.0 ms"
    prov = dict((r[0], r[1]) for r in tables[-1][1:])  # the provenance last
    for label in ("Server", "Launch", "Profile", "Window", "Workload fingerprint",
                  "Client self-check", "Pitwall version", "SGLang version", "Server args", "GPU"):
        assert label in prov, label
    assert prov["SGLang version"] == "0.5.23"
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert html.count("<table>") == len(tables) >= 7


def test_markdown_comparison_says_what_differs(cards):
    md = formats.render("md", cards).decode()
    shown = MarkdownIt("commonmark").enable("table").render(md)  # escaped text reads as written
    assert "These runs differ in load levels" in md and "levels: [4] -&gt; [8]" in shown
    assert "no headline figure is comparable" in md
    figures = next(t for t in _tables(md) if t[0][0] == "metric" and len(t[0]) == 3)  # deltas
    row = next(r for r in figures if r[0] == "TTFT p50")
    assert row[1] == "250.0 ms" and "not comparable" in row[2]


def test_csv_has_every_figure_in_base_units(cards):
    rows = list(csv.DictReader(io.StringIO(formats.to_csv(cards))))
    assert len(rows) == 2 * len(METRIC_SPECS)
    ttft = next(r for r in rows if r["key"] == "ttft_p50_s" and r["server"] == "a")
    assert float(ttft["value"]) == pytest.approx(0.25) and ttft["display"] == "250.0 ms"
    assert ttft["fingerprint"] == "fp-a"


def test_json_validates_against_its_schema(cards, engine):
    schema = formats.load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = json.loads(formats.render("json", cards))
    jsonschema.validate(doc, schema)
    assert doc["schema_version"] == 1 and doc["comparison"]["comparable"] is False
    seed_canary_only(engine)
    single = json.loads(formats.render("json", [build_scorecard(engine, server="beta",
                                                               since_s=10, now=1.7e9 + 5)]))
    jsonschema.validate(single, schema)
    # the schema bites: a figure marked not configured must not carry a value
    bad = json.loads(json.dumps(single))
    fig = next(f for f in bad["scorecards"][0]["figures"] if f["status"] == "not_configured")
    fig["value"] = 0.0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_json_round_trips_to_a_scorecard(cards):
    from scorecard.model import Scorecard

    doc = json.loads(formats.to_json(cards[:1]))
    back = Scorecard.from_dict(doc["scorecards"][0])
    assert back.value("ttft_p99_s") == cards[0].value("ttft_p99_s")
    assert formats.to_markdown([back]) == formats.to_markdown(cards[:1])


def test_png_is_a_png(cards):
    data = formats.render("png", cards[:1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_metric_table_markdown_lists_every_spec():
    md = metric_table_markdown()
    rows = _tables(md)[0]
    assert rows[0] == ["key", "metric", "dimension", "unit", "better", "formula"]
    assert [r[0] for r in rows[1:]] == [f"`{s.key}`" for s in METRIC_SPECS]


def test_parse_duration():
    assert [parse_duration(x) for x in ("90s", "15m", "1h", "2d", "30")] == [
        90, 900, 3600, 172800, 30]
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")


# ---------------------------------------------------------------------------------------------
# the CLI


@pytest.fixture
def cli_db(data_env):
    from storage.db import make_engine

    eng = make_engine(data_env["PITWALL_DATABASE_URL"])
    ids = seed_alpha(eng, name="a")
    yield eng, ids
    eng.dispose()


def test_cli_writes_each_format_and_audits(cli_db, tmp_path, capsys):
    eng, ids = cli_db
    for fmt in ("md", "csv", "json", "html"):
        out = tmp_path / f"card.{fmt}"
        code = export_cli(["--server", "a", "--run", str(ids["run_id"]), "--format", fmt,
                           "--output", str(out)])
        assert code == 0, capsys.readouterr().err
        assert out.stat().st_size > 500
    assert json.loads((tmp_path / "card.json").read_text())["scorecards"][0]["subject"][
        "run_id"] == ids["run_id"]
    audits = [a for a in repo.list_audit(eng) if a.action == "export"]
    assert len(audits) == 4 and {a.detail["format"] for a in audits} == {"md", "csv", "json",
                                                                         "html"}


def test_cli_default_path_and_since(cli_db, data_env, capsys):
    code = export_cli(["--server", "a", "--since", "1h", "--format", "md"])
    assert code == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("wrote ") and "/exports/pitwall-a" in line


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["--server", "a", "--format", "pdf"], 2, "invalid choice"),
        (["--server", "a", "--run", "1", "--launch", "1", "--format", "md"], 2, "not allowed"),
        (["--server", "a", "--since", "soon", "--format", "md"], 2, "not a duration"),
        (["--server", "zzz", "--format", "md"], 1, "not known"),
        (["--server", "a", "--run", "99", "--format", "md"], 1, "does not exist"),
        (["--server", "a", "--format", "png", "--output", "-"], 2, "png cannot go to stdout"),
    ],
)
def test_cli_errors_are_one_line(cli_db, capsys, argv, code, needle):
    assert export_cli(argv) == code
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_cli_help(capsys):
    assert export_cli(["--help"]) == 0
    assert "--format" in capsys.readouterr().out


def test_cli_unwritable_output(cli_db, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = export_cli(["--server", "a", "--format", "md", "--output", str(blocker / "x.md")])
    assert code == 1 and "Cannot write" in capsys.readouterr().err


def test_json_maps_non_finite_figures_to_null(cards):
    """A /metrics gauge can say +Inf or NaN: the JSON export stays strict JSON (null there)."""
    card = cards[0]
    keys = list(card.figures)[:3]
    for key, bad in zip(keys, (float("inf"), float("-inf"), float("nan")), strict=True):
        card.figures[key].value = bad

    def refuse(const: str) -> float:
        raise ValueError(f"non-standard JSON constant {const}")

    doc = json.loads(formats.to_json([card]), parse_constant=refuse)
    got = {f["key"]: f["value"] for f in doc["scorecards"][0]["figures"] if f["key"] in keys}
    assert got == {k: None for k in keys}


def test_side_by_side_latency_charts_share_one_scale():
    from export.charts import latency_top, latency_vs_load

    # run A tops out at 10.0 s per image, run B at 7.1 s: one scale to 10.5 s (5 % above) for both
    a = pd.DataFrame({"level": [1, 2], "image_p50_s": [5.0, 9.7], "image_p99_s": [5.1, 10.0]})
    b = pd.DataFrame({"level": [1, 2], "image_p50_s": [3.6, 7.0], "image_p99_s": [3.8, 7.1]})
    top = latency_top([a, b], "image")
    assert top == pytest.approx(10.5)
    domains = [latency_vs_load(f, stat="image", y_max=top).to_dict()["encoding"]["y"]["scale"]["domain"]
               for f in (a, b)]
    assert domains == [[0, pytest.approx(10.5)]] * 2
    assert latency_top([pd.DataFrame()], "ttft") is None


def test_subject_line_names_the_launch_by_its_number(cards):
    from export.verdict import subject_line

    # b's launch is row 2 but its server's first launch: "launch 1", as its title says
    assert cards[1].subject["launch_id"] == 2 and "launch 1" in cards[1].title
    line = subject_line(cards[1])
    assert "launch 1" in line and "launch #" not in line
