"""Thumbnails of the images a sweep produced, kept for the output check (Compare's image check).

The first successful answer of each of the first CHECK_PROMPTS prompts of a run is decoded and
shrunk to at most THUMB_MAX_SIDE pixels a side, encoded as lossless WebP (deterministic: the same
pixels give the same bytes), and stored base64 in that request's ProbeRequest.detail under
`check`: `{"prompt": <prompt id>, "seed": <workload seed>, "thumb_webp_b64": ...}`. Two runs of
the same workload send the same (prompt, seed) pairs, so their thumbnails pair up by prompt id.

Bounds: at most CHECK_PROMPTS thumbnails per run, each at most MAX_THUMB_BYTES (a larger one is
dropped with a note), so a run carries well under 1 MiB of images; they live and die with the
run's request rows (retention deletes both together). Images over MAX_DECODE_PIXELS are refused
before decoding (Pillow's decompression-bomb guard, tightened).
"""

from __future__ import annotations

import base64
import io
from typing import Any

from storage.errors import CollectorError

CHECK_PROMPTS = 8
THUMB_MAX_SIDE = 256
MAX_THUMB_BYTES = 160 << 10
MAX_DECODE_PIXELS = 4096 * 4096


class ImageDecodeError(CollectorError, ValueError):
    """The server's image bytes could not be read as an image."""


def thumbnail(raw: bytes, max_side: int = THUMB_MAX_SIDE) -> bytes:
    """Lossless WebP of `raw` (any format Pillow reads) shrunk to fit max_side × max_side."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(raw)) as img:
            if img.width * img.height > MAX_DECODE_PIXELS:
                raise ImageDecodeError(f"image of {img.width}×{img.height} px is over the "
                                       f"{MAX_DECODE_PIXELS} px decode limit")
            rgb = img.convert("RGB")
    except (OSError, Image.DecompressionBombError) as exc:
        raise ImageDecodeError(f"not a readable image ({exc})") from None
    rgb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    rgb.save(out, format="WEBP", lossless=True, quality=100, method=4, exact=True)
    return out.getvalue()


def check_entry(raw: bytes, *, prompt_id: str, seed: int | None) -> dict[str, Any]:
    """The `check` value of a request's detail: the pair's key and its thumbnail (or why not)."""
    entry: dict[str, Any] = {"prompt": prompt_id, "seed": seed}
    try:
        thumb = thumbnail(raw)
    except ImageDecodeError as exc:
        entry["error"] = str(exc)
        return entry
    if len(thumb) > MAX_THUMB_BYTES:
        entry["error"] = f"thumbnail of {len(thumb)} bytes is over the {MAX_THUMB_BYTES} byte cap"
        return entry
    entry["thumb_webp_b64"] = base64.b64encode(thumb).decode("ascii")
    return entry


def decode_thumb(b64: str) -> Any:
    """A stored thumbnail as an RGB uint8 numpy array (H, W, 3)."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(b64))) as img:
        return np.asarray(img.convert("RGB"), dtype=np.uint8)
