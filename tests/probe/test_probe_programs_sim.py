"""Structured output, multi-turn chat and forked programs: the probe against the simulator, a real
process on loopback, through `pitwall probe` (the CLI, with --json) and a real SQLite store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pwtest import stop_process
from sqlalchemy import text

from collectors.probe.cli import open_engine, probe_cli
from collectors.probe.structured import DEFAULT_SCHEMA

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
REPO = Path(__file__).resolve().parents[2]
READY = "The server is fired up and ready to roll!"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("sim") / "sim.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "simulator.launch_server", "--model-path",
             "meta-llama/Llama-3.1-8B-Instruct", "--host", "127.0.0.1", "--port", str(port),
             "--sim-speed", "20", "--sim-startup-s", "1", "--enable-cache-report"],
            stdout=fh, stderr=subprocess.STDOUT, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 60
    while READY not in log.read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def _probe(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, dict[str, Any]]:
    rc = probe_cli(["--url", url, "--no-progress", "--json", "--concurrency", "4",
                    "--requests", "24", *args])
    out = capsys.readouterr().out
    return rc, json.loads(out) if out.strip() else {}


def test_json_schema_ample_tokens_is_valid(sim: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'p.db'}"
    # the bundled schema with a long description (which constrains nothing): the simulator's compile
    # cost grows with the schema's text, as a real backend's does, to about 1 s of wall time at this
    # speed, far above what a loaded host adds to a warm TTFT (the bundled schema's ~10 ms was not)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({**DEFAULT_SCHEMA, "description": "A support ticket. " * 2200}))
    rc, rep = _probe(capsys, sim, "--structured", "json-schema", "--schema", str(schema),
                     "--max-new-tokens", "512", "--db", db)
    assert rc == 0
    st = rep["structured"]
    assert st["valid_rate"] >= 0.99 and st["finished"] == 24
    assert st["grammar_backend"] == "xgrammar"
    assert st["cold_ttft_s"] > st["warm_ttft_p50_s"]  # the first use compiled the grammar
    assert rep["levels"][0]["ok"] == 24
    with open_engine(db).connect() as conn:
        details = [json.loads(d) if isinstance(d, str) else d for (d,) in
                   conn.execute(text("SELECT detail FROM proberequest WHERE warmup = 0"))]
    assert details and all(d["structured"] == {"valid": True, "failure": None} for d in details)


def test_json_schema_short_limit_counts_truncated(sim: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, rep = _probe(capsys, sim, "--structured", "json-schema", "--max-new-tokens", "8",
                     "--api", "chat", "--no-store")
    st = rep["structured"]
    assert rc == 0 and st["valid_rate"] < 0.5
    assert st["failures"]["truncated"] == st["finished"] - st["valid"] > 0


def test_regex_through_completions_matches(sim: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, rep = _probe(capsys, sim, "--structured", "regex", "--pattern", r"[A-Z]{3}-[0-9]{4}",
                     "--api", "completions", "--no-store")
    assert rc == 0 and rep["structured"]["valid_rate"] == 1.0


def test_refused_schema_is_a_client_error(sim: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"tags": {
        "type": "array", "items": {"type": "string"}, "uniqueItems": True}}}))
    for api in ("generate", "chat"):
        rc, rep = _probe(capsys, sim, "--structured", "json-schema", "--schema", str(schema),
                         "--api", api, "--no-store")
        refused = rep["structured"]["refused"]
        assert rc == 1 and refused["error_kind"] == "http_400", (api, refused)
        assert "uniqueItems" in refused["message"] and "Failed to compile json grammar" in refused["message"]
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_schema_file_that_is_not_json_is_exit_2(sim: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert probe_cli(["--url", sim, "--structured", "json-schema", "--schema", str(bad), "--no-store"]) == 2
    assert "is not JSON" in capsys.readouterr().err


def test_multi_turn_reuse_grows_by_turn(sim: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, rep = _probe(capsys, sim, "--prompt-set", "multi-turn", "--turns", "4", "--api", "chat",
                     "--no-store", "--requests", "32", "--warmup", "0")
    turns = {t["turn"]: t for t in rep["turns"]}
    assert rc == 0 and sorted(turns) == [1, 2, 3, 4]
    assert turns[4]["cache_hit_rate"] > turns[1]["cache_hit_rate"]
    assert turns[4]["input_tokens"] > turns[1]["input_tokens"]  # the whole history is sent


def test_fork_later_branches_reuse_the_context(sim: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, rep = _probe(capsys, sim, "--prompt-set", "fork", "--branches", "4", "--no-store",
                     "--prefix-tokens", "300")
    branches = {b["branch"]: b for b in rep["branches"]}
    assert rc == 0 and sorted(branches) == [1, 2, 3, 4]
    assert all(branches[k]["cache_hit_rate"] > branches[1]["cache_hit_rate"] for k in (2, 3, 4))
    assert rep["branch_reuse"]["later"]["cache_hit_rate"] > rep["branch_reuse"]["first"]["cache_hit_rate"]


def test_fingerprint_tells_workloads_apart(sim: str, capsys: pytest.CaptureFixture[str]) -> None:
    fps = set()
    for args in (["--structured", "regex", "--pattern", "a+"], ["--structured", "regex", "--pattern", "b+"],
                 ["--prompt-set", "fork", "--branches", "2"], ["--prompt-set", "fork", "--branches", "3"]):
        rc, rep = _probe(capsys, sim, *args, "--no-store", "--requests", "4", "--max-new-tokens", "4")
        assert rc == 0
        fps.add(rep["fingerprint"])
    assert len(fps) == 4
