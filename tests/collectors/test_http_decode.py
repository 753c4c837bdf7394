"""collectors.http_decode.BodyDecoder: Content-Encoding undone in bounded pieces, byte for byte."""

from __future__ import annotations

import gzip
import zlib

import pytest

from collectors.base import CollectorError
from collectors.http_decode import PIECE_BYTES, BodyDecoder, EncodingError, encodings

DATA = b"sglang:num_running_reqs 1\n" * 50_000  # 1.3 MB, compresses ~1000:1


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _decode(header: str | None, body: bytes, step: int) -> bytes:
    dec = BodyDecoder(header, url="http://h/metrics")
    out = []
    for at in range(0, len(body), step):
        out.extend(dec.feed(body[at:at + step]))
    out.extend(dec.finish())
    assert all(len(p) <= PIECE_BYTES for p in out)
    return b"".join(out)


def test_header_lists_codings_in_order_without_identity():
    assert encodings("gzip, GZIP") == ["gzip", "gzip"]
    assert encodings(" identity ") == [] and encodings(None) == []


@pytest.mark.parametrize("step", [1, 7, 4096, 10**8])
@pytest.mark.parametrize(("header", "encode"), [
    (None, lambda b: b),
    ("identity", lambda b: b),
    ("gzip", gzip.compress),
    ("x-gzip", gzip.compress),
    ("deflate", zlib.compress),  # zlib-wrapped, as RFC 9110 says
    ("deflate", _raw_deflate),  # raw, as some servers send
    ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),
    ("deflate, gzip", lambda b: gzip.compress(zlib.compress(b))),  # deflated first, then gzipped
    ("gzip", lambda b: gzip.compress(b[:1000]) + gzip.compress(b[1000:])),  # two gzip members
])
def test_every_encoding_decodes_exactly_whatever_the_chunking(header, encode, step):
    data = DATA[:20_000] if step == 1 else DATA  # identity byte by byte: keep it to 20k calls
    assert _decode(header, encode(data), step) == data


def test_an_empty_gzip_body_is_empty():
    assert _decode("gzip", b"", 10) == b""


@pytest.mark.parametrize(("body", "why"), [
    (gzip.compress(DATA)[:-12], "truncated"),
    (b"this is not gzip", "incorrect header check"),
    (gzip.compress(DATA) + b"trailing junk", "after the end of the gzip stream"),
])
def test_a_broken_stream_is_an_encoding_error_naming_the_url(body, why):
    with pytest.raises(EncodingError) as err:
        _decode("gzip", body, 4096)
    assert isinstance(err.value, CollectorError) and isinstance(err.value, ValueError)
    assert "http://h/metrics sent a broken gzip body" in str(err.value) and why in str(err.value)


@pytest.mark.parametrize("header", ["br", "zstd", "compress", "gzip, br"])
def test_encodings_pitwall_does_not_decode_are_refused(header):
    with pytest.raises(EncodingError, match="which Pitwall does not decode"):
        BodyDecoder(header, url="http://h/x")


def test_a_deep_stack_is_refused():
    with pytest.raises(EncodingError, match="stacks 5 content encodings"):
        BodyDecoder("gzip, gzip, gzip, gzip, gzip", url="http://h/x")


def test_a_bomb_comes_out_one_piece_at_a_time():
    # 64 MiB of zeros, gzipped twice: ~200 bytes in; the first piece out is one piece, not 64 MiB
    inner = gzip.compress(bytes(64 << 20), 1)
    dec = BodyDecoder("gzip, gzip", url="http://h/x")
    first = next(iter(dec.feed(gzip.compress(inner))))
    assert 0 < len(first) <= PIECE_BYTES
