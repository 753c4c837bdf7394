"""`pitwall parse-log FILE --jsonl` contract (collectors/sglang/log_cli.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.sglang.log_cli import main_parse_log, parse_log_cli, record_json
from collectors.sglang.log_stream import parse_stream

FIX = Path(__file__).resolve().parents[2] / "fixtures"
LOGS = sorted(p.name for p in FIX.glob("sglang-*.log"))


def run(path: Path | str, jsonl: bool = True) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main_parse_log(str(path), jsonl, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", LOGS)
def test_jsonl_is_the_records_in_file_order(name: str) -> None:
    rc, out, _ = run(FIX / name)
    with open(FIX / name, "rb") as f:
        expected = [rec.to_json_dict() for rec in parse_stream(f)]
    got = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and got == expected  # the hand-made fast JSON equals the json module's
    assert [g["line_no"] for g in got] == sorted(g["line_no"] for g in got)
    for g in got:
        assert set(g) >= {"line_no", "kind", "timestamp", "ranks", "fields"}
        assert ("message" in g) == (g["kind"] not in ("prefill", "decode"))


def test_record_json_values() -> None:
    with open(FIX / "sglang-0.5.9.log", "rb") as f:
        rec = next(iter(parse_stream(f)))
    d = json.loads(record_json(rec))
    assert d["fields"]["cuda_graph"] is False and d["fields"]["input_throughput"] == 1234.56
    assert d["ranks"] == {"pp": 1, "tp": 0} and d["timestamp"] == "2026-02-23 14:05:21.123"


def test_unreadable_lines_are_summarised_not_fatal(tmp_path: Path) -> None:
    p = tmp_path / "bad.log"
    p.write_bytes(b"[2026-04-08 14:05:21] \xff Decode batch, #running-req: 1, #queue-req: 0\n"
                  b"[2026-04-08 14:05:21] Decode batch, #runn\n"
                  b"\x00\x01 binary noise\n")
    rc, out, err = run(p)
    assert rc == 0 and len(out.splitlines()) == 1
    assert err.count("\n") == 1 and "2 lines could not be read" in err


def test_missing_file_is_one_readable_line(tmp_path: Path) -> None:
    rc, out, err = run(tmp_path / "nope.log")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "cannot open" in err


def test_summary_mode_counts_kinds() -> None:
    rc, out, _ = run(FIX / "sglang-0.5.23.log", jsonl=False)
    counts = dict(line.split() for line in out.splitlines())
    assert rc == 0 and counts == {"decode": "2", "decode_retract": "1", "prefill": "2",
                                  "server_ready": "1"}


def test_cli_in_a_real_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "collectors.sglang.log_cli", str(FIX / "sglang-0.4.3.log"),
         "--jsonl"], capture_output=True, text=True, timeout=60,
        cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 0
    kinds = [json.loads(line)["kind"] for line in proc.stdout.splitlines()]
    assert kinds == ["prefill", "decode", "decode_retract"]
    assert parse_log_cli([str(FIX / "sglang-0.4.3.log")]) == 0
