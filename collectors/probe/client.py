"""The probe's HTTP client: one aiohttp request -> one `RequestRecord` with client-side timings.

aiohttp, not httpx: httpx's pool collapses at >= 64 concurrent streams (15 % of ideal
throughput at c=64 on a 2-vCPU VM; its connection pool costs O(N²) per request).
Each stream is read to its end (drained after `[DONE]`, so the keep-alive connection is reused)
and parsed in the same read loop that stamps the times, with `time.perf_counter()`
(CLOCK_MONOTONIC on Linux, the same clock a same-host test server stamps with).

Timings (seconds):

| field | meaning |
|---|---|
| ttft_s | request start -> first chunk with non-empty text on any channel (content or reasoning) |
| itl_s | every gap between token-carrying chunks after the first, split evenly over the tokens the chunk carries (a chunk of k tokens after gap g adds k values g/k) |
| tpot_s | (last token time - first token time) / (tokens_out - tokens of the first chunk), tokens_out from meta_info / usage (one chunk per token: tokens_out - 1) |
| e2e_s | request start -> response body fully read (images: the per-request image latency) |

Error kinds: `timeout` (per-request timeout hit), `connect_refused` (no connection), `http_<code>`
(non-2xx status, or an error object with a code inside the stream), `server_error` (error object
without a code), `stream_broken` (connection lost mid-response, or a stream that ended without
`[DONE]`), `invalid_response` (body not the promised SSE / JSON shape).

Image responses (`/v1/images/generations`) are one JSON body of at most MAX_IMAGE_RESPONSE_BYTES.
What the server reports per request beyond the images goes to `RequestRecord.detail` (the
ProbeRequest.detail column), keys as the server's image answer names them (the OpenAI images answer plus the engine's
extra keys):

| key | meaning |
|---|---|
| inference_time_s | the GPU worker's forward time of the request (s; no queueing, no encoding) |
| peak_memory_mb | peak reserved CUDA memory during the forward (MB, as the server reports it) |
| usage | the `usage` object as sent (prompt_tokens, image_count, ...) |
| <other> | any other top-level scalar of the body except `id` / `created` (a field a newer server adds) |

With `keep_image=True` the first image's bytes (base64-decoded `b64_json`) stay on the record
(`image_bytes`) so the sweep can thumbnail it for the output check; never stored as is.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from collectors.http import auth_headers
from collectors.http_decode import ACCEPT_ENCODING, BodyDecoder
from collectors.probe.sse import (
    InvalidResponse,
    ServerStreamError,
    StreamParser,
    parse_full_response,
    parse_image_response,
)
from storage.errors import CollectorError

MAX_ERROR_BODY = 2048


@dataclass(slots=True)
class RequestRecord:
    """One request as the client saw it (ProbeRequest columns + fields for tests and the bench)."""

    level: float
    seq: int
    warmup: bool = False
    request_id: str = ""
    start_ts: float = 0.0  # wall clock (epoch s) at start
    t_start: float = 0.0  # perf_counter at start
    t_end: float = 0.0  # perf_counter when the body was fully read
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    tpot_s: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None
    images: int | None = None
    ok: bool = False
    error_kind: str | None = None
    error_detail: str | None = None
    http_status: int | None = None
    output_hash: str | None = None
    finish_reason: str | None = None
    output_text: str | None = None  # kept only when send(keep_text=True): checks, multi-turn replies
    # ProbeRequest.detail: per-request extras (structured, turn, branch; image servers: see above)
    detail: dict[str, Any] | None = None
    image_bytes: bytes | None = None  # first image of the answer, only with keep_image

    def row(self, run_id: int) -> dict[str, Any]:
        """The ProbeRequest row of this record."""
        return {
            "run_id": run_id, "level": self.level, "seq": self.seq, "warmup": self.warmup,
            "start_ts": self.start_ts, "ttft_s": self.ttft_s, "e2e_s": self.e2e_s,
            "itl_s": self.itl_s or None, "tpot_s": self.tpot_s, "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out, "tokens_cached": self.tokens_cached, "ok": self.ok,
            "error_kind": self.error_kind, "http_status": self.http_status,
            "output_hash": self.output_hash, "detail": self.detail,
        }


def make_session(*, api_key: str | None = None) -> aiohttp.ClientSession:
    """One session per sweep: unlimited connector (no silent concurrency cap), no aiohttp timeout
    (the per-request timeout is ours), a large line buffer for cumulative /generate chunks.

    aiohttp's own decompression is off: it inflates a received chunk before any cap of ours can
    count it, so every body is decoded by `_decoded` (collectors/http_decode.py, bounded pieces)
    and the caps below count decoded bytes. The session asks only for the encodings decoded there."""
    headers = {**auth_headers(api_key), "Accept-Encoding": ACCEPT_ENCODING}
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, force_close=False)
    return aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=None),
        read_bufsize=1 << 20,  # SSE lines up to 2 MiB (aiohttp's line limit is 2x this)
        auto_decompress=False,
    )


async def send(
    session: aiohttp.ClientSession,
    url: str,
    api: str,
    body: dict[str, Any] | bytes,
    *,
    level: float = 0.0,
    seq: int = 0,
    warmup: bool = False,
    timeout_s: float = 120.0,
    keep_text: bool = False,
    keep_image: bool = False,
) -> RequestRecord:
    """Send one request and read it to the end; never raises for server-side failures.

    `body` is a JSON object, or its pre-encoded bytes (a sweep encodes each prompt once, which
    keeps json.dumps out of the timed path). `keep_text` keeps the output text on the record,
    `keep_image` an image answer's first image."""
    rec = RequestRecord(level=level, seq=seq, warmup=warmup, request_id=uuid.uuid4().hex)
    headers = {"X-Request-Id": rec.request_id, "Content-Type": "application/json"}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    rec.start_ts = time.time()
    rec.t_start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url, data=data, headers=headers) as resp:
                rec.http_status = resp.status
                if resp.status >= 300:
                    rec.error_kind = f"http_{resp.status}"
                    text = await _read_capped(resp, MAX_ERROR_BODY, "error answer", cut=True)
                    rec.error_detail = text.decode("utf-8", "replace")[:200]
                elif api == "images":
                    await _read_image(resp, rec, keep_image)
                else:
                    await _read_stream(resp, api, rec, keep_text)
    except TooLarge as exc:
        rec.error_kind, rec.error_detail = "too_large", str(exc)
    except TimeoutError:
        rec.error_kind, rec.error_detail = "timeout", f"no complete answer within {timeout_s:g} s"
    except aiohttp.ClientConnectorError as exc:
        rec.error_kind, rec.error_detail = "connect_refused", str(exc)[:200]
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
            ConnectionError) as exc:
        rec.error_kind, rec.error_detail = "stream_broken", f"{type(exc).__name__}: {exc}"[:200]
    except (InvalidResponse, aiohttp.ContentTypeError, json.JSONDecodeError, UnicodeDecodeError,
            ValueError) as exc:
        rec.error_kind, rec.error_detail = "invalid_response", str(exc)[:200]
    except ServerStreamError as exc:
        rec.error_kind, rec.error_detail = exc.kind, str(exc)
    except aiohttp.ClientError as exc:
        rec.error_kind, rec.error_detail = "stream_broken", f"{type(exc).__name__}: {exc}"[:200]
    rec.t_end = time.perf_counter()
    rec.e2e_s = rec.t_end - rec.t_start
    rec.ok = rec.error_kind is None
    return rec


