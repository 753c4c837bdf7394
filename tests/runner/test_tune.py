"""`tune` intents end to end: a real Runner relaunches the bundled simulator (real
processes, real HTTP on 127.0.0.1, a real SQLite file) under each candidate, runs one probe
workload in a sweep process, scores and ranks; a candidate that cannot start is recorded with
its cause, and a runner SIGKILLed mid-tune is followed by one that resumes. A trace workload
(`pitwall tune --trace`) searches each candidate's capacity: every speed tried is a stored replay.

The simulator is configured only through profile [env] (SGLANG_SIM_*): fast profiles start in
well under a second of wall time. Workloads are tiny (a handful of requests at one level).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pwtest import PY, REPO, free_port, runner_thread, sim_profile, subprocess_env, wait_for

from cli.wiring import runner_parts
from collectors.trace import importer
from config.settings import Settings
from dashboard.services import tune
from launching.profiles import sync_profiles
from runner.loop import Runner
from storage import repo

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

FAST_ENV = {"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "0.5", "SGLANG_SIM_SEED": "1"}
SWEEP = {"api": "generate", "mode": "concurrency", "levels": [2.0], "requests": 6, "warmup": 2,
         "workload": {"prompt_set": "shared-prefix", "max_new_tokens": 8, "num_prompts": 8}}






@pytest.fixture
def setup(tmp_path: Path, engine) -> dict:
    folder = tmp_path / "profiles"
    folder.mkdir()
    sim_profile(folder, "fast-a", "max-running-requests = 8", FAST_ENV)
    sim_profile(folder, "fast-b", "max-running-requests = 16\ndisable-radix-cache = true", FAST_ENV)
    sim_profile(folder, "crashy", "max-running-requests = 32", {**FAST_ENV, "SGLANG_SIM_FAULT": "crash-at-start"})
    (tmp_path / "data").mkdir()
    assert sync_profiles(engine, folder)[1] == []
    url = str(engine.url)
    settings = Settings(data_dir=tmp_path / "data", database_url=url, profiles_dir=folder)
    port = free_port()
    server = repo.upsert_server(engine, name="sim", base_url=f"http://127.0.0.1:{port}", managed=True,
                                python=sys.executable, profile="fast-a",
                                log_path=str(tmp_path / "data" / "logs" / "sim.log"))
    return {"engine": engine, "settings": settings, "server": server, "folder": folder, "url": url,
            "data": tmp_path / "data"}


@pytest.fixture
def runner(setup) -> Iterator[Runner]:
    supervisor, handlers = runner_parts(setup["settings"], setup["engine"], auto_start=False)
    with runner_thread(Runner(setup["engine"], [], supervisor=supervisor, intent_handlers=handlers,
                              tick_s=0.05)) as r:
        yield r


def _final(engine, intent_id: int):
    i = repo.get_intent(engine, intent_id=intent_id)
    return i if i is not None and i.state in ("done", "failed", "cancelled", "expired") else None


def test_tune_records_a_candidate_that_cannot_start_and_finishes(setup, runner) -> None:
    engine = setup["engine"]
    intent = tune.start_tune(engine, server="sim", profiles=["fast-a", "crashy", "fast-b"], sweep=SWEEP,
                             requested_by="tester")
    final = wait_for(lambda: _final(engine, intent.id), timeout=200, what="the tune to finish")
    assert final.state == "done", final.message
    out = tune.tune_json(final)
    assert set(out) == {"server", "workload", "slo", "candidates", "winner", "tie", "verdict", "restored_profile"}
    assert out["verdict"] and not (out["winner"] and out["tie"])  # a tie has no winner
    assert out["server"] == "sim" and out["restored_profile"] == "fast-a"
    by = {c["profile"]: c for c in out["candidates"]}
    assert set(by) == {"fast-a", "crashy", "fast-b"}
    crashy = by["crashy"]
    assert crashy["status"] == "failed" and crashy["rank"] == 3
    assert "did not start" in crashy["reason"] and "exited" in crashy["reason"], crashy["reason"]
    assert crashy["probe_run_ids"] == []
    for name in ("fast-a", "fast-b"):
        c = by[name]
        assert c["status"] in ("ok", "slo_missed"), c
        assert set(c) == set(tune_keys()) and set(c["scorecard"]) >= {"latency", "throughput", "cost", "stability"}
        assert c["scorecard"]["latency"]["ttft_p99_s"] > 0 and c["scorecard"]["throughput"]["rps"] > 0
        run = repo.get_probe_run(engine, run_id=c["probe_run_ids"][0])
        assert run.status == "done" and run.launch_id == c["launch_id"] and run.fingerprint == out["workload"]
        assert repo.get_launch(engine, launch_id=c["launch_id"]).profile_name == name
    assert {c["rank"] for c in out["candidates"]} == {1, 2, 3}
    # the server runs its original profile again, in a launch of its own after the last candidate
    launch = repo.latest_launch(engine, server_id=setup["server"].id)
    assert launch.profile_name == "fast-a" and launch.status == "ready" and launch.id > by["fast-b"]["launch_id"]
    assert "Tune of sim: 3 candidates" in final.message


def tune_keys() -> tuple[str, ...]:
    from runner.tune_rank import CANDIDATE_KEYS

    return CANDIDATE_KEYS


def _kill_launched(engine, server_id: int) -> None:
    """Leave no simulator behind: a server the SIGKILLed runner started may outlive both runners."""
    for la in repo.list_launches(engine, server_id=server_id):
        if la.pid:
            try:
                os.killpg(la.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def test_a_runner_killed_mid_tune_is_resumed_by_the_next(setup) -> None:
    engine = setup["engine"]
    argv = [PY, str(Path(__file__).with_name("tune_runner.py")), setup["url"], str(setup["folder"]),
            str(setup["data"])]
    first = subprocess.Popen(argv, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        intent = tune.start_tune(engine, server="sim", profiles=["fast-a", "fast-b"], sweep=SWEEP,
                                 requested_by="tester")
        wait_for(lambda: len((repo.get_intent(engine, intent_id=intent.id).result or {}).get("candidates") or []) >= 1,
                 timeout=120, what="the first candidate to be recorded")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    killed = repo.get_intent(engine, intent_id=intent.id)
    assert killed.state == "running"  # nobody settled it: the runner died
    recorded = killed.result["candidates"][0]
    assert recorded["profile"] == "fast-a" and len(killed.result["candidates"]) == 1
    # the next runner puts it back to pending and carries on with fast-b
    second = subprocess.Popen(argv, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        final = wait_for(lambda: _final(engine, intent.id), timeout=200, what="the resumed tune to finish")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
        _kill_launched(engine, setup["server"].id)
    assert final.state == "done", final.message
    cands = final.result["candidates"]
    assert [c["profile"] for c in cands] == ["fast-a", "fast-b"]
    assert cands[0]["launch_id"] == recorded["launch_id"]  # fast-a was not run again
    assert cands[0]["probe_run_ids"] == recorded["probe_run_ids"]
    assert cands[1]["status"] in ("ok", "slo_missed") and cands[1]["probe_run_ids"], cands[1]["reason"]
    assert final.result["restored_profile"] == "fast-a"
    relaunches = [i for i in repo.list_intents(engine, kinds=("relaunch",), limit=50) if "tune R-" in i.requested_by]
    assert sorted((i.payload or {}).get("profile") for i in relaunches).count("fast-a") >= 2  # candidate + restore


def test_a_tune_requested_while_the_server_is_still_launching_waits_for_it(setup, runner) -> None:
    """`pitwall up` then a tune at once: the server's own first launch is still starting when the
    tune's first relaunch is due. The tune waits for it rather than having its relaunch refused
    as a second lifecycle action (the candidate was recorded `failed` with "Refused: launch #N")."""
    engine = setup["engine"]
    sim_profile(setup["folder"], "slow", "max-running-requests = 8", {**FAST_ENV, "SGLANG_SIM_STARTUP_S": "3"})
    assert sync_profiles(engine, setup["folder"])[1] == []
    first = repo.create_intent(engine, kind="launch", server_id=setup["server"].id, payload={"profile": "slow"},
                               requested_by="pitwall up")
    intent = tune.start_tune(engine, server="sim", profiles=["fast-b"], sweep=SWEEP, requested_by="tester")
    final = wait_for(lambda: _final(engine, intent.id), timeout=200, what="the tune to finish")
    assert final.state == "done", final.message
    assert repo.get_intent(engine, intent_id=first.id).state == "done"
    (cand,) = tune.tune_json(final)["candidates"]
    assert cand["status"] in ("ok", "slo_missed"), cand["reason"]
    assert repo.get_launch(engine, launch_id=cand["launch_id"]).profile_name == "fast-b"


def test_a_trace_tune_searches_each_candidates_capacity_in_stored_replays(setup, runner) -> None:
    """The contract, whatever the busy host does to a trial: each candidate's capacity search is
    recorded (its speeds, its verdict on each, its knee and repeats), each speed tried is a stored
    replay of the trace on that candidate's launch, and the ranking follows runner/tune_rank.py.
    The SLO is loose and the fastest speed 2x, so a trial the client kept to schedule meets it (two
    trials a candidate: 1x, then 2x, each a couple of seconds of the trace); on a busy host the
    client may fall behind twice, which ends that candidate's search there (never a descent to
    slower, longer replays that blames the server: CI once spent 200 s so)."""
    engine = setup["engine"]
    importer.store(engine, importer.build([REPO / "traces" / "demo-chat.jsonl"]))
    trace = repo.get_trace(engine, name="demo-chat")
    assert trace is not None
    sweep = {"trace": "demo-chat", "digest": trace.digest, "speed": "auto", "window": [0.0, 2.0], "max_requests": None,
             "max_speed": 2.0, "slo": {"ttft_p99_s": 30.0, "success_rate": 0.5}, "mode": "rate",
             "workload": {"prompt_set": "trace demo-chat, the speed within the SLO"}}
    intent = tune.start_tune(engine, server="sim", profiles=["fast-a", "fast-b"], sweep=sweep, requested_by="tester")
    final = wait_for(lambda: _final(engine, intent.id), timeout=200, what="the trace tune to finish")
    assert final.state == "done", final.message
    out = tune.tune_json(final)
    assert out["workload"] == f"trace demo-chat ({trace.digest})" and out["slo"] == sweep["slo"]
    assert out["restored_profile"] == "fast-a" and len(out["candidates"]) == 2
    for c in out["candidates"]:
        cap = c["capacity"]
        assert cap["trace"] == "demo-chat" and cap["steps"] and cap["rate_rps"] > 0
        if cap["client_bound"] is not None:  # the busy host's client fell behind twice: the search ended there
            assert cap["steps"][-1]["speed"] == cap["client_bound"] and not cap["steps"][-1]["meets"]
            assert (c["status"] == "failed") == (cap["knee"] is None), c["reason"]
        else:
            assert c["status"] in ("ok", "slo_missed")
        tried = {s["run_id"]: s["speed"] for s in cap["steps"]}
        assert set(tried) <= set(c["probe_run_ids"])  # a trial run again (not trusted) adds a run
        for run_id in c["probe_run_ids"]:
            run = repo.get_probe_run(engine, run_id=run_id)
            assert run is not None and run.status == "done" and run.launch_id == c["launch_id"]
            assert run.spec["trace"] == "demo-chat" and run.spec["window"] == [0.0, 2.0]
            assert run_id not in tried or run.spec["speed"] == tried[run_id]
        if cap["capped"] and cap["client_bound"] is None:
            assert c["status"] == "ok" and cap["knee"] == 2.0 and all(s["meets"] for s in cap["steps"])
            assert c["reason"].startswith("holds at least 2x of trace demo-chat")
    if all(c["capacity"]["capped"] and c["capacity"]["client_bound"] is None for c in out["candidates"]):
        assert out["winner"] is None and sorted(out["tie"]) == ["fast-a", "fast-b"]  # neither known to hold more
