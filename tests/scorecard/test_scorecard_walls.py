"""The "bound by" scorecard figures (scorecard/walls.py): H200 recordings stored
through the GPU collector into a real SQLite file, an image server's probe run (tests/image_seed.py)
laid over them, and the figures through every export."""

from __future__ import annotations

import csv
import io
import json

import pytest
from gpu_seed import T0, store_recording
from image_seed import seed_image

from export.formats import to_csv, to_json, to_markdown
from present.format import fmt_value
from scorecard.build import build_scorecard
from scorecard.compare import compare
from scorecard.gpu_wall import VERDICTS
from scorecard.metric_specs import SPECS_BY_KEY
from scorecard.model import MISSING, NOT_APPLICABLE, OK
from storage import repo

WALL_KEYS = ("gpu_bound_by", "gpu_bandwidth_bound_share", "gpu_compute_bound_share", "gpu_power_bound_share",
             "gpu_achieved_bw_bytes_s", "denoise_bandwidth_share", "denoise_compute_share",
             "image_step_s_what_if")


def _image_card(engine, fixture: str, *, name: str = "img", fingerprint: str = "fp-img"):
    # the probe run's window is [T0 − 1, T0 + 20); DenoisingStage lines at T0 + 0, 2, 4, 6 of 8 s
    # each cover [T0 − 8, T0 + 6]; the recording's GPM samples lie at T0 − 9 .. T0 + 2
    ids = seed_image(engine, name=name, t0=T0, fingerprint=fingerprint)
    store_recording(engine, fixture, t0=T0 - 10, server_id=ids["server_id"])
    return build_scorecard(engine, run_id=ids["run_id"])


def test_image_server_over_a_copy_loop_is_bandwidth_bound_with_a_b300_what_if(engine):
    card = _image_card(engine, "nvml-h200-copy.json")
    f = card.figures
    assert f["gpu_bound_by"].value == VERDICTS.index("bandwidth")
    assert fmt_value(f["gpu_bound_by"].value, "verdict") == "memory bandwidth"
    assert f["gpu_bound_by"].note.startswith("bandwidth (") and "GPU 0: bandwidth" in f["gpu_bound_by"].note
    assert f["gpu_bandwidth_bound_share"].value >= 0.75 and f["gpu_compute_bound_share"].value == 0.0
    assert 3.5e12 < f["gpu_achieved_bw_bytes_s"].value < 4.8e12 and "of the H200's 4.80 TB/s" in f["gpu_achieved_bw_bytes_s"].note
    b, c = f["denoise_bandwidth_share"].value, f["denoise_compute_share"].value
    assert b >= 0.8 and c <= 0.1
    # by hand: 0.4 s/step × (b × 4.8/8 + c × 989/2250 + (1 − b − c))
    want = 0.4 * (b * 4.8 / 8.0 + c * 989 / 2250 + (1 - b - c))
    assert f["image_step_s_what_if"].value == pytest.approx(want)
    assert "B300" in f["image_step_s_what_if"].note and "now 400.0 ms per step" in f["image_step_s_what_if"].note
    assert all(f[k].grade == "none" and SPECS_BY_KEY[k].better == "none" for k in WALL_KEYS)
    assert {SPECS_BY_KEY[k].dimension for k in WALL_KEYS} == {"throughput"}


def test_the_figures_reach_every_export(engine):
    card = _image_card(engine, "nvml-h200-copy.json")
    doc = json.loads(to_json([card]))
    figs = {f["key"]: f for f in doc["scorecards"][0]["figures"]}
    assert figs["gpu_bound_by"]["value"] == 0 and figs["gpu_bound_by"]["note"].startswith("bandwidth")
    assert figs["denoise_bandwidth_share"]["value"] >= 0.8
    rows = {r["key"]: r for r in csv.DictReader(io.StringIO(to_csv([card])))}
    assert rows["gpu_bound_by"]["display"] == "memory bandwidth"
    assert rows["gpu_achieved_bw_bytes_s"]["display"].endswith("TB/s")
    md = to_markdown([card])
    assert "GPU bound by" in md and "memory bandwidth" in md and "Seconds per step on a B300 (what-if)" in md


@pytest.mark.slow
def test_compare_shows_a_changed_verdict_without_a_numeric_delta(engine):
    a = _image_card(engine, "nvml-h200-copy.json", name="copy")
    b = _image_card(engine, "nvml-h200-matmul-gpm.json", name="matmul")
    # the H200's matmul loop ran under its software power cap (1.41-1.46 GHz): bound by power
    assert b.figures["gpu_bound_by"].value == VERDICTS.index("power")
    assert b.figures["denoise_compute_share"].value == 0.0 and "bound by power" in b.figures["gpu_bound_by"].note
    d = next(d for d in compare([a, b]).deltas if d.key == "gpu_bound_by")
    assert d.deltas == [None, None] and d.rel == [None, None] and d.verdicts == ["baseline", "n/a"]


def test_gpu_without_gpm_leaves_the_figures_missing_never_zero(engine):
    card = _image_card(engine, "nvml-h200-matmul.json")  # recorded before GPM reads
    for key in WALL_KEYS:
        fig = card.figures[key]
        assert fig.value is None and fig.status == MISSING, key
        assert "not available on this GPU" in fig.note, key


def test_llm_server_has_the_gpu_figures_and_no_stage_figures(engine):
    srv = repo.upsert_server(engine, name="llm", base_url="http://127.0.0.1:1")
    store_recording(engine, "nvml-h200-matmul-gpm.json", t0=T0, server_id=int(srv.id))
    card = build_scorecard(engine, server="llm", since_s=60, now=T0 + 30)
    assert card.figures["gpu_bound_by"].status == OK and card.figures["gpu_bound_by"].value == VERDICTS.index("power")
    assert "clocks held at 1.4" in card.figures["gpu_bound_by"].note
    assert card.figures["gpu_power_bound_share"].value >= 0.75
    for key in ("denoise_bandwidth_share", "denoise_compute_share", "image_step_s_what_if"):
        assert card.figures[key].status == NOT_APPLICABLE
