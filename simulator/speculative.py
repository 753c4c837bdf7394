"""Speculative decoding as SGLang 0.5.23 runs it (`--speculative-algorithm`), on the model clock.

A decode step with speculation drafts `num_steps` tokens a request (a chain: EAGLE's one-layer
draft head, a standalone draft model, or NGRAM's lookup in the request's own context), then one
target forward verifies `num_draft_tokens` positions a request and keeps the longest accepted
prefix plus the target's own next token (the bonus). So a step emits 1 + accepted tokens a request
in one go (one stream chunk), and costs a verify forward over `batch x num_draft_tokens` positions
plus the drafting.

- Acceptance: each drafted token is accepted with probability `accept_p` given the ones before it
  were (`SGLANG_SIM_SPEC_ACCEPT`, 0-1; by default what the algorithm typically reaches on chat:
  EAGLE3 0.8, EAGLE / NEXTN 0.7, STANDALONE 0.65, NGRAM 0.45).
- Drafting cost, as a share of one target decode forward per draft step: EAGLE's head 6 %, a
  standalone draft model 15 %, NGRAM none on the GPU (its lookup runs on the host).
- What SGLang reports (scheduler `log_decode_stats`, metrics collector): `accept len` = (accepted
  drafts + one bonus token a forward) / forwards, `accept rate` = accepted drafts / proposed
  drafts, over the steps since the last decode log line; the same values set the gauges
  `sglang:spec_accept_length` and `sglang:spec_accept_rate`.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

#: --speculative-algorithm values the simulator models -> (default accept_p, draft cost share)
ALGORITHMS: dict[str, tuple[float, float]] = {
    "EAGLE": (0.70, 0.06),
    "EAGLE3": (0.80, 0.06),
    "NEXTN": (0.70, 0.06),
    "STANDALONE": (0.65, 0.15),
    "NGRAM": (0.45, 0.0),
}
DEFAULT_NUM_STEPS = 3


@dataclass
class Spec:
    algorithm: str
    num_steps: int
    num_draft_tokens: int
    accept_p: float
    draft_share: float
    # since the last decode log line
    accepted: int = 0
    proposed: int = 0
    forwards: int = 0
    # since the start (/server_info's internal_states `avg_spec_accept_length`)
    total_tokens: int = 0
    total_forwards: int = 0

    def accept(self, rng: random.Random) -> int:
        """Drafted tokens one request keeps in one verify (the chain stops at the first miss)."""
        n = 0
        while n < self.num_steps and rng.random() < self.accept_p:
            n += 1
        self.accepted += n
        self.proposed += self.num_steps
        self.forwards += 1
        self.total_tokens += n + 1
        self.total_forwards += 1
        return n

    def avg_accept_length(self) -> float | None:
        return self.total_tokens / self.total_forwards if self.total_forwards else None

    def step_scale(self) -> tuple[int, float]:
        """(positions a request takes in the verify forward, drafting cost in target forwards)."""
        return self.num_draft_tokens, self.num_steps * self.draft_share

    def take(self) -> tuple[float, float] | None:
        """(accept len, accept rate) since the last call, None before any verify; resets."""
        if not self.forwards:
            return None
        out = ((self.accepted + self.forwards) / self.forwards, self.accepted / max(self.proposed, 1))
        self.accepted = self.proposed = self.forwards = 0
        return out


def from_args(algorithm: str | None, num_steps: int | None, num_draft_tokens: int | None) -> Spec | None:
    """The Spec of a launch's `--speculative-*` flags (None without an algorithm); ValueError for
    an algorithm the simulator does not model or an accept share outside 0-1."""
    if not algorithm:
        return None
    name = algorithm.upper()
    if name not in ALGORITHMS:
        raise ValueError(f"--speculative-algorithm {algorithm}: the simulator models {', '.join(ALGORITHMS)}")
    accept_p, draft_share = ALGORITHMS[name]
    env = os.environ.get("SGLANG_SIM_SPEC_ACCEPT")
    if env:
        try:
            accept_p = float(env)
        except ValueError:
            accept_p = -1.0
        if not 0.0 <= accept_p <= 1.0:
            raise ValueError(f"SGLANG_SIM_SPEC_ACCEPT={env}: expected a share between 0 and 1")
    steps = num_steps or DEFAULT_NUM_STEPS
    return Spec(name, steps, num_draft_tokens or steps + 1, accept_p, draft_share)
