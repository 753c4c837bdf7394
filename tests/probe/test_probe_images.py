"""The probe against the real simulated image server: per-request detail, the report's image
block, and the thumbnails kept for the output check (collectors/probe/images.py)."""

from __future__ import annotations

import asyncio
import base64
import io
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from pwtest import REPO, free_port

from collectors.probe import images
from collectors.probe.cli import open_engine
from collectors.probe.fingerprint import diff_fingerprints
from collectors.probe.sweep import SweepSpec, run_sweep
from collectors.probe.workloads import WorkloadSpec
from storage import repo


@pytest.fixture(scope="module")
def image_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("imgsim")
    port = free_port()
    log = open(tmp / "sim.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator.launch_server", "--model-path", "Qwen/Qwen-Image",
         "--port", str(port), "--sim-kind", "image", "--sim-gpu", "b300", "--sim-speed", "50",
         "--sim-startup-s", "1"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        else:
            raise AssertionError((tmp / "sim.log").read_text(errors="replace"))
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def _spec(url: str, **wl: object) -> SweepSpec:
    workload = WorkloadSpec(image_size="512x512", image_steps=8, seed=7, **wl)  # type: ignore[arg-type]
    return SweepSpec(url=url, api="images", levels=[1, 2], requests=3, warmup=1, workload=workload)


@pytest.mark.slow
def test_image_sweep_keeps_detail_report_block_and_thumbnails(image_sim: str, tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'p.db'}")
    report = asyncio.run(run_sweep(_spec(image_sim), engine=engine)).to_dict()
    assert report["status"] == "done", report.get("error")
    rows = repo.probe_requests(engine, run_id=report["run_id"])
    ok = rows[rows["ok"].astype(bool)]
    assert len(ok) == len(rows) == 2 * (1 + 3), rows[["level", "seq", "error_kind"]]
    for detail in ok["detail"]:
        # what the server reported per request, kept as SGLang names it
        assert detail["inference_time_s"] > 0 and detail["peak_memory_mb"] > 0
        assert detail["usage"]["image_count"] == 1
    # each level sends builtin prompts 0..3 (one warm-up + 3): four pairs, each kept once
    checks = [d["check"] for d in ok["detail"] if "check" in d]
    assert sorted(c["prompt"] for c in checks) == ["b01", "b02", "b03", "b04"]
    assert all(c["seed"] == 7 for c in checks)
    for c in checks:
        with Image.open(io.BytesIO(base64.b64decode(c["thumb_webp_b64"]))) as thumb:
            assert thumb.format == "WEBP" and max(thumb.size) == images.THUMB_MAX_SIDE
    lv = report["levels"][0]["image"]
    assert lv["steps"] == 8 and lv["reported"] == 3
    # the report's figures are the rows' figures: inference time / steps, MiB -> bytes
    measured = ok[(ok["level"] == 1.0) & ~ok["warmup"].astype(bool)]
    infer = sorted(d["inference_time_s"] for d in measured["detail"])
    assert lv["inference_s"]["p50"] == pytest.approx(infer[1])
    assert lv["inference_s_per_step"]["p50"] == pytest.approx(infer[1] / 8)
    peak = max(d["peak_memory_mb"] for d in measured["detail"])
    assert lv["peak_memory_bytes"]["max"] == pytest.approx(peak * 2**20)
    assert lv["per_image_s"]["p50"] == pytest.approx(report["levels"][0]["e2e_s"]["p50"])


@pytest.mark.slow
def test_fingerprint_names_steps_guidance_resolution_and_seed(image_sim: str) -> None:
    a = asyncio.run(run_sweep(_spec(image_sim))).to_dict()
    b = asyncio.run(run_sweep(SweepSpec(
        url=image_sim, api="images", levels=[1, 2], requests=3, warmup=1,
        workload=WorkloadSpec(image_size="256x256", image_steps=4, image_guidance=4.0, seed=8)))).to_dict()
    assert a["fingerprint"] != b["fingerprint"]
    diff = diff_fingerprints(a["fingerprint_detail"], b["fingerprint_detail"])
    assert diff == ['image.guidance: null -> 4.0', 'image.seed: 7 -> 8',
                    'image.size: "512x512" -> "256x256"', 'image.steps: 8 -> 4']
    assert a["fingerprint_detail"]["model"] == "Qwen/Qwen-Image"


def test_thumbnail_refuses_what_is_not_an_image() -> None:
    entry = images.check_entry(b"not a png", prompt_id="p0", seed=1)
    assert "thumb_webp_b64" not in entry and "not a readable image" in entry["error"]


def test_same_pixels_same_thumbnail_bytes() -> None:
    from simulator.image_png import encode_png, pixels

    raw = encode_png(300, 200, bytes(pixels(300, 200, 3, 'a red fox', 20)))
    assert images.thumbnail(raw) == images.thumbnail(raw)
    assert images.decode_thumb(base64.b64encode(images.thumbnail(raw)).decode()).shape == (171, 256, 3)  # 200 × 256/300 = 170.7, rounded




def _page_sweep(url: str, db: Path, req_fields: dict) -> tuple[object, int, int]:
    """The Benchmarks page's path: the image server configured, start_sweep records the run and
    the intent, the runner's probe lane (a real sweep process) carries it out."""
    from dashboard.services.views import benchmarks as bm
    from runner.sweeps import Sweeps

    engine = open_engine(f"sqlite:///{db}")
    repo.upsert_server(engine, name="demo-image", base_url=url, kind="image", gpu_indices=[0])
    run_id, intent_id = bm.start_sweep(engine, bm.SweepRequest(server="demo-image", **req_fields))
    intent = next(it for it in repo.list_intents(engine, kinds=["probe"]) if it.id == intent_id)
    Sweeps(engine, f"sqlite:///{db}", timeout_s=120).handle(intent)
    return engine, run_id, intent_id


@pytest.mark.slow
def test_the_image_form_sends_the_images_api_and_the_run_has_image_figures(image_sim: str,
                                                                           tmp_path: Path) -> None:
    from dashboard.services.views import benchmarks as bm

    engine, run_id, intent_id = _page_sweep(image_sim, tmp_path / "p.db", dict(
        levels=[1, 2], requests=3, api="images", image_size="512x512", image_steps=8))
    run = repo.get_probe_run(engine, run_id=run_id)
    assert run.status == "done", run.error
    rows = repo.probe_requests(engine, run_id=run_id)
    assert rows["ok"].astype(bool).all() and (rows["http_status"] == 200).all()
    for lv in run.report["levels"]:
        img = lv["image"]
        assert img["steps"] == 8 and img["per_image_s"]["p50"] > 0
        assert img["inference_s_per_step"]["p50"] > 0 and lv["throughput"]["images_per_min"] > 0
    curves = bm.curves(engine, run_ids=[run_id])
    assert {"per_image_s", "images_per_min", "s_per_step"} <= set(curves["metric"])
    intent = next(it for it in repo.list_intents(engine, kinds=["probe"]) if it.id == intent_id)
    assert intent.state == "done"


@pytest.mark.slow
def test_an_llm_sweep_whose_every_request_fails_is_failed_with_the_reason(image_sim: str,
                                                                           tmp_path: Path) -> None:
    # what the page sent to demo-image before: LLM requests, 8 of 8 answered HTTP 404
    engine = open_engine(f"sqlite:///{tmp_path / 'p.db'}")
    report = asyncio.run(run_sweep(SweepSpec(url=image_sim, api="generate", levels=[1], requests=8,
                                             warmup=1), engine=engine)).to_dict()
    why = ("all 8 requests failed: HTTP 404 (the server does not serve /generate; "
           "is it an image server?)")
    assert (report["status"], report["error"]) == ("failed", why)
    run = repo.get_probe_run(engine, run_id=report["run_id"])
    assert (run.status, run.error) == ("failed", why)


def test_an_llm_sweep_of_an_image_server_is_refused_by_the_page(tmp_path: Path) -> None:
    from dashboard.services.views import benchmarks as bm

    engine = open_engine(f"sqlite:///{tmp_path / 'p.db'}")
    repo.upsert_server(engine, name="demo-image", base_url="http://127.0.0.1:9", kind="image")
    with pytest.raises(bm.SweepRequestError, match="image server; sweep it with the images API"):
        bm.start_sweep(engine, bm.SweepRequest(server="demo-image", levels=[1], requests=8))
    assert not repo.list_intents(engine, kinds=["probe"])
