"""Image-server scorecard figures from a seeded database (tests/image_seed.py), by hand."""

from __future__ import annotations

import pytest
from image_seed import seed_image

from scorecard.build import build_scorecard
from scorecard.image import stage_group, stage_shares
from scorecard.metric_specs import METRIC_SPECS
from scorecard.model import NOT_APPLICABLE


@pytest.fixture
def card(engine):
    ids = seed_image(engine)
    return build_scorecard(engine, run_id=ids["run_id"])


def v(card, key):
    return card.figures[key].value


def test_every_spec_is_filled_for_an_image_server(card):
    assert set(card.figures) == {s.key for s in METRIC_SPECS}
    assert card.figures["ttft_p50_s"].status == NOT_APPLICABLE


def test_step_time_and_steps(card):
    assert v(card, "image_step_s") == pytest.approx(0.4)  # the log's average time per step
    assert "log" in card.figures["image_step_s"].note
    assert v(card, "image_steps") == 20


def test_stage_shares_from_the_log(card):
    # per request 10 s of stages: encode 0.5, denoise 8, decode 1, other 0.3 + 0.2
    assert v(card, "stage_share_encode") == pytest.approx(0.05)
    assert v(card, "stage_share_denoise") == pytest.approx(0.80)
    assert v(card, "stage_share_decode") == pytest.approx(0.10)
    assert v(card, "stage_share_other") == pytest.approx(0.05)
    assert "scheduler log" in card.figures["stage_share_denoise"].note


def test_peak_memory_headroom_timeouts_and_cost(card):
    assert v(card, "peak_mem_bytes") == pytest.approx(60_000 * 2**20)  # probe detail wins
    assert v(card, "mem_headroom_bytes") == pytest.approx(12 * 2**30)  # min remaining (15 - 3)
    assert v(card, "timeout_count") == 1
    # headline level 2: 4 images, starts 4..7 s, each 10 s -> window 13 s -> 18.46 img/min
    assert v(card, "images_per_min") == pytest.approx(4 / 13 * 60)
    assert v(card, "usd_per_image") == pytest.approx(9.0 / 60 / (4 / 13 * 60))
    assert v(card, "image_p50_s") == pytest.approx(10.0)
    assert v(card, "queue_max") == 3  # metrics.diffusion_num_queue_reqs


def test_stage_grouping_keeps_unknown_stages():
    assert stage_group("QwenImageTextEncodingStage") == "encode"
    assert stage_group("CacheDiTStage") == "other"
    assert stage_shares({}) is None
    assert stage_shares({"DenoisingStage": 3.0, "NewStage": 1.0}) == {
        "encode": 0.0, "denoise": 0.75, "decode": 0.0, "other": 0.25}


def _pix_group(stage: str) -> str:
    return {"prompt": "encode", "loop": "denoise", "vae": "decode"}.get(stage, "other")


def test_an_image_engine_names_its_own_stages(engine, monkeypatch):
    """The stage names and their grouping are the server's engine's (Engine.image_stages), not
    the bundled engine's: a made-up engine calls its stages prompt / loop / vae and exports the
    per-step pseudo-stage loop_step."""
    import dataclasses

    import toy_engine

    from collectors.base import ImageStages
    from collectors.engines import ENGINES

    pix = dataclasses.replace(toy_engine.ENGINE, name="pix", image_stages=ImageStages(
        denoise="loop", step="loop_step", group=_pix_group))
    monkeypatch.setitem(ENGINES, "pix", pix)
    from storage import repo

    srv = repo.upsert_server(engine, name="pix1", base_url="http://127.0.0.1:2", kind="image", engine="pix")
    t0 = 1_700_000_000.0
    samples = [{"ts": t0 + i, "server_id": srv.id, "source": "log", "value": v,
                "metric": f"log.diffusion.stage_s.{stage}"}
               for i in range(3) for stage, v in (("prompt", 1.0), ("loop", 6.0), ("vae", 3.0))]
    samples += [{"ts": t0 + i, "server_id": srv.id, "source": "metrics", "value": 0.3,
                 "metric": "metrics.diffusion_stage_p50_s.loop_step"} for i in range(3)]
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=samples)
    card = build_scorecard(engine, server="pix1", since_s=600, now=t0 + 60)
    # per request 10 s: prompt 1 (encode), loop 6 (denoise), vae 3 (decode)
    assert v(card, "stage_share_encode") == pytest.approx(0.1)
    assert v(card, "stage_share_denoise") == pytest.approx(0.6)
    assert v(card, "stage_share_decode") == pytest.approx(0.3)
    assert v(card, "image_step_s") == pytest.approx(0.3)
    assert card.figures["image_step_s"].note == "/metrics loop_step p50 (per-step histogram)"
    assert stage_group("loop", "pix") == "denoise" and stage_group("DenoisingStage", "pix") == "other"
    assert stage_group("loop", "nosuch") == "other"  # an engine not registered names no stages