MAX_SSE_LINE_BYTES = 1 << 20  # one SSE line (a cumulative /generate chunk is ~the text so far)
MAX_RESPONSE_BYTES = 64 << 20  # one whole streamed response


class TooLarge(CollectorError):
    """A streamed answer passed MAX_SSE_LINE_BYTES per line or MAX_RESPONSE_BYTES in total."""


async def _read_stream(resp: aiohttp.ClientResponse, api: str, rec: RequestRecord,
                       keep_text: bool = False) -> None:
    ctype = resp.headers.get("Content-Type", "")
    if "text/event-stream" not in ctype:
        if "json" in ctype:  # the server ignored stream=true: one JSON answer
            obj = json.loads(await _read_capped(resp, MAX_RESPONSE_BYTES, "response"))
            now = time.perf_counter()
            parser = parse_full_response(api, obj)
            if parser.visible:
                rec.ttft_s = now - rec.t_start
            _finish(rec, parser, now, now, keep_text)
            return
        raise InvalidResponse(f"expected text/event-stream, got {ctype or 'no content type'!r}")
    parser = StreamParser(api)
    t_first: float | None = None
    t_prev = 0.0
    first_n = 1  # tokens the first visible chunk carried: they all arrived at TTFT
    itl = rec.itl_s
    parts: list[bytes] = []  # the unterminated line so far, as received (joined once: linear)
    part_bytes = total = 0
    # One await per network read (not per line): events that arrived together are parsed together
    # and share the read's timestamp, the instant they reached the client.
    async for data in _decoded(resp):
        now = time.perf_counter()
        total += len(data)
        if total > MAX_RESPONSE_BYTES:
            raise TooLarge(f"the response passed {MAX_RESPONSE_BYTES >> 20} MiB (limit), counted after "
                           "decompression")
        if b"\n" not in data:
            parts.append(data)
            part_bytes += len(data)
            if part_bytes > MAX_SSE_LINE_BYTES:
                raise TooLarge(f"one SSE line passed {MAX_SSE_LINE_BYTES >> 20} MiB (limit)")
            continue
        lines = (b"".join(parts) + data).split(b"\n") if parts else data.split(b"\n")
        tail = lines.pop()
        parts, part_bytes = ([tail], len(tail)) if tail else ([], 0)
        if max(map(len, lines)) > MAX_SSE_LINE_BYTES or part_bytes > MAX_SSE_LINE_BYTES:
            raise TooLarge(f"one SSE line passed {MAX_SSE_LINE_BYTES >> 20} MiB (limit)")
        for line in lines:
            n = parser.feed(line)
            if t_first is None:
                if parser.visible:
                    t_first = t_prev = now
                    rec.ttft_s = now - rec.t_start
                    first_n = max(n, 1)
                continue
            if n:
                gap = (now - t_prev) / n
                itl.extend([gap] * n)
                t_prev = now
    tail = b"".join(parts)
    if tail.strip():
        parser.feed(tail)
    if not parser.done:
        raise aiohttp.ClientPayloadError("stream ended without [DONE]")
    _finish(rec, parser, t_first, t_prev, keep_text, first_n=first_n)


