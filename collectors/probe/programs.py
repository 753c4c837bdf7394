"""Programs (multi-turn chat, forked prompts): request ordering within a level, and the per-turn /
per-branch report that shows what the radix cache bought.

Ordering: prompt *i* may run `after` another prompt (collectors/probe/workloads.py). Request `seq`
of a level uses prompt `seq % n` in pass `seq // n`; it waits (before its clock starts, so the
wait is never in its latency) until request `pass * n + after` of the same level has finished.
Dependencies always have a smaller seq, and the pacer starts seqs in order, so every awaited
request has already started: no deadlock. A multi-turn request's history is the conversation its
dependency ended with, the server's reply included.

Report rows (`turns` / `branches`), over successful measured requests:

| key | meaning |
|---|---|
| turn / branch | 1-based step |
| requests | successful measured requests of that step |
| ttft_p50_s, ttft_p99_s | TTFT percentiles (numpy, linear) |
| cache_hit_rate | Σ cached_tokens / Σ prompt tokens, from the server's per-request `cached_tokens` (`meta_info`, or `usage.prompt_tokens_details` with --enable-cache-report); None when the server reported none |
| input_tokens | mean prompt tokens per request (the server's count) |
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from collectors.probe.client import RequestRecord
from collectors.probe.workloads import Prompt


class Dependencies:
    """One level's program state: finished requests and multi-turn histories, by seq."""

    def __init__(self, prompts: list[Prompt]) -> None:
        self.prompts = prompts
        self._events: dict[int, asyncio.Event] = {}
        self.history: dict[int, list[dict[str, str]]] = {}

    def dependency(self, seq: int) -> int | None:
        """The seq request `seq` runs after, or None."""
        n = len(self.prompts)
        after = self.prompts[seq % n].after
        return None if after is None else (seq // n) * n + after

    def _event(self, seq: int) -> asyncio.Event:
        return self._events.setdefault(seq, asyncio.Event())

    async def wait(self, seq: int) -> None:
        await self._event(seq).wait()

    def finish(self, seq: int, history: list[dict[str, str]] | None) -> None:
        if history is not None:
            self.history[seq] = history
        self._event(seq).set()


def _row(key: str, step: int, recs: list[RequestRecord]) -> dict[str, Any]:
    ttft = [r.ttft_s for r in recs if r.ttft_s is not None]
    p50, p99 = (float(v) for v in np.percentile(ttft, [50, 99])) if ttft else (None, None)
    cached = [(r.tokens_cached, r.tokens_in or 0) for r in recs if r.tokens_cached is not None]
    total_in = sum(n for _, n in cached)
    tokens_in = [r.tokens_in for r in recs if r.tokens_in is not None]
    return {
        key: step, "requests": len(recs), "ttft_p50_s": p50, "ttft_p99_s": p99,
        "cache_hit_rate": sum(c for c, _ in cached) / total_in if total_in else None,
        "input_tokens": round(sum(tokens_in) / len(tokens_in), 1) if tokens_in else None,
    }


def step_rows(records: list[RequestRecord], key: str) -> list[dict[str, Any]]:
    """Per-step rows (`key` "turn" or "branch") of successful measured requests whose detail
    carries that step."""
    by_step: dict[int, list[RequestRecord]] = {}
    for r in records:
        step = (r.detail or {}).get(key)
        if r.ok and not r.warmup and isinstance(step, int):
            by_step.setdefault(step, []).append(r)
    return [_row(key, s, by_step[s]) for s in sorted(by_step)]


def branch_summary(records: list[RequestRecord]) -> dict[str, Any]:
    """Hit rate of branch 1 against branches 2..K pooled (what forking bought)."""
    first = [r for r in records if r.ok and not r.warmup and (r.detail or {}).get("branch") == 1]
    later = [r for r in records if r.ok and not r.warmup and ((r.detail or {}).get("branch") or 0) > 1]
    return {"first": _row("branch", 1, first), "later": _row("branch", 2, later) | {"branch": "2+"}}
