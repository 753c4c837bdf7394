"""The typed sweep report (collectors/probe/report_model.py): every report the tests' seeds store
and the reports of real sweeps against the stamping stub server read back into SweepReport and
write back the same dict, keys in the same order (so stored rows, exports and `pitwall probe
--json` keep their bytes); an old report with keys missing reads with the readers' defaults."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet_seed import seed_fleet
from image_seed import seed_image
from probe_stub_server import spawn
from scorecard_seed import seed_alpha, seed_canary_only, seed_levels
from tune_seed import report_level

from collectors.probe.cli import open_engine
from collectors.probe.report_model import Level, SelfCheck, Stats, SweepReport
from collectors.probe.sweep import SweepSpec, run_sweep
from collectors.probe.workloads import WorkloadSpec
from storage import repo

pytestmark = pytest.mark.timeout(120)


def _pages_seed() -> Any:
    """tests/pages/pages_seed.py (on the path of the page tests only)."""
    spec = importlib.util.spec_from_file_location("pages_seed", Path(__file__).parents[1] / "pages" / "pages_seed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.seed


def _same(d: dict[str, Any]) -> None:
    back = SweepReport.from_dict(d).to_dict()
    assert back == d
    assert json.dumps(back) == json.dumps(d)  # the same bytes: keys in the same order


def test_every_seeded_report_round_trips(engine: Any) -> None:
    seed_alpha(engine)
    seed_canary_only(engine)
    seed_levels(engine, name="lv", levels={1.0: (0.5, 0.1), 4.0: (0.2, 0.2)})
    seed_image(engine)
    _pages_seed()(engine)
    seed_fleet(engine, n=3)
    runs = repo.list_probe_runs(engine, limit=1000)
    assert len(runs) >= 5
    for run in runs:
        _same(run.report or {})
    # the tune seed's levels are real level reports (report.py level_report), spread included
    _same({"levels": [report_level(5.0), report_level(5.0, n=8)]})


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    proc, port = spawn(delay_ms=5.0, first_delay_ms=20.0)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_real_sweep_reports_round_trip(stub: str, tmp_path: Any) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'p.db'}")
    short = WorkloadSpec(max_new_tokens=4)
    base = asyncio.run(run_sweep(SweepSpec(url=stub, levels=[1, 2], requests=9, warmup=1, workload=short),
                                 engine=engine)).to_dict()
    reports = [
        base,
        # consistency against the first run, multi-turn blocks per level and per run
        asyncio.run(run_sweep(SweepSpec(url=stub, levels=[1], requests=4, warmup=0, baseline_run_id=base["run_id"],
                                        workload=WorkloadSpec(max_new_tokens=4, prompt_set="multi-turn")),
                              engine=engine)).to_dict(),
        asyncio.run(run_sweep(SweepSpec(url=stub, mode="rate", levels=[50.0], requests=9, warmup=1, workload=short))).to_dict(),
        asyncio.run(run_sweep(SweepSpec(url=stub, api="images", levels=[2], requests=4, warmup=0, workload=short))).to_dict(),
        asyncio.run(run_sweep(SweepSpec(url=stub + "/mode/status500", levels=[1], requests=3, warmup=0,
                                        workload=short))).to_dict(),
    ]
    assert "consistency" in reports[1] and "turns" in reports[1]["levels"][0]
    for report in reports:
        _same(report)
        _same(json.loads(json.dumps(report)))
    for run in repo.list_probe_runs(engine, limit=10):
        _same(run.report or {})
    typed = SweepReport.from_dict(reports[0])
    assert [lv.value for lv in typed.levels] == [1.0, 2.0] and typed.levels[1].requests == 9
    assert typed.levels[0].ttft_s.p50 == reports[0]["levels"][0]["ttft_s"]["p50"]
    rate = SweepReport.from_dict(reports[2]).levels[0]
    assert rate.is_rate and rate.value == 50.0 and rate.achieved.rate == reports[2]["levels"][0]["achieved"]["rate"]
    image = SweepReport.from_dict(reports[3]).levels[0]
    assert image.image is not None and image.throughput.images_per_min == reports[3]["levels"][0][
        "throughput"]["images_per_min"]


def test_an_old_report_reads_with_the_readers_defaults() -> None:
    # as an older Pitwall stored it: no spread, no self-check bounds, no steady window, no
    # workload blocks; a level with only its concurrency and TTFT
    old = {"fingerprint": "abc", "status": "done",
           "levels": [{"concurrency": 4, "ttft_s": {"p50": 0.1, "p99": 0.2},
                       "self_check": {"loop_lag_p99_s": 0.001, "client_cpu_pct": 12.0, "trusted": True}},
                      {"concurrency": 8}]}
    report = SweepReport.from_dict(old)
    assert report.run_id is None and report.error is None and report.trusted is None
    assert report.structured is None and report.turns is None and report.consistency is None
    lv, bare = report.levels
    assert lv.ttft_s == Stats(p50=0.1, p99=0.2) and lv.itl_s == Stats()
    assert lv.self_check == SelfCheck(loop_lag_p99_s=0.001, client_cpu_pct=12.0, trusted=True)
    assert lv.spread is None and lv.image is None and lv.steady_window_s is None
    assert (bare.requests, bare.ok, bare.errors, bare.success_rate) == (0, 0, {}, None)
    assert bare.self_check is None and bare.trusted is None and bare.throughput.rps is None
    assert bare.p99("ttft_s") is None and bare.p99("image") is None and not bare.is_rate
    assert SweepReport.of(None).levels == [] and SweepReport.of(None).to_dict() == {}
    _same(old)
    # a shape no reader expects is kept as it was, the field keeps its default
    odd = {"concurrency": 1, "ttft_s": [0.1], "self_check": None, "new_block": {"x": 1}}
    level = Level.from_dict(odd)
    assert level.ttft_s == Stats() and level.self_check is None and level.to_dict() == odd


def test_a_level_built_in_code_writes_its_fields_in_order() -> None:
    lv = Level(rate=2.0, requests=3, ok=3)
    out = lv.to_dict()
    assert list(out)[:4] == ["rate", "requests", "ok", "errors"] and "concurrency" not in out
    assert "image" not in out and "images_per_min" not in out["throughput"] and out["achieved"] == {}
    assert Level.from_dict(out).to_dict() == out and lv.is_rate and lv.value == 2.0
