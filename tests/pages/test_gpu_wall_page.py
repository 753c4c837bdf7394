"""AppTest of the Server page's GPU-wall panel: H200 recordings stored through the GPU collector
(tests/gpu_seed.py) a minute ago, so the 15-minute window holds them; with GPM, without GPM,
without GPUs, and the denoising share and what-if of an image server."""

from __future__ import annotations

import time

import pytest
from gpu_seed import store_recording
from image_seed import seed_image
from pwtest import REPO
from streamlit.testing.v1 import AppTest

from present.format import fmt_value
from storage import repo

APP = str(REPO / "app.py")


def _engine(app_env):
    from storage.db import make_engine

    return make_engine(app_env["PITWALL_DATABASE_URL"])


def _llm(app_env, fixture: str | None) -> None:
    eng = _engine(app_env)
    srv = repo.upsert_server(eng, name="h200", base_url="http://127.0.0.1:1")
    with eng.begin() as conn:  # a fresh health reading, so the page has a live server
        repo.insert_samples(conn, rows=[{"ts": time.time() - 2, "server_id": srv.id, "launch_id": None,
                                         "source": "api", "metric": "api.health_ok", "value": 1.0}])
    if fixture:
        store_recording(eng, fixture, t0=time.time() - 60, server_id=int(srv.id))
    eng.dispose()


