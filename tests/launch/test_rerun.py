""""Rerun the baseline workload" after a relaunch — which sweep is the baseline, and that
the rerun measures exactly what the baseline measured (real SQLite, the real services)."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from collectors.probe.fingerprint import fingerprint_detail, fingerprint_hash
from collectors.probe.sweep import SweepSpec
from collectors.probe.workloads import build_prompts
from dashboard.services import rerun
from storage import repo
from storage.db import make_engine

SPEC: dict[str, Any] = {
    "url": "http://127.0.0.1:9", "api": "chat", "mode": "rate", "levels": [0.5, 2.5], "requests": None,
    "warmup": 3, "seed": 7, "api_key": "***", "server_id": 1, "launch_id": 1, "name": "cli sweep",
    "baseline_run_id": None,
    "workload": {"prompt_set": "shared-prefix", "max_new_tokens": 48, "input_tokens": 300, "ignore_eos": False,
                 "temperature": 0.7, "top_p": 0.9, "top_k": 20, "num_prompts": 17, "seed": 3, "prefix_tokens": 200, "model": "m"},
}


@pytest.fixture
def engine(data_env):
    eng = make_engine(data_env["PITWALL_DATABASE_URL"])
    srv = repo.upsert_server(eng, name="sim", base_url="http://127.0.0.1:9", managed=True, python=sys.executable)
    for n in (1, 2, 3):  # launch 1 ran the baseline, 2 a tune's candidate, 3 is the relaunch's
        repo.create_launch(eng, server_id=srv.id, profile_name="p", profile_hash="h", argv=["py"], env={},
                           pid=None, status="ready", started_at=float(n), ended_at=None if n == 3 else float(n) + 1)
    yield eng
    eng.dispose()


def _run(eng, launch_id: int, status: str = "done", **kw: Any):
    return repo.create_probe_run(eng, server_id=1, launch_id=launch_id, url=SPEC["url"], api="chat",
                                 spec={**SPEC, "launch_id": launch_id}, status=status, created_at=time.time() - 60, **kw)


def _relaunch(eng, *, replaced: int | None, by: str = "ann"):
    intent = repo.create_intent(eng, kind="relaunch", server_id=1, payload={"profile": "p"}, requested_by=by)
    repo.update_intent(eng, intent_id=intent.id, state="done", message="ready",
                       result={"launch_id": 3, "replaced_launch_id": replaced})
    return repo.get_intent(eng, intent_id=intent.id)


def test_the_baseline_is_the_replaced_launchs_sweep_not_a_newer_candidates(engine) -> None:
    base = _run(engine, 1)
    _run(engine, 2)  # a tune candidate's sweep, newer: not the baseline
    _run(engine, 1, status="failed")  # newer but not finished
    rs = rerun.state(engine, _relaunch(engine, replaced=1))
    assert rs.offered and rs.baseline is not None and rs.baseline.id == base.id


def test_no_rerun_for_a_tunes_relaunch_or_a_replaced_launch_without_a_sweep(engine) -> None:
    _run(engine, 1)
    assert not rerun.state(engine, _relaunch(engine, replaced=1, by="ann (tune R-4)")).offered
    assert not rerun.state(engine, _relaunch(engine, replaced=None)).offered
    rs = rerun.state(engine, _relaunch(engine, replaced=2))
    assert rs.offered and rs.baseline is None  # the page says the replaced launch has no sweep


def _fingerprint(spec: dict[str, Any]) -> str:
    s = SweepSpec.from_dict(spec)
    return fingerprint_hash(fingerprint_detail(
        api=s.api, model=s.workload.model, workload=s.workload, prompts=build_prompts(s.workload), mode=s.mode,
        levels=s.levels, requests_per_level=[s.requests_for(v) for v in s.levels],
        warmup_per_level=[s.warmup_for(v) for v in s.levels]))


def test_the_rerun_copies_the_baselines_spec_and_is_recorded_once(engine) -> None:
    base = _run(engine, 1)
    relaunch = _relaunch(engine, replaced=1)
    run_id, intent_id = rerun.rerun_baseline(engine, "sim", base, relaunch, actor="ann")
    assert intent_id is not None
    new = repo.get_probe_run(engine, run_id=run_id)
    changed = {"url", "server_id", "launch_id", "name", "baseline_run_id", "api_key"}
    assert {k: v for k, v in new.spec.items() if k not in changed} == \
        {k: v for k, v in base.spec.items() if k not in changed}
    assert new.spec["launch_id"] == 3 and new.spec["baseline_run_id"] == base.id and "api_key" not in new.spec
    assert new.spec["mode"] == "rate" and new.spec["requests"] is None and new.spec["levels"] == [0.5, 2.5]
    assert _fingerprint(new.spec) == _fingerprint(base.spec)
    (audit,) = [a for a in repo.list_audit(engine) if a.action == "sweep_start"]
    assert audit.actor == "ann" and audit.detail["run_id"] == run_id
    # a second tab's click returns the rerun already recorded
    assert rerun.rerun_baseline(engine, "sim", base, relaunch, actor="bob") == (run_id, None)
    assert len(repo.list_probe_runs(engine, server_id=1)) == 2
