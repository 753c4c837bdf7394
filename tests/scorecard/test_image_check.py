"""Compare's image check: PSNR / SSIM arithmetic and the pairing of two seeded runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from image_seed import DETAIL_IMG, seed_image

from scorecard import image_check as ic


def test_psnr_by_hand():
    a = np.zeros((8, 8, 3), np.uint8)
    b = a.copy()
    assert ic.psnr(a, b) == math.inf
    b[...] = 5  # MSE 25 -> 10·log10(65025 / 25) = 34.15 dB
    assert ic.psnr(a, b) == pytest.approx(10 * math.log10(255**2 / 25))


def test_ssim_identical_is_one_and_noise_lowers_it():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (32, 32, 3)).astype(np.uint8)
    assert ic.ssim(a, a) == pytest.approx(1.0)
    noisy = np.clip(a + rng.normal(0, 40, a.shape), 0, 255).astype(np.uint8)
    assert ic.ssim(a, noisy) < 0.9


def test_ssim_of_a_constant_shift_by_hand():
    # flat images, values 100 and 110: variances 0, so SSIM = (2·100·110 + C1) / (100² + 110² + C1)
    a = np.full((10, 10, 3), 100, np.uint8)
    b = np.full((10, 10, 3), 110, np.uint8)
    c1 = (0.01 * 255) ** 2
    assert ic.ssim(a, b) == pytest.approx((2 * 100 * 110 + c1) / (100**2 + 110**2 + c1))


@pytest.mark.slow
def test_two_runs_pair_by_prompt_and_seed(engine):
    a = seed_image(engine, name="img", profile="demo-image")
    b = seed_image(engine, name="img", profile="demo-image-fast", noise=2.0, t0=1_700_001_000.0)
    same = ic.image_check(engine, run_a=a["run_id"], run_b=a["run_id"], ssim_min=0.95)
    assert same.verdict == "same pictures" and same.min_ssim == pytest.approx(1.0)
    chk = ic.image_check(engine, run_a=a["run_id"], run_b=b["run_id"], ssim_min=0.9)
    assert [p.prompt for p in chk.pairs] == ["b01", "b02", "b03", "b04"]
    # Gaussian noise of σ = 2 grey levels: MSE ≈ 4 -> PSNR ≈ 10·log10(65025 / 4) = 42.1 dB; SSIM
    # stays high but below 1 (how far below depends on the picture's local variance)
    assert all(p.verdict == ic.SAME and 0.9 <= p.ssim < 0.999 for p in chk.pairs)
    assert all(41 < p.psnr_db < 44 for p in chk.pairs)
    strict = ic.image_check(engine, run_a=a["run_id"], run_b=b["run_id"], ssim_min=0.999)
    assert strict.verdict == "different pictures (4 of 4)"


@pytest.mark.slow
def test_different_workloads_are_refused(engine):
    a = seed_image(engine, name="img")
    other = {**DETAIL_IMG, "image": {**DETAIL_IMG["image"], "steps": 50}}
    b = seed_image(engine, name="img2", fingerprint="fp-50", detail=other)
    with pytest.raises(ic.ImageCheckError, match=r"image.steps: 20 -> 50"):
        ic.image_check(engine, run_a=a["run_id"], run_b=b["run_id"], ssim_min=0.95)


@pytest.mark.slow
def test_headline_of_an_image_ab(engine):
    from scorecard.build import build_scorecard
    from scorecard.compare import compare, headline

    a = seed_image(engine, name="img", profile="demo-image")
    # the fast profile: every request 5.8 s instead of 10 s, peak 3 GiB higher
    b = seed_image(engine, name="img", profile="demo-image-fast", e2e=5.8,
                   peak_mb=60_000 + 3 * 1024, t0=1_700_001_000.0)
    cards = [build_scorecard(engine, run_id=r["run_id"]) for r in (a, b)]
    line = headline(compare(cards), "image")
    # p50 10 -> 5.8 s: −42 %; images/min 4/13 -> 4/(3 + 5.8) per s: +48 %; $/image the inverse
    # at the highest level both runs measured, named
    assert line.startswith("at concurrency 2: p50 −42 %, p99 −42 %, images/min +48 %, $/image −32 %")
    assert "peak memory +3.0 GiB" in line
