"""The simulator's request records against the real SGLang 0.5.23 server's
(tests/fixtures/sglang-0.5.23-real-cpu-log-requests.log, sglang-request-metrics-*-real-cpu.log):
the same obj fields in the same order, the same out and meta_info keys, the same levels; and what
Pitwall's importer makes of both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FAST

from collectors.sglang.reqlog_repr import parse_call, split_line
from collectors.trace import importer
from collectors.trace.model import ReadOptions

FIX = Path(__file__).resolve().parents[1] / "fixtures"
REAL_LOG = FIX / "sglang-0.5.23-real-cpu-log-requests.log"
REAL_EXPORT = FIX / "sglang-request-metrics-20261205_03-real-cpu.log"


def _records(text: str, kind: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        _, k, rest = split_line(line)
        if k == kind:
            out.append(parse_call(rest))
    return out


def _real(kind: str, level_has_text: bool) -> dict:
    got = [r for r in _records(REAL_LOG.read_text(), kind) if ("text" in r["obj"]) == level_has_text]
    return got[-1]


def test_the_simulators_lines_are_the_real_servers(start_sim, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    export = tmp_path / "metrics"
    sim = start_sim(*FAST, "--log-requests", "--enable-metrics", "--export-metrics-to-file",
                    "--export-metrics-to-file-dir", str(export))
    with sim.client() as c:
        a = c.post("/generate", json={"text": "the day was long", "sampling_params": {"max_new_tokens": 5, "temperature": 0}})
        b = c.post("/generate", json={"text": "a river ran " * 900, "stream": True,
                                      "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}})
        chat = c.post("/v1/chat/completions", json={"model": "x", "messages": [{"role": "user", "content": "hi"}],
                                                     "max_tokens": 4})
    assert a.status_code == b.status_code == chat.status_code == 200
    sim.wait_for("Finish: obj=", 30)
    text = sim.log()
    sim_receive = _records(text, "receive")[0]
    real_receive = _real("receive", True)
    assert list(sim_receive["obj"]) == list(real_receive["obj"])  # every field, SGLang's order
    sim_finish = next(r for r in _records(text, "finish") if r["obj"]["stream"] is True)  # as the real ones were
    real_finish = _real("finish", False)
    assert list(sim_finish["out"]) == ["text", "output_ids", "meta_info"]
    assert list(sim_finish["out"]["meta_info"]) == list(real_finish["out"]["meta_info"])
    # level 2 cuts a prompt over 2048 characters as the real logger does
    long_line = next(line for line in text.splitlines() if "Receive: obj=" in line and "a river ran" in line)
    assert "' ... '" in long_line and len(long_line) < 8000
    line = next(line for line in text.splitlines() if "Receive: obj=" in line)
    assert line.startswith("[") and line[20:22] == "] "  # [YYYY-mm-dd HH:MM:SS], no milliseconds

    built = importer.build([sim.log_path], options=ReadOptions(max_requests=100))
    reqs = built.trace.requests
    assert [r.api for r in reqs] == ["generate", "generate", "chat"] and built.fields["bad_count"] == 0
    assert [r.output_tokens for r in reqs] == [5, 3, 4]
    assert reqs[0].input_tokens == a.json()["meta_info"]["prompt_tokens"]
    exported = importer.build([export], options=ReadOptions(max_requests=100))
    assert [(r.input_tokens, r.output_tokens) for r in exported.trace.requests] == [
        (r.input_tokens, r.output_tokens) for r in reqs]
    sim_record = next(r for r in map(json.loads, next(export.iterdir()).read_text().splitlines())
                      if json.loads(r["request_parameters"])["stream"] is True)  # streamed, as the real ones
    real_record = json.loads(REAL_EXPORT.read_text().splitlines()[1])
    assert list(sim_record) == list(real_record)
    assert list(json.loads(sim_record["request_parameters"])) == list(json.loads(real_record["request_parameters"]))


def test_level_0_leaves_out_prompts_and_sampling(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST, "--log-requests", "--log-requests-level", "0")
    with sim.client() as c:
        assert c.post("/generate", json={"text": "hello", "sampling_params": {"max_new_tokens": 2}}).status_code == 200
    sim.wait_for("Finish: obj=", 30)
    finish = _records(sim.log(), "finish")[0]
    real = _real("finish", False)
    assert list(finish["obj"]) == list(real["obj"]) and "sampling_params" not in finish["obj"]
    assert list(finish["out"]) == ["meta_info"]


def test_the_export_needs_its_folder(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST, "--export-metrics-to-file", wait_ready=False)
    assert sim.wait_exit() == 2
    assert "--export-metrics-to-file-dir is required" in sim.log()


@pytest.mark.parametrize("path", [REAL_LOG, REAL_EXPORT])
def test_the_real_servers_records_import(path: Path) -> None:
    built = importer.build([path], options=ReadOptions(max_requests=100))
    assert built.fields["bad_count"] == 0
    assert any("warm-up" in n for n in built.trace.notes)
    # the run of 4 (level 2), the run of 3 (level 0), the replay's 2 calibration requests and its 7
    assert len(built.trace.requests) == 16
