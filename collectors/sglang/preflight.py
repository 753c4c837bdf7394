"""What launching/preflight.py needs to know of SGLang (the Engine's `preflight`): the CUDA of
the torch wheel each SGLang version installs, the oldest card it runs on and what it says when it
refuses one, its default static memory fraction and what it says when the pool leaves no KV cache.
"""

from __future__ import annotations

from collectors.base import Preflight

PREFLIGHT = Preflight(
    # (SGLang version from, CUDA of the torch wheel it installs from PyPI) — newest first.
    # 0.5.x pins torch 2.8/2.9 (cu128), 0.4.7-0.4.10 torch 2.7 (cu126), 0.4.0-0.4.6 torch 2.5/2.6 (cu124).
    wheel_cuda=(
        ((0, 5, 0), (12, 8)),
        ((0, 4, 7), (12, 6)),
        ((0, 4, 0), (12, 4)),
        ((0, 0, 0), (12, 1)),
    ),
    min_sm=(7, 5),
    old_card="SGLang only supports sm75 and above",  # SGLang refuses older cards with these words
    default_mem_fraction=0.85,  # SGLang picks it from the GPU's memory and tp; about this on 80-141 GB cards
    no_kv_cache="'Not enough memory. Please try to increase --mem-fraction-static'",
)
