"""Compare's image check: did two runs of one workload draw the same pictures?

For every (prompt, seed) pair both probe runs kept a thumbnail of (collectors/probe/images.py:
the first 8 prompts of the workload, ≤ 256 px, lossless WebP in ProbeRequest.detail["check"]),
PSNR and SSIM of run B's thumbnail against run A's, and a verdict against `compare.ssim_min`:

- PSNR (dB) = 10·log10(255² / MSE) over every RGB value; identical images read `inf`.
- SSIM: Wang et al. (2004) with a 7×7 uniform window, sample covariance, K1 = 0.01,
  K2 = 0.03, data range 255, averaged over the three channels and over the window positions
  that lie inside the image (scikit-image's `structural_similarity` defaults, written in numpy).
- verdict: `same picture` when SSIM ≥ ssim_min, else `different picture`; `missing` when one
  run has no thumbnail for the pair, `not comparable` when the sizes differ.

Runs of different workloads (fingerprints) are refused with what differs: a 30-step image
against a 50-step one is different by design. Cross-check a pair with scikit-image:
`structural_similarity(a, b, channel_axis=2, data_range=255)` on the decoded thumbnails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine

from collectors.probe.images import decode_thumb
from storage import repo
from storage.errors import RequestError

SSIM_WIN = 7
K1, K2, DATA_RANGE = 0.01, 0.03, 255.0
SAME, DIFFERENT, MISSING, NOT_COMPARABLE = ("same picture", "different picture", "missing",
                                            "not comparable")


class ImageCheckError(RequestError, ValueError):
    """The two runs cannot be checked against each other; the message says why and what to do."""


@dataclass
class PairCheck:
    prompt: str
    seed: int | None
    psnr_db: float | None  # inf for identical pixels
    ssim: float | None
    verdict: str
    thumb_a: str | None  # base64 WebP
    thumb_b: str | None


@dataclass
class ImageCheck:
    run_a: int
    run_b: int
    ssim_min: float
    pairs: list[PairCheck] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """`same pictures` / `different pictures (k of n)` / `no pairs to compare`."""
        judged = [p for p in self.pairs if p.verdict in (SAME, DIFFERENT)]
        if not judged:
            return "no pairs to compare"
        bad = sum(p.verdict == DIFFERENT for p in judged)
        return "same pictures" if not bad else f"different pictures ({bad} of {len(judged)})"

    @property
    def min_ssim(self) -> float | None:
        vals = [p.ssim for p in self.pairs if p.ssim is not None]
        return min(vals) if vals else None


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(DATA_RANGE**2 / mse)


def _box_mean(x: np.ndarray, win: int) -> np.ndarray:
    """Mean of every win×win window lying inside x (valid positions), by summed-area table."""
    s = np.pad(x, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    tot = s[win:, win:] - s[:-win, win:] - s[win:, :-win] + s[:-win, :-win]
    return tot / (win * win)


def ssim_channel(a: np.ndarray, b: np.ndarray, win: int = SSIM_WIN) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    n = win * win
    cov_norm = n / (n - 1)  # sample covariance
    ux, uy = _box_mean(a, win), _box_mean(b, win)
    vx = cov_norm * (_box_mean(a * a, win) - ux * ux)
    vy = cov_norm * (_box_mean(b * b, win) - uy * uy)
    vxy = cov_norm * (_box_mean(a * b, win) - ux * uy)
    c1, c2 = (K1 * DATA_RANGE) ** 2, (K2 * DATA_RANGE) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux**2 + uy**2 + c1) * (vx + vy + c2))
    return float(s.mean())


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two (H, W, 3) uint8 images of one size (see the module docstring)."""
    if a.shape != b.shape:
        raise ValueError(f"images differ in size: {a.shape} vs {b.shape}")
    if min(a.shape[:2]) < SSIM_WIN:
        raise ValueError(f"images smaller than the {SSIM_WIN}-pixel SSIM window")
    return float(np.mean([ssim_channel(a[..., c], b[..., c]) for c in range(a.shape[2])]))


def _thumbs(engine: Engine, run_id: int) -> dict[tuple[str, Any], str]:
    df = repo.probe_requests(engine, run_id=run_id)
    out: dict[tuple[str, Any], str] = {}
    for d in df["detail"] if "detail" in df else []:
        chk = d.get("check") if isinstance(d, dict) else None
        if isinstance(chk, dict) and chk.get("thumb_webp_b64"):
            out.setdefault((str(chk.get("prompt")), chk.get("seed")), chk["thumb_webp_b64"])
    return out


def check_pair(key: tuple[str, Any], a: str | None, b: str | None, ssim_min: float) -> PairCheck:
    pair = PairCheck(prompt=key[0], seed=key[1], psnr_db=None, ssim=None, verdict=MISSING,
                     thumb_a=a, thumb_b=b)
    if a is None or b is None:
        return pair
    ia, ib = decode_thumb(a), decode_thumb(b)
    if ia.shape != ib.shape or min(ia.shape[:2]) < SSIM_WIN:
        pair.verdict = NOT_COMPARABLE
        return pair
    pair.psnr_db, pair.ssim = psnr(ia, ib), ssim(ia, ib)
    pair.verdict = SAME if pair.ssim >= ssim_min else DIFFERENT
    return pair


def image_check(engine: Engine, *, run_a: int, run_b: int, ssim_min: float) -> ImageCheck:
    """Pair the two runs' thumbnails by (prompt, seed) and judge each pair (run A = baseline)."""
    from collectors.probe.fingerprint import diff_fingerprints

    ra, rb = (repo.get_probe_run(engine, run_id=r) for r in (run_a, run_b))
    if ra is None or rb is None:
        missing = run_a if ra is None else run_b
        raise ImageCheckError(f"Probe run #{missing} does not exist; pick finished image runs.")
    runs = (ra, rb)
    if any(r.api != "images" for r in runs):
        raise ImageCheckError("The image check needs two probe runs of the images API.")
    if runs[0].fingerprint != runs[1].fingerprint:
        diff = diff_fingerprints(runs[0].fingerprint_detail, runs[1].fingerprint_detail)
        raise ImageCheckError("The two runs sent different workloads, so their pictures differ "
                              "by design (" + ("; ".join(diff[:4]) or "fingerprints differ")
                              + "); run the same sweep against both profiles.")
    ta, tb = _thumbs(engine, run_a), _thumbs(engine, run_b)
    keys = sorted(set(ta) | set(tb), key=lambda k: (k[0], str(k[1])))
    return ImageCheck(run_a=run_a, run_b=run_b, ssim_min=ssim_min,
                      pairs=[check_pair(k, ta.get(k), tb.get(k), ssim_min) for k in keys])
