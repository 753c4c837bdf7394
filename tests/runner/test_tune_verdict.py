"""A tune's verdict through the service (dashboard/services/tune.py) on real SQLite: a tie inside
the measured spread is said in words and has no winner to apply, a clear win still applies;
candidates match the server's kind; the default workload is the server's own last sweep.
Candidates are ranked from real report levels (tests/tune_seed.py)."""

from __future__ import annotations

import pytest
from tune_seed import candidate, report_level

from dashboard.services import tune
from present import tune_result
from runner import tune_rank
from storage import repo

SLO = {"ttft_p99_s": 0.5, "itl_p99_s": 0.05, "success_rate": 0.99}


def _seed(engine, rates: dict[str, float]) -> int:
    srv = repo.upsert_server(engine, name="demo", base_url="http://127.0.0.1:1", managed=True, profile="demo")
    for name in rates:
        repo.upsert_profile(engine, name=name, model_path="m", entrypoint="simulator.launch_server",
                            flags={"max-running-requests": 64, **({"disable-radix-cache": True} if "off" in name else {})},
                            env={})
    cands = [candidate(name, [report_level(rps)]) for name, rps in rates.items()]
    said_winner = tune_rank.rank(cands, SLO)
    said = tune_rank.verdict(cands)
    state = {"server": "demo", "original_profile": "demo", "candidates": cands, "slo": SLO, "workload": "abc",
             "winner": said_winner, "tie": list(said.tied), "verdict": said.text, "restored_profile": "demo"}
    intent = repo.create_intent(engine, kind="tune", server_id=srv.id, requested_by="tester",
                                payload={"server": "demo", "profiles": list(rates)})
    repo.update_intent(engine, intent_id=intent.id, state="done", result=state)
    assert intent.id is not None
    return intent.id


def test_a_tie_is_said_in_words_and_has_nothing_to_apply(engine) -> None:
    tid = _seed(engine, {"demo-radix-off": 5.96, "demo": 5.95})
    result = repo.get_intent(engine, intent_id=tid).result
    assert tune_result.winner(result) is None
    table = tune.format_table(result)
    first = table.splitlines()[0]
    assert first.startswith("demo-radix-off and demo tie: goodput") and "inside the measured spread" in first
    assert "keep the current profile" in first and "winner: none" in table
    assert tune_result.winner_diff(engine, result) is None
    with pytest.raises(tune.TuneRequestError, match="no winner to apply: demo-radix-off and demo tie"):
        tune.apply_winner(engine, tid, actor="tester")
    assert repo.list_intents(engine, kinds=("relaunch",)) == []
    assert tune.tune_json(repo.get_intent(engine, intent_id=tid))["tie"] == ["demo-radix-off", "demo"]


def test_a_clearly_better_candidate_is_applied(engine) -> None:
    tid = _seed(engine, {"demo": 5.0, "demo-radix-off": 8.0})
    result = repo.get_intent(engine, intent_id=tid).result
    assert tune_result.winner(result) == "demo-radix-off"
    assert tune.format_table(result).splitlines()[0].startswith("demo-radix-off wins: goodput 8.")
    sub = tune.apply_winner(engine, tid, actor="tester")
    assert repo.get_intent(engine, intent_id=sub.id).payload["profile"] == "demo-radix-off"


def test_candidates_must_match_the_server_kind(engine) -> None:
    repo.upsert_server(engine, name="demo", base_url="http://127.0.0.1:1", managed=True, profile="demo")
    repo.upsert_server(engine, name="demo-image", base_url="http://127.0.0.1:2", managed=True, kind="image",
                       profile="demo-image")
    repo.upsert_profile(engine, name="demo", model_path="m", entrypoint="simulator.launch_server", flags={}, env={})
    repo.upsert_profile(engine, name="demo-image", model_path="m", entrypoint="simulator.launch_server",
                        flags={"model-type": "diffusion"}, env={})
    assert tune.profile_names(engine, kind="llm") == ["demo"]
    assert tune.profile_names(engine, kind="image") == ["demo-image"]
    sweep = tune.default_workload(engine, "demo").sweep
    with pytest.raises(tune.TuneRequestError, match="demo-image is not an LLM profile, and demo is an LLM server"):
        tune.start_tune(engine, server="demo", profiles=["demo", "demo-image"], sweep=sweep)
    with pytest.raises(tune.TuneRequestError, match="demo is not an image profile"):
        tune.start_tune(engine, server="demo-image", profiles=["demo"], sweep=sweep)
    assert repo.list_intents(engine, kinds=("tune",)) == []


def test_the_default_workload_is_the_servers_last_sweep(engine) -> None:
    srv = repo.upsert_server(engine, name="demo", base_url="http://127.0.0.1:1", managed=True)
    first = tune.default_workload(engine, "demo")
    assert first.run_id is None and first.sweep["workload"]["prompt_set"] == "shared-prefix"
    assert "no finished sweep of demo yet" in first.text
    spec = {"url": srv.base_url, "api": "generate", "mode": "concurrency", "levels": [2.0, 8.0], "requests": 60,
            "server_id": srv.id, "workload": {"prompt_set": "builtin", "max_new_tokens": 32}}
    done = repo.create_probe_run(engine, server_id=srv.id, url=srv.base_url, api="generate", spec=spec, status="done")
    repo.create_probe_run(engine, server_id=srv.id, url=srv.base_url, api="generate",
                          spec={**spec, "levels": [1.0]}, status="failed")  # newer, but not finished
    got = tune.default_workload(engine, "demo")
    assert got.run_id == done.id and got.text == f"workload: the last sweep of demo, run #{done.id}"
    assert got.sweep["levels"] == [2.0, 8.0] and "url" not in got.sweep and "server_id" not in got.sweep


def test_the_cli_refuses_a_candidate_of_the_other_kind(data_env, capsys) -> None:
    from cli.tune import tune_cli
    from storage.db import make_engine

    eng = make_engine(data_env["PITWALL_DATABASE_URL"])
    repo.upsert_server(eng, name="demo", base_url="http://127.0.0.1:1", managed=True, profile="demo")
    repo.upsert_profile(eng, name="demo", model_path="m", entrypoint="simulator.launch_server", flags={}, env={})
    repo.upsert_profile(eng, name="demo-image", model_path="m", entrypoint="simulator.launch_server",
                        flags={"model-type": "diffusion"}, env={})
    assert tune_cli(["demo", "--profiles", "demo,demo-image", "--no-wait"]) == 1
    err = capsys.readouterr().err
    assert "demo-image is not an LLM profile, and demo is an LLM server; pick candidates of its kind (demo)" in err
    assert "last sweep" in err or "no finished sweep of demo yet" in err  # the workload it would have run
    assert repo.list_intents(eng, kinds=("tune",)) == []
    eng.dispose()