def _run(**params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("dashboard/pages/server.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # The first run draws the charts and only a line where the wall goes; the wall draws on the
    # next run (in the browser, the fragment's first timed rerun, LATER_S after the charts).
    assert not any("bound by" in str(m.value) for m in at.markdown)
    assert any("after the charts" in str(c.value) for c in at.caption)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _text(at: AppTest) -> str:
    return " ".join(str(m.value) for m in [*at.markdown, *at.caption, *at.info])


def test_copy_loop_panel_says_bandwidth_with_its_evidence_and_chart(app_env):
    _llm(app_env, "nvml-h200-copy.json")
    at = _run(server="h200", window="15m")
    assert any("GPU wall" in s.value for s in at.subheader)
    text = _text(at)
    assert "**GPU 0 \\(NVIDIA H200\\)**" in text and "bound by: memory bandwidth" in text  # markdown-escaped
    assert "GPM samples" in text and "Window " in text
    m = _metrics(at)
    dram = float(m["DRAM bandwidth"].rstrip(" %"))
    assert dram > 80 and float(m["Tensor activity"].rstrip(" %")) < 10
    assert m["Achieved bandwidth"].endswith("TB/s of 4.80 TB/s")
    assert float(m["Achieved bandwidth"].split()[0]) == pytest.approx(dram / 100 * 4.8, abs=0.01)
    specs = " ".join(str(c.proto.spec) for c in at.get("vega_lite_chart"))
    assert "DRAM bandwidth and tensor activity" in specs and "GPU 0 tensor activity" in specs


def test_power_capped_matmul_loop_panel_says_power_with_the_clock_and_watts(app_env):
    _llm(app_env, "nvml-h200-matmul-gpm.json")  # 1.41-1.46 GHz under the H200's software power cap
    at = _run(server="h200", window="15m")
    assert "bound by: power" in _text(at)
    assert float(_metrics(at)["Tensor activity"].rstrip(" %")) > 80
    assert _metrics(at)["Clock and power"] == "1.44 of 1.98 GHz, 692 W"  # the clock the cap held, the draw


def test_gpu_without_gpm_says_not_available_never_zero(app_env):
    _llm(app_env, "nvml-h200-matmul.json")  # recorded before GPM reads
    at = _run(server="h200", window="15m")
    assert any("not available on this GPU" in i.value for i in at.info)
    assert "DRAM bandwidth" not in _metrics(at) and "bound by:" not in _text(at)


def test_server_without_gpus_says_no_telemetry(app_env):
    _llm(app_env, None)
    at = _run(server="h200", window="15m")
    assert any("GPU wall" in s.value for s in at.subheader)
    assert "No GPU telemetry in this window" in _text(at)


def test_image_server_shows_denoising_share_and_the_what_if(app_env):
    from scorecard.gpu_wall_stage import stage_walls

    eng = _engine(app_env)
    t0 = time.time() - 60
    ids = seed_image(eng, name="demo-image", t0=t0)
    # DenoisingStage lines at t0 + 0, 2, 4, 6 of 8 s each: [t0 − 8, t0 + 6]; the copy loop's GPM
    # samples at t0 − 9 .. t0 + 2 cover [t0 − 10, t0 + 2] of it
    store_recording(eng, "nvml-h200-copy.json", t0=t0 - 10, server_id=ids["server_id"])
    want = stage_walls(eng, server_id=ids["server_id"], since=t0 - 900, until=t0 + 600)
    eng.dispose()
    at = _run(server="demo-image", window="15m")
    m = _metrics(at)
    assert float(m["Bandwidth-bound share"].rstrip(" %")) >= 80
    b300 = next(r for r in want["what_if"] if r["card"] == "B300")
    assert m["Seconds per step on B300 (what-if)"] == fmt_value(b300["step_s"], "s")
    assert b300["step_s"] < 0.3  # most of a 0.4 s step scales with 4.8 → 8 TB/s
    assert "Assumption: from H200 to B300: assumes the" in _text(at)
    at.selectbox(key="gpu_wall_what_if").select("A100 SXM 80GB").run()
    assert not at.exception
    slower = _metrics(at)["Seconds per step on A100 SXM 80GB (what-if)"]
    assert slower.endswith("ms") and float(slower.split()[0]) > 400  # 2.04 TB/s: slower than now
    # a slower card reads slower, with a down arrow: never "↑ 0.49× the speed"
    metric = next(x for x in at.metric if x.label == "Seconds per step on A100 SXM 80GB (what-if)")
    assert metric.delta.endswith("× slower") and float(metric.delta.split("×")[0]) > 1
    assert metric.proto.direction == metric.proto.MetricDirection.DOWN
    at.selectbox(key="gpu_wall_what_if").select("B300").run()
    faster = next(x for x in at.metric if x.label == "Seconds per step on B300 (what-if)")
    assert faster.delta.endswith("× faster") and faster.proto.direction == faster.proto.MetricDirection.UP


def test_what_if_speed_reads_in_words_with_the_arrow_that_matches():
    from scorecard.gpu_wall_stage import speed_direction, speed_words

    assert (speed_words(0.49), speed_direction(0.49)) == ("2.04× slower", "down")  # 1 / 0.49 = 2.04
    assert (speed_words(2.03), speed_direction(2.03)) == ("2.03× faster", "up")
    assert (speed_words(1.004), speed_direction(1.004)) == ("about the same speed", "off")
    assert (speed_words(None), speed_direction(None)) == (None, "off")


def test_mig_card_shows_each_instance_as_a_gpu_of_its_own(app_env):
    """The golden dcgm-exporter payload (GPU 0 in MIG mode, GI 1 = 3g.48gb bandwidth bound, GI 3 =
    2g.24gb idle; tests/gpu_seed.py store_dcgm) a minute ago: the wall judges each instance, the
    memory chart draws each instance's series, the power chart the card's, once."""
    from gpu_seed import store_dcgm

    eng = _engine(app_env)
    srv = repo.upsert_server(eng, name="mig", base_url="http://127.0.0.1:1", gpu_indices=[0])
    with eng.begin() as conn:
        repo.insert_samples(conn, rows=[{"ts": time.time() - 2, "server_id": srv.id, "launch_id": None,
                                         "source": "api", "metric": "api.health_ok", "value": 1.0}])
    store_dcgm(eng, server_id=int(srv.id), gpu_indices=[0], frames=20, t0=time.time() - 60)
    eng.dispose()
    at = _run(server="mig", window="15m")
    text = _text(at)
    assert "**GPU 0 · MIG 3g\\.48gb \\(instance 1\\) \\(NVIDIA H20\\)**" in text and "bound by: memory bandwidth" in text
    assert "**GPU 0 · MIG 2g\\.24gb \\(instance 3\\) \\(NVIDIA H20\\)**" in text and "bound by: idle" in text
    at.segmented_control(key="server_gpu_metric").set_value("gpu_mem").run()
    assert not at.exception, [e.value for e in at.exception]
    mem = _chart(at, "GPU memory used")
    assert "GPU 0 \\u00b7 MIG 3g.48gb (instance 1)" in mem and "GPU 0 \\u00b7 MIG 2g.24gb (instance 3)" in mem
    at.segmented_control(key="server_gpu_metric").set_value("gpu_power").run()
    power = _chart(at, "GPU power")
    assert "GPU 0" in power and "instance" not in power  # the card's power, drawn once


def test_overview_lines_of_a_mig_card_say_what_each_entry_has(app_env):
    """The card line of a card in MIG mode carries its power and heat, not a blank memory bar; each
    instance line carries its memory, not blanks for the figures that live on the card."""
    from gpu_seed import store_dcgm

    eng = _engine(app_env)
    srv = repo.upsert_server(eng, name="mig", base_url="http://127.0.0.1:1", gpu_indices=[0])
    store_dcgm(eng, server_id=int(srv.id), gpu_indices=[0], frames=5, t0=time.time() - 10)
    eng.dispose()
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    lines = [str(p.proto.text) for p in at.get("progress")]
    card = [t for t in lines if t.startswith("GPU 0 (MIG mode)")]
    assert len(card) == 1 and " W · " in card[0] and "mem" not in card[0], lines
    inst = [t for t in lines if "(instance 1)" in t]
    assert len(inst) == 1 and " · mem " in inst[0] and "GiB" in inst[0] and "util" not in inst[0], lines


def _chart(at: AppTest, title: str) -> str:
    """The spec and data of the chart titled `title`, as text."""
    for c in at.get("vega_lite_chart"):
        if f'"title": "{title}"' in str(c.proto.spec):
            return str(c.proto.spec) + " ".join(str(d) for d in c.proto.datasets)
    raise AssertionError(f"no chart titled {title!r}")
