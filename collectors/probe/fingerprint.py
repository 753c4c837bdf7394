"""Workload fingerprint: a stable hash of what a sweep sent, plus the detail behind it.

Two scorecards or sweeps are comparable only when their fingerprints match; when they do not,
`diff_fingerprints(a_detail, b_detail)` says exactly what differs ("levels: [1, 4] -> [1, 8]").

The detail holds: API, model, prompt set name and content hash, input-length distribution
(words / characters), output length (max_new_tokens, ignore_eos), sampling params, load mode,
levels, measured and warm-up requests per level, the structured-output kind and schema / pattern
hash, a program's turns or branches, and for image APIs the resolution, steps,
guidance, images per request and seed (`image`; with `model` at the top), so a 50-step run is
never compared with a 30-step one silently. Steps or guidance left to the server read `null`:
"the server's default", which two runs share only when both left it.
The server URL is not part of it: the same workload against two servers has one fingerprint.
The hash is the first 16 hex digits of SHA-256 over the canonical JSON of the detail.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from collectors.probe.structured import spec_hash
from collectors.probe.workloads import (
    BUILTIN_SETS,
    Prompt,
    WorkloadSpec,
    length_summary,
    prompts_hash,
)


def fingerprint_detail(
    *,
    api: str,
    model: str | None,
    workload: WorkloadSpec,
    prompts: list[Prompt],
    mode: str,
    levels: list[float],
    requests_per_level: list[int],
    warmup_per_level: list[int],
) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "api": api,
        "model": model,
        "prompt_set": workload.prompt_set if workload.prompt_set in BUILTIN_SETS else "file",
        "prompts_hash": prompts_hash(prompts),
        "input_lengths": length_summary(prompts),
        "mode": mode,
        "levels": [float(v) if mode == "rate" else int(v) for v in levels],
        "requests_per_level": list(requests_per_level),
        "warmup_per_level": list(warmup_per_level),
    }
    if api == "images":
        detail["image"] = {"size": workload.image_size, "steps": workload.image_steps,
                           "guidance": workload.image_guidance,
                           "n": workload.images_per_request, "seed": workload.seed}
    else:
        detail["max_new_tokens"] = workload.max_new_tokens
        detail["ignore_eos"] = workload.ignore_eos
        detail["sampling"] = workload.sampling_params()
    if workload.extra:
        detail["extra"] = workload.extra
    if workload.structured:
        detail["structured"] = {"kind": workload.structured,
                                "spec_hash": spec_hash(workload.structured, workload.structured_spec)}
    if workload.prompt_set == "multi-turn":
        detail["program"] = {"turns": workload.turns, "conversations": workload.conversations}
    elif workload.prompt_set == "fork":
        detail["program"] = {"branches": workload.branches, "conversations": workload.conversations}
    return detail


def fingerprint_hash(detail: dict[str, Any]) -> str:
    canon = json.dumps(detail, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


_ABSENT = object()


def diff_fingerprints(a_detail: dict[str, Any] | None, b_detail: dict[str, Any] | None) -> list[str]:
    """One line per differing field, dotted path first ("sampling.temperature: 0.0 -> 0.7");
    empty when the workloads are the same."""
    fa, fb = _flatten(a_detail or {}), _flatten(b_detail or {})
    out = []
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key, _ABSENT), fb.get(key, _ABSENT)
        if va != vb:
            sa = "(absent)" if va is _ABSENT else json.dumps(va)
            sb = "(absent)" if vb is _ABSENT else json.dumps(vb)
            out.append(f"{key}: {sa} -> {sb}")
    return out
