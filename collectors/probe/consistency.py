"""Output consistency: does a run still produce the same outputs as a baseline run?

Both runs must send the same prompts (same prompt-set hash) at temperature 0. Request `seq` of any
level uses prompt `seq % n_prompts` (workloads.py), so each successful request maps to a prompt.
The baseline's answer for a prompt is its most frequent output hash; a request of the new run
"differs" when its output hash is not that answer. Prompts the baseline never answered are not
compared. Greedy decoding on GPUs is not bit-exact under batching, so a few differences at high
concurrency can be benign; a jump after a profile change is the signal.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

#: (seq, ok, output_hash) of one request
Row = tuple[int, bool, str | None]


def reference_outputs(rows: Iterable[Row], n_prompts: int) -> dict[int, str]:
    by_prompt: dict[int, Counter[str]] = defaultdict(Counter)
    for seq, ok, h in rows:
        if ok and h:
            by_prompt[seq % n_prompts][h] += 1
    return {p: c.most_common(1)[0][0] for p, c in by_prompt.items()}


def compare_outputs(baseline: Iterable[Row], current: Iterable[Row], n_prompts: int) -> dict[str, Any]:
    """{"compared", "differing", "prompts_compared", "prompts_differing"} (request / prompt counts)."""
    if n_prompts < 1:
        raise ValueError("n_prompts must be >= 1.")
    ref = reference_outputs(baseline, n_prompts)
    compared = differing = 0
    prompts_seen: set[int] = set()
    prompts_diff: set[int] = set()
    for seq, ok, h in current:
        p = seq % n_prompts
        if not ok or not h or p not in ref:
            continue
        compared += 1
        prompts_seen.add(p)
        if h != ref[p]:
            differing += 1
            prompts_diff.add(p)
    return {"compared": compared, "differing": differing,
            "prompts_compared": len(prompts_seen), "prompts_differing": len(prompts_diff)}


def consistency_warnings(baseline_detail: dict[str, Any] | None, detail: dict[str, Any]) -> list[str]:
    """Why a comparison may be meaningless (different prompts, sampling not greedy)."""
    out = []
    if (baseline_detail or {}).get("prompts_hash") != detail.get("prompts_hash"):
        out.append("the baseline run sent different prompts")
    for name, d in (("baseline", baseline_detail or {}), ("this run", detail)):
        temp = (d.get("sampling") or {}).get("temperature")
        if temp not in (0, 0.0):
            out.append(f"{name} is not at temperature 0 (temperature={temp})")
    return out
