"""Synthetic prompts for a replay: the same token counts and the same prefix sharing as the
trace, none of its text.

Words are the probe's one-token words (collectors/probe/workloads.py `synthetic_text`: common
one-syllable English words, one token each with their leading space in Llama / Qwen-style BPE),
so `n` words are about `n` tokens in those tokenizers. Others differ (a small test model's
tokenizer spends about 3 tokens on a word), so a replay measures the server's tokens per word
first (`Calibration`) and sizes every prompt and block in words from it; the server's own count
is recorded per request as it answers.

- A request with prefix blocks (`hash_ids`, `block_size` tokens each) is the concatenation of its
  blocks' texts, cut to its input length: block `h`'s text is seeded by `h` alone (a string seed:
  the same in every process), so two requests
  that share their first k block ids share their first k blocks of text exactly, and the radix
  cache sees the reuse the trace had.
- A request without blocks is text seeded by its sequence number: shared with nothing.
- A session's later turn (replay: after its predecessor answered) is the predecessor's prompt,
  its answer, and new text that brings it to the turn's input length (or at least one new word).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from collectors.probe.workloads import synthetic_text

SEED = 0x7EACE


@dataclass(frozen=True, slots=True)
class Calibration:
    """How many of the server's tokens a word costs (measured by the replay before it starts:
    collectors/trace/replay.py `calibrate`), and what the API adds to every prompt (a chat
    template's tokens). The default: a word is a token, nothing added."""

    tokens_per_word: float = 1.0
    overhead_tokens: float = 0.0

    def words(self, tokens: int) -> int:
        return max(1, round((tokens - self.overhead_tokens) / self.tokens_per_word))

    def block_words(self, block_size: int) -> int:
        return max(1, round(block_size / self.tokens_per_word))


UNCALIBRATED = Calibration()


def block_text(block_id: int, block_size: int, seed: int = SEED) -> str:
    return synthetic_text(block_size, random.Random(f"{seed}:block:{block_id}"))


def prompt_text(*, seq: int, input_tokens: int, hash_ids: list[int] | None, block_size: int | None,
                seed: int = SEED, calibration: Calibration = UNCALIBRATED) -> str:
    n = calibration.words(input_tokens)
    if hash_ids and block_size:
        words: list[str] = []
        per_block = calibration.block_words(block_size)
        for h in hash_ids:
            words.extend(block_text(h, per_block, seed).split(" "))
            if len(words) >= n:
                break
        if len(words) < n:  # the blocks cover less than the input length: unique filler
            words.extend(synthetic_text(n - len(words), random.Random(f"{seed}:tail:{seq}")).split(" "))
        return " ".join(words[:n])
    return synthetic_text(n, random.Random(f"{seed}:req:{seq}"))


def next_turn(history: str, answer: str, *, seq: int, input_tokens: int, seed: int = SEED,
              calibration: Calibration = UNCALIBRATED) -> str:
    """A later turn: what came before, the server's answer, then new words up to the turn's length."""
    so_far = f"{history} {answer}".strip()
    have = len(so_far.split())
    new = max(1, calibration.words(input_tokens) - have)
    fresh = synthetic_text(new, random.Random(f"{seed}:turn:{seq}"))
    return f"{so_far} {fresh}"
