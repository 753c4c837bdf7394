"""Pure matching of the diffusion server's per-request log lines.

SGLang Diffusion (``python/sglang/multimodal_gen``, 0.5.5+) logs each request's progress with
the ``[MM-DD HH:MM:SS] `` prefix (log_parse.py reads it); the message forms, as written by the
source, are matched here and returned as ``(start, kind, fields)`` — `start` is where the
message begins in the line, so the prefix in front of it dates the record:

| kind | fields | form (values as the source formats them) | source |
|---|---|---|---|
| diffusion_stage | stage, seconds | ``[DenoisingStage] finished in 35.3833 seconds`` (%.4f) | runtime/utils/perf_logger.py StageProfiler |
| diffusion_step | stage, avg_step_s | ``[DenoisingStage] average time per step: 0.7076 seconds`` | runtime/pipelines_core/stages/denoising.py |
| diffusion_request | seconds | ``Pixel data generated successfully in 36.82 seconds`` (%.2f, value in green) | runtime/utils/logging_utils.py log_generation_timer |
| diffusion_batch | outputs, seconds | ``Completed batch processing. Generated 1 outputs in 36.82 seconds`` | logging_utils.py log_batch_completion |
| diffusion_warmed_up | seconds | ``Warmed-up request processed in 36.82 seconds (with warmup excluded)`` | entrypoints DiffGenerator summary (``--warmup``) |
| diffusion_memory | peak_gb, remaining_gb (+ peak_allocated_gb, pool_overhead_gb) | ``Peak GPU memory: 25.81 GB, Remaining GPU memory at peak: 19.18 GB. Components ...``; newer: ``Peak GPU memory: X GB, Peak allocated: A GB, Memory pool overhead: O GB (P%), Remaining GPU memory at peak: Y GB. ...`` | runtime/managers/gpu_worker.py |
| diffusion_memory | peak_mb | ``Peak memory usage: 26426.31 MB`` (older form) | |
| diffusion_batch_memory | max_peak_mb, avg_peak_mb | ``Memory usage - Max peak: 26426.31 MB, Avg peak: 26426.31 MB`` | DiffGenerator summary |

Stage names are kept as written (any ``[Name]`` that is an identifier), so stages not seen yet
still parse. ``[Stage] started...`` lines and tqdm bars give nothing. GB/MB are what SGLang
prints: bytes / 1024**3 and bytes / 1024**2 (GiB, MiB). Warm-up requests log no stage lines
(``req.suppress_logs``); nothing in a line marks a request as warm-up, so warm-up is told apart
only on /metrics (``is_warmup``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

#: Record kinds produced here, in the order of the table above.
DIFFUSION_KINDS = ("diffusion_stage", "diffusion_step", "diffusion_request", "diffusion_batch",
                   "diffusion_warmed_up", "diffusion_memory", "diffusion_batch_memory")
#: Substrings that must be in a line for it to give a diffusion record (prefilter words).
DIFFUSION_WORDS = ("finished in", "time per step", "Pixel data generated",
                   "Completed batch processing", "Warmed-up request", "Peak GPU memory",
                   "Peak memory usage", "Max peak")

_NUM = r"(-?[0-9]{1,20}(?:\.[0-9]{1,20})?)"
_STAGE = r"\[([A-Za-z_][A-Za-z0-9_.:-]{0,99})\] "
_STAGE_DONE = re.compile(_STAGE + rf"finished in {_NUM} seconds")
_STEP = re.compile(_STAGE + rf"average time per step: {_NUM} seconds")
_REQUEST = re.compile(rf"Pixel data generated successfully in {_NUM} seconds")
_BATCH = re.compile(rf"Completed batch processing\. Generated ([0-9]{{1,9}}) outputs in {_NUM} seconds")
_WARMED = re.compile(rf"Warmed-up request processed in {_NUM} seconds")
_PEAK_GPU = re.compile(
    rf"Peak GPU memory: {_NUM} GB, (?:Peak allocated: {_NUM} GB, "
    rf"Memory pool overhead: {_NUM} GB \([^)]{{0,20}}\), )?Remaining GPU memory at peak: {_NUM} GB"
)
_PEAK_MB = re.compile(rf"Peak memory usage: {_NUM} MB")
_BATCH_MEM = re.compile(rf"Memory usage - Max peak: {_NUM} MB, Avg peak: {_NUM} MB")


def _memory(m: re.Match[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {"peak_gb": float(m[1]), "remaining_gb": float(m[4])}
    if m[2] is not None:
        fields["peak_allocated_gb"] = float(m[2])
        fields["pool_overhead_gb"] = float(m[3])
    return fields


#: (word that must be present, regex, kind, fields from the match), tried in order
_FORMS: tuple[tuple[str, re.Pattern[str], str, Callable[[re.Match[str]], dict[str, Any]]], ...] = (
    ("finished in", _STAGE_DONE, "diffusion_stage",
     lambda m: {"stage": m[1], "seconds": float(m[2])}),
    ("time per step", _STEP, "diffusion_step",
     lambda m: {"stage": m[1], "avg_step_s": float(m[2])}),
    ("Pixel data", _REQUEST, "diffusion_request", lambda m: {"seconds": float(m[1])}),
    ("Completed batch", _BATCH, "diffusion_batch",
     lambda m: {"outputs": int(m[1]), "seconds": float(m[2])}),
    ("Warmed-up", _WARMED, "diffusion_warmed_up", lambda m: {"seconds": float(m[1])}),
    ("Peak GPU memory", _PEAK_GPU, "diffusion_memory", _memory),
    ("Peak memory usage", _PEAK_MB, "diffusion_memory", lambda m: {"peak_mb": float(m[1])}),
    ("Max peak", _BATCH_MEM, "diffusion_batch_memory",
     lambda m: {"max_peak_mb": float(m[1]), "avg_peak_mb": float(m[2])}),
)


def match_diffusion(text: str) -> tuple[int, str, dict[str, Any]] | None:
    """(message start, kind, fields) of a cleaned line, or None. Never raises."""
    for word, rx, kind, build in _FORMS:
        if word in text:
            m = rx.search(text)
            if m is not None:
                return m.start(), kind, build(m)
    return None
