"""Bounded decoding of an HTTP body's `Content-Encoding`, shared by every external read (httpx in
collectors/http.py, aiohttp in collectors/probe/client.py). Pure: bytes in, bytes out, no I/O.

Why not the HTTP library's own decoding: httpx's `iter_bytes` and aiohttp's auto-decompression
inflate a whole received chunk at once, so a few hundred bytes of `Content-Encoding: gzip, gzip`
become hundreds of MiB before any size cap can count them (590 bytes took a runner to 796 MiB).
Here every stage inflates with zlib's `max_length`, carrying what it did not consume
(`unconsumed_tail`) to the next call, so no call returns more than `PIECE_BYTES` bytes and the
caller's cap (counted on what comes out, after decompression) stops the read within one piece.

Encodings decoded: `gzip` / `x-gzip` (concatenated members too), `deflate` (zlib-wrapped as RFC
9110 says, or raw deflate as some servers send), `identity`, stacked up to `MAX_STAGES` deep in
the order the header lists them (`deflate, gzip` = deflated, then gzipped). `br` and `zstd` are
refused: Python 3.11 has no zstd and Pitwall does not depend on a brotli library, so Pitwall
never advertises them (`ACCEPT_ENCODING`). Cross-check what a server sends:
`curl -s -D- -o/dev/null -H 'Accept-Encoding: gzip' $URL/metrics | grep -i content-encoding`.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

from collectors.base import CollectorError

PIECE_BYTES = 64 * 1024  # the most one decoding step returns, bytes
MAX_STAGES = 4  # Content-Encoding stages decoded; a longer stack is refused
#: the Accept-Encoding Pitwall sends: only what `BodyDecoder` decodes
ACCEPT_ENCODING = "gzip, deflate"

_GZIP_MAGIC = b"\x1f\x8b"


class EncodingError(CollectorError, ValueError):
    """A body whose Content-Encoding Pitwall does not decode, or whose compressed stream is broken
    (a ValueError too: readers that file a bad body as "invalid response" file this one there)."""


def encodings(header: str | None) -> list[str]:
    """The Content-Encoding header as a list of codings, lower case, `identity` left out
    ("gzip, GZIP" -> ["gzip", "gzip"]; None -> [])."""
    if not header:
        return []
    return [c for c in (p.strip().lower() for p in header.split(",")) if c and c != "identity"]


class _Zlib:
    """One gzip or deflate stage: inflate in pieces of at most PIECE_BYTES."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._d: zlib._Decompress | None = None
        self._head = b""  # deflate: bytes kept until the first two tell zlib-wrapped from raw
        self.done = False  # the last member / stream ended cleanly

    def _start(self, data: bytes) -> bytes:
        if self.coding == "gzip":
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return data
        data = self._head + data
        if len(data) < 2:
            self._head = data
            return b""
        self._head = b""
        cmf, flg = data[0], data[1]
        wrapped = cmf & 0x0F == 8 and (cmf << 8 | flg) % 31 == 0
        self._d = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return data

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._d is None:
            if not data:
                return
            data = self._start(data)
            if self._d is None:
                return
        while True:
            d = self._d
            assert d is not None
            if d.eof:
                rest = d.unused_data + data
                if not rest:
                    return
                if self.coding != "gzip" or not rest.startswith(_GZIP_MAGIC[: len(rest)]):
                    raise zlib.error(f"{len(rest)} bytes after the end of the {self.coding} stream")
                self._d, self.done, data = zlib.decompressobj(16 + zlib.MAX_WBITS), False, rest
                continue
            out = d.decompress(data, PIECE_BYTES)
            # at the end of a stream zlib leaves the rest of the input in BOTH unused_data and
            # unconsumed_tail: take it once, from unused_data
            data = b"" if d.eof else d.unconsumed_tail
            if d.eof:
                self.done = True
            if out:
                yield out
            # a full piece may leave output inside zlib even when all input was taken: ask again
            if not data and len(out) < PIECE_BYTES and not (d.eof and d.unused_data):
                return

    def finish(self) -> Iterator[bytes]:
        if self._d is None and self._head:
            raise zlib.error(f"the {self.coding} stream ended after {len(self._head)} byte")
        if self._d is None:
            return  # an empty body: nothing was compressed
        yield from self.feed(b"")
        if not self.done:
            raise zlib.error(f"the {self.coding} stream ended before its end marker (truncated)")


class BodyDecoder:
    """Decodes one body's Content-Encoding as it arrives: `feed(raw)` and at the end `finish()`
    yield decoded pieces of at most PIECE_BYTES each; the caller counts and caps them.

    Raises EncodingError (a CollectorError; the message names `url` and the encoding) for an
    encoding Pitwall does not decode, a stack deeper than MAX_STAGES, or a broken stream."""

    def __init__(self, content_encoding: str | None, *, url: str) -> None:
        self.url = url
        self.header = content_encoding or ""
        codings = encodings(content_encoding)
        if len(codings) > MAX_STAGES:
            raise EncodingError(
                f"{url} stacks {len(codings)} content encodings ({self.header[:80]!r}; limit "
                f"{MAX_STAGES}); Pitwall refuses the answer. Check what sits in front of the server.")
        stages: list[_Zlib] = []
        for coding in codings:
            if coding in ("gzip", "x-gzip"):
                stages.append(_Zlib("gzip"))
            elif coding == "deflate":
                stages.append(_Zlib("deflate"))
            else:
                raise EncodingError(
                    f"{url} answered with Content-Encoding {coding!r}, which Pitwall does not decode "
                    f"(it asks for {ACCEPT_ENCODING!r} only); configure the server or proxy not to "
                    "send it.")
        # the header lists codings in the order applied: undo the last one first
        self._stages = stages[::-1]

    @property
    def identity(self) -> bool:
        return not self._stages

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """Decoded pieces of `raw` (the next bytes of the body as received)."""
        return self._run(0, (raw,), final=False)

    def finish(self) -> Iterator[bytes]:
        """What is left once the body ended; EncodingError when a stream was cut short."""
        return self._run(0, (), final=True)

    def _run(self, i: int, pieces: Iterable[bytes], *, final: bool) -> Iterator[bytes]:
        if i == len(self._stages):
            for p in pieces:
                # identity (or the last stage's output): never hand out more than one piece
                for at in range(0, len(p), PIECE_BYTES):
                    yield p[at:at + PIECE_BYTES]
            return
        stage = self._stages[i]
        try:
            for p in pieces:
                yield from self._run(i + 1, stage.feed(p), final=False)
            if final:
                yield from self._run(i + 1, stage.finish(), final=True)
        except zlib.error as exc:
            raise EncodingError(
                f"{self.url} sent a broken {stage.coding} body (Content-Encoding {self.header!r}: "
                f"{exc}); the server or a proxy in front of it corrupted the answer.") from None
