"""`pitwall trace` as an operator runs it, on a real SQLite file: the command's entry in this
process for the flow, and once as a real `pitwall` process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import sqlalchemy
from pwtest import PY, REPO, subprocess_env

from cli.trace import trace_cli
from storage import repo
from storage.db import make_engine

FIX = REPO / "tests" / "fixtures" / "traces"
pytestmark = pytest.mark.timeout(180)


def _env(tmp_path: Path) -> dict[str, str]:
    return {"PITWALL_DATA_DIR": str(tmp_path / "data"), "PITWALL_DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}"}


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    for k, v in _env(tmp_path).items():
        monkeypatch.setenv(k, v)

    def go(*args: str) -> subprocess.CompletedProcess[str]:
        code = trace_cli(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return go


def test_the_pitwall_command(tmp_path: Path) -> None:
    got = subprocess.run([PY, "-m", "cli", "trace", "import", str(FIX / "burstgpt_3.csv"), "--json"], cwd=REPO,
                         env=subprocess_env(_env(tmp_path)), capture_output=True, text=True, timeout=120, check=False)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["requests"] == 4
    engine = make_engine(_env(tmp_path)["PITWALL_DATABASE_URL"])
    assert [t.name for t in repo.list_traces(engine)] == ["burstgpt_3"]


def test_import_list_show_replace_delete(tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    dry = run("import", str(FIX / "azure_2024_conv.csv"), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["stored"] is False
    assert not (tmp_path / "data" / "pitwall.db").exists() or not repo.list_traces(
        make_engine(f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}"))
    done = run("import", str(FIX / "azure_2024_conv.csv"), "--name", "tuesday")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Stored tuesday: 3 requests over 1.5 s (azure")
    assert "1 row(s) could not be read" in done.stdout and "line 5: GeneratedTokens is 'x'" in done.stdout
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}")
    trace = repo.get_trace(engine, name="tuesday")
    assert trace is not None and trace.requests == 3 and trace.bad_count == 1
    rows = repo.trace_requests(engine, trace_id=trace.id)
    assert [r["input_tokens"] for r in rows] == [1020, 374, 396] and all(r["text"] is None for r in rows)
    assert [r["input_tokens"] for r in repo.trace_requests(engine, trace_id=trace.id, start_s=0.001, end_s=1.5)] == [374]

    again = run("import", str(FIX / "mooncake_conversation.jsonl"), "--name", "tuesday")
    assert again.returncode == 1 and "A trace named 'tuesday' exists" in again.stderr
    assert run("import", str(FIX / "mooncake_conversation.jsonl"), "--name", "tuesday", "--replace").returncode == 0
    listed = json.loads(run("list", "--json").stdout)
    assert [(t["name"], t["format"], t["requests"]) for t in listed] == [("tuesday", "mooncake", 6)]
    shown = run("show", "tuesday")
    assert "prefix reuse" in shown.stdout and "not in arrival order" in shown.stdout
    with engine.connect() as conn:  # the replaced trace's rows are gone with it
        assert conn.execute(sqlalchemy.text("SELECT COUNT(*) FROM tracerequest")).scalar() == 6
    assert run("delete", "tuesday").returncode == 0
    missing = run("show", "tuesday")
    assert missing.returncode == 1 and "No trace named 'tuesday'" in missing.stderr


def test_bad_input_is_one_clear_line(tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    got = run("import", str(empty))
    assert got.returncode == 1 and got.stderr.strip() == f"pitwall trace import: {empty} is empty."
    lengths = run("import", str(FIX / "lengths.csv"))
    assert lengths.returncode == 1 and "give --rate R" in lengths.stderr and "Traceback" not in lengths.stderr
    usage = run("import", str(FIX / "lengths.csv"), "--time-unit", "hours")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr
    assert run("import", str(tmp_path / "nope.csv")).returncode == 1
    formats = run("formats")
    assert formats.returncode == 0 and "sglang-log:" in formats.stdout and "mooncake:" in formats.stdout


def test_cut_reads_a_servers_records(tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    """`trace cut`: the metrics export its latest launch writes, else the server's log, within --since."""
    import shutil
    import time

    engine = make_engine(_env(tmp_path)["PITWALL_DATABASE_URL"])
    log = tmp_path / "server.log"
    shutil.copy(REPO / "tests" / "fixtures" / "sglang-0.5.23-real-cpu-log-requests.log", log)
    server = repo.upsert_server(engine, name="prod", base_url="http://127.0.0.1:9", log_path=str(log))
    old = run("cut", "prod", "--since", "60s")  # the fixture's requests are older (2026-12-05 03:58 UTC)
    assert old.returncode == 1 and "No request arrived in the window (16 earlier ones read)" in old.stderr
    got = run("cut", "prod", "--since", f"{int(time.time() - 1796443100) + 60}s", "--name", "cut1")
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("Stored cut1: 16 requests") and "(sglang-log," in got.stdout
    export = tmp_path / "metrics"
    export.mkdir()
    shutil.copy(REPO / "tests" / "fixtures" / "sglang-request-metrics-20261205_03-real-cpu.log", export / "x.log")
    repo.create_launch(engine, server_id=server.id, profile_name="p", argv=[], env={}, status="ready",
                       server_args={"export_metrics_to_file": True, "export_metrics_to_file_dir": str(export)})
    again = run("cut", "prod", "--since", "1000d", "--name", "cut2", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["format"] == "sglang-metrics"
    assert run("cut", "prod", "--from", "log", "--since", "1000d", "--name", "cut3").returncode == 0
    assert run("cut", "nobody").returncode == 1
    assert run("cut", "prod", "--since", "soon").returncode == 2
