"""AppTest of the Tune page: the live panel of a running tune, and a finished tune's
ranking, Pareto chart, winner diff and "Apply winner" (a relaunch intent with an audit row).

The finished tune is a recorded state, the shape runner/tunes.py writes into Intent.result
(figures from a real `pitwall tune demo --profiles demo,demo-radix-off` run)."""

from __future__ import annotations

from pwtest import run_page
from streamlit.testing.v1 import AppTest

from storage import repo

PAGE = "dashboard/pages/tune.py"


def _cand(profile: str, rank: int, rps: float, ttft: float, usd: float, radix: float, status: str = "ok") -> dict:
    return {"profile": profile, "status": status, "reason": f"goodput {rps:.2f} req/s at level 4", "rank": rank,
            "goodput_rps": rps, "launch_id": rank + 2, "probe_run_ids": [rank + 2], "levels": [],
            "scorecard": {"latency": {"grade": "pass", "ttft_p99_s": ttft, "itl_p99_s": 0.0072},
                          "throughput": {"grade": "pass", "rps": rps, "output_tok_s": rps * 128, "radix_hit_rate": radix},
                          "cost": {"grade": "pass", "gpu_usd_per_hour": 3.8, "usd_per_1m_output_tok": usd},
                          "stability": {"grade": "pass", "error_count": 0.0}}}


RESULT = {"server": "demo", "original_profile": "demo-radix-off", "workload": "c5a51946a0c122d4",
          "slo": {"ttft_p99_s": 0.06, "itl_p99_s": 1.0, "success_rate": 0.99},
          "candidates": [_cand("demo", 1, 5.80, 0.0319, 1.4196, 0.90),
                         _cand("demo-radix-off", 2, 5.34, 0.0859, 1.5453, 0.0, status="slo_missed"),
                         {**_cand("broken", 3, 0, 0, 0, 0, status="failed"), "scorecard": {}, "goodput_rps": None,
                          "reason": "did not start: the process exited with code 1 before it was ready"}],
          "winner": "demo", "restored_profile": "demo-radix-off"}


TIE = {**RESULT, "original_profile": "demo",
       "candidates": [{**_cand("demo-radix-off", 1, 5.96, 0.0319, 1.4196, 0.0), "goodput_spread": [5.7, 6.2]},
                      {**_cand("demo", 2, 5.95, 0.0329, 1.4200, 0.9), "goodput_spread": [5.6, 6.1]}],
       "winner": "demo-radix-off", "restored_profile": "demo"}  # crowned on noise, as main recorded it


def _seed(env, *, running: bool = False, result: dict | None = None) -> dict:
    from storage.db import make_engine

    eng = make_engine(env["PITWALL_DATABASE_URL"])
    srv = repo.upsert_server(eng, name="demo", base_url="http://127.0.0.1:1", managed=True, profile="demo")
    for name, extra in (("demo", {}), ("demo-radix-off", {"disable-radix-cache": True})):
        repo.upsert_profile(eng, name=name, model_path="m", entrypoint="simulator.launch_server",
                            flags={"max-running-requests": 64, **extra}, env={})
    done = repo.create_intent(eng, kind="tune", server_id=srv.id, requested_by="tester",
                              payload={"server": "demo", "profiles": ["demo", "demo-radix-off", "broken"]})
    repo.update_intent(eng, intent_id=done.id, state="done", result=result or RESULT,
                       message="Tune of demo: 3 candidates")
    repo.upsert_profile(eng, name="demo-image", model_path="m", entrypoint="simulator.launch_server",
                        flags={"model-type": "diffusion"}, env={})
    out = {"server_id": srv.id, "done": done.id}
    if running:
        live = repo.create_intent(eng, kind="tune", server_id=srv.id, requested_by="tester",
                                  payload={"server": "demo", "profiles": ["demo", "demo-radix-off"]})
        repo.update_intent(eng, intent_id=live.id, state="running", progress={
            "stage": "workload (running)", "fraction": 0.4, "detail": "candidate 2/2 demo-radix-off: workload",
            "eta_s": 75})
        out["live"] = live.id
    eng.dispose()
    return out


def _run() -> AppTest:
    return run_page(PAGE, server="demo")


