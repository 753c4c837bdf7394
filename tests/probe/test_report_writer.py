"""The probe's report writer keeps its bytes: tests/fixtures/probe_report_writer.json holds what
the writer wrote for real sweeps against the simulator (tests/probe/report_capture.py says how it
was made). Each recorded level input, fed to today's `level_report`, writes the same JSON byte for
byte; a fresh sweep of each case stores and returns reports with the same keys in the same order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from report_capture import FIXTURE, capture, level_result

from collectors.probe.report import level_report

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
RECORDED: dict[str, Any] = json.loads(FIXTURE.read_text())


def _levels() -> list[tuple[str, dict[str, Any]]]:
    return [(f"{name}-{i}", lv) for name, case in RECORDED.items() for i, lv in enumerate(case["levels"])]


@pytest.mark.parametrize(("name", "recorded"), _levels(), ids=[n for n, _ in _levels()])
def test_each_recorded_level_writes_the_same_bytes(name: str, recorded: dict[str, Any]) -> None:
    d = recorded["input"]
    lv = level_report(level_result(d["result"]), d["api"],
                      **{k: v for k, v in d.items() if k not in ("result", "api")})
    got = json.dumps(json.loads(json.dumps(lv.to_dict(), default=str)))
    assert got == recorded["json"], name


def test_fresh_sweeps_store_and_return_the_recorded_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = capture(tmp_path, monkeypatch)
    assert set(got) == set(RECORDED)
    for name, case in got.items():
        want = RECORDED[name]
        assert len(case["levels"]) == len(want["levels"]), name
        for new, old in zip(case["levels"], want["levels"], strict=True):
            assert _keys(json.loads(new["json"])) == _keys(json.loads(old["json"])), name
        assert case["stored"] == want["stored"], name
        assert case["returned"] == want["returned"], name


def _keys(value: Any) -> Any:
    from report_capture import skeleton

    return skeleton(value)
