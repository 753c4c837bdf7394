"""`pitwall export --fleet ...` on a seeded fleet (real SQLite file, tests/fleet_seed.py):
files parse back, filters apply, the default path and audit, one-line usage errors."""

from __future__ import annotations

import csv
import json

import pytest
from fleet_seed import seed_fleet

from cli.export import export_cli
from storage import repo


@pytest.fixture
def fleet_db(data_env):
    from storage.db import make_engine

    eng = make_engine(data_env["PITWALL_DATABASE_URL"])
    seed_fleet(eng, 20)
    yield eng
    eng.dispose()


def test_table_csv_with_a_host_filter_and_scorecards_json(fleet_db, tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert export_cli(["--fleet", "table", "--format", "csv", "--host", "h1", "--output", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["server"] for r in rows] == ["srv-00", "srv-05", "srv-10", "srv-15"]
    assert float(rows[1]["output_tok_s"]) == pytest.approx(600.0)  # canary-only: 100 x 6 from its log
    assert export_cli(["--fleet", "scorecards", "--group-by", "profile", "--format", "json",
                       "--output", str(tmp_path / "s.json")]) == 0
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["kind"] == "pitwall.fleet.scorecards" and doc["filters"]["group_by"] == "profile"
    assert [r["group"] for r in doc["rows"] if not r["note"].startswith("workload")] == [
        "p1", "p2", "p3", "p4"]
    audits = [a.detail for a in repo.list_audit(fleet_db) if a.action == "export"]
    assert [(a["fleet"], a["format"], a["rows"]) for a in audits] == [("scorecards", "json", len(doc["rows"])), ("table", "csv", 4)]
    capsys.readouterr()


def test_default_path_and_stdout(fleet_db, capsys):
    assert export_cli(["--fleet", "table", "--format", "md"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("wrote ") and line.endswith("/exports/pitwall-fleet-table.md")
    assert export_cli(["--fleet", "table", "--format", "md", "--output", "-", "--status", "down"]) == 0
    text = capsys.readouterr().out
    assert "# Fleet table" in text and "srv-09" in text and "srv-00" not in text


@pytest.mark.parametrize(("argv", "needle"), [
    (["--fleet", "servers", "--format", "csv"], "invalid choice: 'servers'"),
    (["--fleet", "table", "--format", "png"], "invalid choice: 'png'"),
    (["--fleet", "table"], "--format"),
])
def test_bad_usage_is_one_line_and_exit_2(fleet_db, capsys, argv, needle):
    assert export_cli(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
