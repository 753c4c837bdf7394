"""`pitwall parse-log` / `parse-metrics` go through the engine: `--engine NAME` picks it (the
default engine without it), the engine's own entry takes the rest of the command line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import toy_engine

from cli.main import main
from collectors.engines import ENGINES

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_without_engine_the_default_engine_parses_as_before(capsys) -> None:
    assert main(["parse-log", str(FIX / "sglang-0.5.9.log"), "--jsonl"]) == 0
    assert '"kind"' in capsys.readouterr().out.splitlines()[0]


def test_engine_option_picks_that_engines_entry(monkeypatch, capsys, tmp_path) -> None:
    seen: list[list[str]] = []

    def parse_log(argv: list[str]) -> int:
        seen.append(argv)
        return 0

    monkeypatch.setitem(ENGINES, "toy", dataclasses.replace(toy_engine.ENGINE, commands={"parse-log": parse_log}))
    log = tmp_path / "toy.log"
    log.write_text("toy: served=3\n")
    assert main(["parse-log", "--engine", "toy", str(log), "--jsonl"]) == 0
    assert main(["parse-log", str(log), "--engine=toy"]) == 0
    assert seen == [[str(log), "--jsonl"], [str(log)]]
    # an engine without the command, and one not registered: one sentence, the usage exit code
    assert main(["parse-metrics", "--engine", "toy", str(log)]) == 2
    assert main(["parse-log", "--engine", "nosuch", str(log)]) == 2
    err = capsys.readouterr().err
    assert "Toy engine has no `pitwall parse-metrics`" in err and "Unknown engine 'nosuch'" in err
    assert "Traceback" not in err
