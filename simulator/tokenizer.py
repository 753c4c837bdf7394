"""Deterministic stand-in tokenizer and text generator.

Text is cut into pieces of at most 4 characters (a leading space stays with its word, like a
byte-level BPE), so a prompt's token count is about len(text)/4 (an English word of <= 4 letters
is one token). A piece's id is crc32(piece) folded into [1000, VOCAB_SIZE): identical text gives
identical ids, so prompts sharing a prefix share a token-id prefix, which the radix cache needs.

Generated tokens are whole words from a fixed list (one token each), drawn from a PRNG seeded by
(--sim-seed, request seed, prompt ids): the same request to the same server gives the same text.
"""

from __future__ import annotations

import random
import re
import zlib

VOCAB_SIZE = 128256
EOS_TOKEN_ID = 128001
_PIECE_RE = re.compile(r" ?[A-Za-z]{1,4}| ?\d{1,3}| ?[^\sA-Za-z\d]|\s+")

WORDS = (
    "the of and to in is that for it as with was on be by at this are from or an which have "
    "not but had they one you were all their we can has there been if more when will would who "
    "so no out up into time only new some could than other then its also two may first about "
    "model token batch cache server request latency memory kernel layer tensor queue prefix "
    "decode prefill throughput stream answer question value result system data signal river "
    "mountain city light music garden window engine market story paper water energy"
).split()


def _piece_id(piece: str) -> int:
    return 1000 + zlib.crc32(piece.encode()) % (VOCAB_SIZE - 2000)


def encode(text: str) -> list[int]:
    """Token ids of ``text`` (empty text -> one BOS-like id so nothing has length 0)."""
    ids = [_piece_id(p) for p in _PIECE_RE.findall(text)]
    return ids or [1]


_WORD_IDS = [_piece_id(" " + w) for w in WORDS]
_ID_TO_WORD = {i: " " + w for i, w in zip(_WORD_IDS, WORDS, strict=True)}


def decode(ids: list[int]) -> str:
    """Text of generated ids (ids not from the generator decode to nothing)."""
    return "".join(_ID_TO_WORD.get(i, "") for i in ids)


def word_of(token_id: int) -> str:
    return _ID_TO_WORD.get(token_id, "")


class Generator:
    """Per-request stream of output token ids."""

    __slots__ = ("_rng",)

    def __init__(self, server_seed: int, request_seed: int | None, prompt_ids: list[int]) -> None:
        h = zlib.crc32(repr(prompt_ids[:64] + prompt_ids[-64:]).encode())
        self._rng = random.Random(server_seed * 1_000_003 + (request_seed or 0) * 7919 + h)

    def next_id(self) -> int:
        return _WORD_IDS[self._rng.randrange(len(_WORD_IDS))]
