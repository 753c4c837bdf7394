"""AppTest of the Benchmarks page: the form follows the server's kind (an image server is swept
with the images API), image runs draw per-image latency (seconds), images/min and s/step, and
the newest finished run is the one drawn after a sweep."""

from __future__ import annotations

import time

import pytest
from pages_seed import seed
from pwtest import run_page

from storage import repo

PAGE = "dashboard/pages/benchmarks.py"


def _image_level(c: int, per_image: float, per_min: float, step: float) -> dict:
    def stat(v: float) -> dict:
        return {"p50": v, "p95": v * 1.2, "p99": v * 1.5, "mean": v, "max": v * 2}

    none = {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}
    return {
        "concurrency": c, "requests": 4, "ok": 4, "errors": {}, "success_rate": 1.0,
        "ttft_s": none, "itl_s": none, "tpot_s": none, "e2e_s": stat(per_image),
        "throughput": {"rps": per_min / 60, "output_tok_s": None, "images_per_min": per_min},
        "image": {"per_image_s": stat(per_image), "inference_s_per_step": stat(step),
                  "inference_s": stat(per_image), "peak_memory_bytes": none, "steps": 20,
                  "images_per_request": 1, "reported": 4},
        "self_check": {"loop_lag_p99_s": 0.004, "lag_bound_s": 0.25, "lag_basis": "E2E p50",
                       "client_cpu_pct": 5.0, "cpu_max_pct": 70.0, "trusted": True, "reasons": []},
    }


@pytest.fixture
def image_db(app_env):
    from storage.db import make_engine

    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    srv = repo.upsert_server(engine, name="demo-image", base_url="http://127.0.0.1:9", kind="image",
                             gpu_indices=[0])
    yield engine, srv.id
    engine.dispose()


def test_image_server_form_sends_the_images_api(image_db, app_env):
    engine, _ = image_db
    at = run_page(PAGE, server="demo-image")
    assert "image server: images API" in " ".join(str(m.value) for m in at.markdown)
    assert not [w for w in at.number_input if w.key == "bm_max_new"]  # no LLM token budget here
    at.selectbox(key="bm_img_size").set_value("512x512")
    at.text_input(key="bm_levels").set_value("1,2")
    at.number_input(key="bm_requests").set_value(3)
    at.number_input(key="bm_img_steps").set_value(8)
    at.number_input(key="bm_img_n").set_value(2)
    at.button[0].click()
    at.run()
    at.button(key="bm_confirm").click().run()
    assert not at.exception, [e.value for e in at.exception]
    intents = repo.list_intents(engine, kinds=["probe"])
    assert len(intents) == 1
    run = repo.get_probe_run(engine, run_id=intents[0].payload["run_id"])
    assert run.api == "images" and run.spec["api"] == "images"
    wl = run.spec["workload"]
    assert (wl["image_size"], wl["image_steps"], wl["images_per_request"]) == ("512x512", 8, 2)


def test_image_runs_draw_seconds_images_per_minute_and_step(image_db):
    engine, sid = image_db
    repo.create_probe_run(engine, server_id=sid, url="http://127.0.0.1:9", api="images",
                          name="img sweep", spec={"levels": [1.0, 2.0]}, status="done",
                          fingerprint="f" * 16, trusted=True,
                          report={"levels": [_image_level(1, 2.5, 24.0, 0.12),
                                             _image_level(2, 4.0, 30.0, 0.19)]})
    at = run_page(PAGE, server="demo-image")
    specs = [str(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert len(specs) == 3, specs
    joined = " ".join(specs)
    for title in ("Per-image latency (s) vs concurrency", "Images/min vs concurrency",
                  "Seconds per step vs concurrency"):
        assert title in joined
    assert '"ms"' not in joined and "TTFT" not in joined  # seconds, and no LLM chart
    table = at.dataframe[1].value
    assert list(table["per image p50 (s)"]) == ["2.5 s", "4 s"]
    assert list(table["images/min"]) == ["24", "30"]


def test_the_newest_run_is_drawn_after_a_sweep_finishes(app_env):
    from storage.db import make_engine

    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    seed(engine)
    at = run_page(PAGE, server="alpha")
    first = list(at.multiselect(key="bm_pick").value)
    assert len(first) == 1
    alpha = repo.get_server(engine, name="alpha")
    # a sweep is started and the page follows it ...
    run = repo.create_probe_run(engine, server_id=alpha.id, url="http://127.0.0.1:1", api="generate",
                                name="newer sweep", spec={"levels": [1.0]}, status="running")
    intent = repo.create_intent(engine, kind="probe", server_id=alpha.id, payload={"run_id": run.id})
    at.run()
    # ... until it finishes: the page redraws with the new run, not the one it drew before
    old = repo.get_probe_run(engine, run_id=first[0])
    repo.update_probe_run(engine, run_id=run.id, status="done", finished_at=time.time(),
                          report=old.report, trusted=old.trusted, fingerprint="n" * 16)
    repo.update_intent(engine, intent_id=intent.id, state="done")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert list(at.multiselect(key="bm_pick").value) == [run.id]
    assert any("newer sweep" in e.label for e in at.expander)
    engine.dispose()


def test_a_stored_trace_is_a_workload_an_image_server_replays_through_the_images_api(image_db, app_env):
    from pwtest import REPO

    from collectors.trace import importer

    engine, srv_id = image_db
    importer.store(engine, importer.build([REPO / "traces" / "demo-chat.jsonl"]))
    at = run_page(PAGE, server="demo-image")
    at.number_input(key="bm_replay_speed").set_value(3.0)
    at.button(key="FormSubmitter:bm_replay-Replay").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (intent,) = repo.list_intents(engine, kinds=["probe"])
    run = repo.get_probe_run(engine, run_id=intent.payload["run_id"])
    assert run is not None and run.server_id == srv_id and run.status == "pending"
    assert (run.spec["trace"], run.spec["speed"], run.spec["api"]) == ("demo-chat", 3.0, "images")
