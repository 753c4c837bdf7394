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
# A run of newlines is a piece of its own (as in Llama-3's pre-tokenizer), so "\n\n" + " the"
# stays two pieces: a chat turn's text is then a token prefix of the next turn's.
_PIECE_RE = re.compile(r" ?[A-Za-z]{1,4}| ?\d{1,3}| ?[^\sA-Za-z\d]|[ \t]*[\r\n]+|\s+")

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
# Constrained output (simulator/grammar.py) also needs punctuation and words without a leading
# space: ids above every crc piece id (< VOCAB_SIZE - 1000), one per ASCII character, then one
# per bare word. They decode like the words; the EOS id decodes to nothing.
_CHAR_BASE = VOCAB_SIZE - 956
_BARE_IDS = {w: _CHAR_BASE + 128 + i for i, w in enumerate(WORDS)}
_ID_TO_TEXT = {**_ID_TO_WORD, **{_CHAR_BASE + c: chr(c) for c in range(128)},
               **{i: w for w, i in _BARE_IDS.items()}}
_WORD_TO_ID = {" " + w: i for i, w in zip(_WORD_IDS, WORDS, strict=True)} | _BARE_IDS
_OUT_PIECE_RE = re.compile(r" ?[a-z]+|.", re.S)


def decode(ids: list[int]) -> str:
    """Text of generated ids (ids not from the generator decode to nothing)."""
    return "".join(_ID_TO_TEXT.get(i, "") for i in ids)


def encode_output(text: str) -> list[int]:
    """Output ids that decode() turns back into `text` (ASCII): known words one token each,
    anything else one token per character (non-ASCII becomes "?")."""
    out: list[int] = []
    for m in _OUT_PIECE_RE.finditer(text):
        piece = m.group()
        wid = _WORD_TO_ID.get(piece)
        if wid is not None:
            out.append(wid)
            continue
        out.extend(_CHAR_BASE + (ord(c) if ord(c) < 128 else ord("?")) for c in piece)
    return out


def word_of(token_id: int) -> str:
    return _ID_TO_TEXT.get(token_id, "")


class Generator:
    """Per-request stream of output token ids."""

    __slots__ = ("rng",)

    def __init__(self, server_seed: int, request_seed: int | None, prompt_ids: list[int]) -> None:
        h = zlib.crc32(repr(prompt_ids[:64] + prompt_ids[-64:]).encode())
        self.rng = random.Random(server_seed * 1_000_003 + (request_seed or 0) * 7919 + h)

    def next_id(self) -> int:
        return _WORD_IDS[self.rng.randrange(len(_WORD_IDS))]


class ScriptedGenerator:
    """Emits fixed output ids, then EOS (a constrained output: simulator/grammar.py)."""

    __slots__ = ("_ids", "_i")

    def __init__(self, ids: list[int]) -> None:
        self._ids = [*ids, EOS_TOKEN_ID]
        self._i = 0

    def next_id(self) -> int:
        i = self._i
        self._i = min(i + 1, len(self._ids) - 1)
        return self._ids[i]
