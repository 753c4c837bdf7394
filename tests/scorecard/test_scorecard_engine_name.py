"""Figure notes name the server's engine (display_name), not a fixed one."""

from __future__ import annotations

import pytest
import toy_engine

from collectors.engines import ENGINES
from scorecard.compute import ScorecardInputs, compute_scorecard
from scorecard.slo import resolve


@pytest.mark.parametrize(("engine", "shown"), [("toy", "Toy"), ("sglang", "SGLang")])
def test_the_energy_note_names_the_engine_whose_log_lines_bound_it(monkeypatch, engine: str, shown: str) -> None:
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)
    # 600 J over the 20 s the engine logged decode lines; no /metrics
    inp = ScorecardInputs(subject={"server": "s", "since": 0.0, "until": 60.0}, provenance={},
                          engine=engine, energy_j=600.0, busy_s=20.0)
    fig = compute_scorecard(inp, resolve(None, {})).figures["energy_j_per_output_tok"]
    assert fig.note == f"NVML energy counter deltas while {shown} logged decode lines (idle time excluded)"