def _finish(rec: RequestRecord, parser: StreamParser, t_first: float | None, t_last: float,
            keep_text: bool = False, *, first_n: int = 1) -> None:
    rec.tokens_in = parser.tokens_in
    rec.tokens_cached = parser.tokens_cached
    rec.tokens_out = parser.tokens_out if parser.tokens_out is not None else parser.counted
    if t_first is not None and rec.tokens_out and rec.tokens_out > first_n:
        # the tokens after the first chunk, the same tokens ITL splits its gaps over
        rec.tpot_s = (t_last - t_first) / (rec.tokens_out - first_n)
    rec.output_hash = parser.output_hash()
    rec.finish_reason = parser.finish_reason
    if keep_text:
        rec.output_text = parser.output_text()


MAX_IMAGE_RESPONSE_BYTES = 256 << 20  # ten 2048² PNGs in base64 fit; a runaway body does not


async def _read_image(resp: aiohttp.ClientResponse, rec: RequestRecord, keep_image: bool) -> None:
    raw = await _read_capped(resp, MAX_IMAGE_RESPONSE_BYTES, "image response")
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError:
        raise InvalidResponse(f"image response is not JSON: {raw[:80]!r}") from None
    rec.images, rec.output_hash = parse_image_response(obj)
    rec.detail = image_detail(obj)
    if keep_image:
        rec.image_bytes = first_image_bytes(obj)


#: top-level keys of an image answer that are not per-request figures
_IMAGE_SKIP_KEYS = frozenset({"data", "id", "created", "object"})
MAX_DETAIL_STR = 200


def image_detail(obj: dict[str, Any]) -> dict[str, Any]:
    """What an image answer reports beyond its images: `inference_time_s`, `peak_memory_mb`,
    `usage` and any other top-level scalar (strings cut at MAX_DETAIL_STR); None values kept
    out (the server sends null unless > 0, and missing is never 0)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key in _IMAGE_SKIP_KEYS or value is None:
            continue
        if key == "usage" and isinstance(value, dict):
            out[key] = {k: v for k, v in value.items()
                        if isinstance(v, bool | int | float)
                        or (isinstance(v, str) and len(v) <= MAX_DETAIL_STR)}
        elif isinstance(value, bool | int | float):
            out[key] = value
        elif isinstance(value, str):
            out[key] = value[:MAX_DETAIL_STR]
    return out


def first_image_bytes(obj: dict[str, Any]) -> bytes | None:
    """The decoded `b64_json` of the first image, or None (a `url` answer is not fetched)."""
    data = obj.get("data")
    first = data[0] if isinstance(data, list) and data else None
    b64 = first.get("b64_json") if isinstance(first, dict) else None
    if not isinstance(b64, str):
        return None
    try:
        return base64.b64decode(b64, validate=False)
    except (ValueError, binascii.Error):
        return None


MAX_JSON_DOC_BYTES = 4 << 20  # /v1/models, /model_info, /server_info (collectors/http.py's caps)


async def get_json(session: aiohttp.ClientSession, url: str, timeout_s: float = 3.0) -> Any:
    """GET a small JSON document (model discovery) within `timeout_s` seconds in total and
    MAX_JSON_DOC_BYTES decoded; None on any failure."""
    try:
        async with asyncio.timeout(timeout_s):
            async with session.get(url) as resp:
                if resp.status != 200:
                    return None
                return json.loads(await _read_capped(resp, MAX_JSON_DOC_BYTES, "document"))
    except (TimeoutError, aiohttp.ClientError, ValueError, OSError, TooLarge):
        return None


async def _decoded(resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The body as it arrives, its Content-Encoding undone in pieces of at most 64 KiB (the
    session does not decompress: `make_session`). EncodingError (a ValueError) for an encoding
    Pitwall does not decode or a broken stream."""
    decoder = BodyDecoder(resp.headers.get("Content-Encoding"), url=str(resp.url))
    async for raw in resp.content.iter_any():
        for piece in decoder.feed(raw):
            yield piece
    for piece in decoder.finish():
        yield piece


async def _read_capped(resp: aiohttp.ClientResponse, limit: int, what: str, *, cut: bool = False) -> bytes:
    """The whole decoded body, at most `limit` bytes: TooLarge past it, or with `cut` the first
    `limit` bytes (the connection is then closed rather than drained: the rest is never read)."""
    parts: list[bytes] = []
    total = 0
    async for piece in _decoded(resp):
        if total + len(piece) > limit:
            if cut:
                parts.append(piece[: limit - total])
                resp.close()
                return b"".join(parts)
            raise TooLarge(f"the {what} passed {_fmt_limit(limit)} (limit), counted after decompression")
        total += len(piece)
        parts.append(piece)
    return b"".join(parts)


def _fmt_limit(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"
