"""Deterministic PNGs for the image server: same seed, prompt, size and steps -> same bytes.

The picture is a smooth seed-dependent pattern (three sine fields per channel) so a person sees
an image, and PSNR/SSIM behave as on real outputs: `perturb` adds a small deterministic noise
whose amplitude says how far a faster path drifts (torch.compile: +-1 level on a sparse set of
pixels, PSNR > 45 dB; a step cache: +-6 levels, ~30-35 dB; fewer steps: grows with the share cut).
"""

from __future__ import annotations

import math
import random
import struct
import zlib


def _chunk(tag: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + tag + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))


def pixels(width: int, height: int, seed: int, prompt: str, steps: int) -> bytearray:
    """RGB bytes, row-major; depends only on the arguments."""
    rnd = random.Random(f"{seed}|{prompt}|{steps}")
    waves = [(rnd.uniform(0.5, 3.0), rnd.uniform(0.5, 3.0), rnd.uniform(0, 2 * math.pi))
             for _ in range(9)]
    out = bytearray(3 * width * height)
    for y in range(height):
        v = y / max(height - 1, 1)
        for x in range(width):
            u = x / max(width - 1, 1)
            for c in range(3):
                acc = 0.0
                for fx, fy, ph in waves[3 * c:3 * c + 3]:
                    acc += math.sin(2 * math.pi * (fx * u + fy * v) + ph)
                out[3 * (y * width + x) + c] = int(127.5 + 42 * acc)  # |acc| <= 3
    return out


def perturb(rgb: bytearray, seed: int, amplitude: int, share: float) -> bytearray:
    """Add +-amplitude to a deterministic `share` of the samples (a faster path's drift)."""
    if amplitude <= 0 or share <= 0:
        return rgb
    rnd = random.Random(seed * 7919 + amplitude)
    out = bytearray(rgb)
    for i in range(len(out)):
        if rnd.random() < share:
            out[i] = max(0, min(255, out[i] + rnd.randint(-amplitude, amplitude)))
    return out


def encode_png(width: int, height: int, rgb: bytes) -> bytes:
    """A real 8-bit RGB PNG (filter None on every row)."""
    stride = 3 * width
    raw = b"".join(b"\x00" + rgb[y * stride:(y + 1) * stride] for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw, 6))
            + _chunk(b"IEND", b""))