def test_result_view_ranks_draws_and_applies_the_winner(app_env):
    ids = _seed(app_env)
    at = _run()
    frames = [d.value for d in at.dataframe]
    ranking = next(f for f in frames if "goodput req/s" in f.columns)
    assert list(ranking["profile"]) == ["demo", "demo-radix-off", "broken"]
    assert list(ranking["status"]) == ["ok", "slo_missed", "failed"]
    assert "exited with code 1" in ranking["reason"].iloc[2]
    assert round(float(ranking["p99 TTFT ms"].iloc[0])) == 32
    diff = next(f for f in frames if "setting" in f.columns)
    assert list(diff["setting"]) == ["flags.disable-radix-cache"]
    specs = [str(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert any("Cost vs p99 latency" in s and "strokeDash" in s for s in specs), "no Pareto chart with its SLO line"
    at.button(key="tune_apply_btn").click().run()
    at.button(key="tune_apply_yes").click().run()
    assert not at.exception, [e.value for e in at.exception]
    from storage.db import make_engine

    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    sub = repo.list_intents(eng, kinds=("relaunch",))
    assert len(sub) == 1 and sub[0].payload["profile"] == "demo"
    applied = [a for a in repo.list_audit(eng) if a.action == "tune_apply"]
    assert len(applied) == 1 and applied[0].detail["intent_id"] == ids["done"]


def test_live_panel_shows_the_candidate_stage_and_eta_and_stops(app_env):
    ids = _seed(app_env, running=True)
    at = _run()
    text = " ".join(str(m.value) for m in at.markdown)
    assert f"Tune R-{ids['live']}" in text and "candidate 2/2 demo" in text and "radix" in text
    at.button(key=f"tune_stop_{ids['live']}").click().run()
    from storage.db import make_engine

    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    assert repo.get_intent(eng, intent_id=ids["live"]).payload.get("stop") is True


def test_a_tie_is_said_above_the_table_and_offers_no_apply(app_env):
    _seed(app_env, result=TIE)
    at = _run()
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(str(w.value) for w in at.warning)
    assert ("demo-radix-off and demo tie: goodput 5.96 vs 5.95 req/s, inside the measured spread "
            "5.60–6.20 req/s; keep the current profile") in said.replace("\\", "")
    assert not [b for b in at.button if b.key == "tune_apply_btn"], "a tie offered Apply winner"
    ranking = next(d.value for d in at.dataframe if "goodput req/s" in d.columns)
    assert list(ranking["goodput spread"]) == ["5.70–6.20", "5.60–6.10"]
    specs = [str(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert any("Goodput and its measured spread" in s for s in specs)


def test_the_form_offers_candidates_of_the_servers_kind_and_says_the_workload(app_env):
    _seed(app_env)
    at = _run()
    picker = next(m for m in at.multiselect if m.key == "tune_profiles_demo")
    assert "demo-image" not in picker.options and "demo" in picker.options
    captions = " ".join(str(c.value) for c in at.caption).replace("\\", "")
    assert "no finished sweep of demo yet" in captions and "shared-prefix" in captions


def test_a_tune_on_a_stored_trace_ranks_on_its_capacity_within_the_slo(app_env):
    from pwtest import REPO

    from collectors.trace import importer
    from storage.db import make_engine

    ids = _seed(app_env)
    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    importer.store(eng, importer.build([REPO / "traces" / "demo-chat.jsonl"]))
    at = _run()
    at.multiselect(key="tune_profiles_demo").set_value(["demo", "demo-radix-off"])
    at.selectbox(key="tune_trace_demo").select("demo-chat")
    at.button(key="FormSubmitter:tune_form_demo-Start tune…").click().run()
    assert not at.exception and not at.error
    at.button(key="tune_confirm").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (intent,) = [i for i in repo.list_intents(eng, kinds=("tune",)) if i.id != ids["done"]]
    sweep = intent.payload["sweep"]
    trace = repo.get_trace(eng, name="demo-chat")
    assert trace is not None and intent.state == "pending"
    assert {k: sweep[k] for k in ("trace", "digest", "speed")} == {"trace": "demo-chat", "digest": trace.digest,
                                                                    "speed": "auto"}
    assert sweep["slo"]["ttft_p99_s"] > 0  # the server's SLO, each candidate's search holds to it
