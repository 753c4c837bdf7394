"""HTTP pieces every engine's clients share: the OpenAI-style `Authorization: Bearer` header, and
the one capped read (`get_capped`) every control-plane read of a server goes through.

Engine-neutral (OpenAI-compatible servers take `--api-key` and check this header); the collectors, the
canary, the probe client and the supervisor's readiness checks all build it here.
Cross-check: `curl -H "Authorization: Bearer $KEY" $URL/v1/models`.

`get_capped` gives every read a TOTAL deadline (seconds of wall clock across connect, sending and
every read, the response head included) and a body cap (bytes, per endpoint: `BODY_CAPS`). A per-
read timeout alone is not enough: a server that drips one byte every 0.5 s never trips it. The
deadline is enforced inside the socket layer (`_DeadlineBackend` clamps every connect/read/write
timeout of the client's connections to what is left of the current call's deadline), and checked
between body chunks. Cross-check a cap: `curl -s --compressed $URL/metrics | wc -c`.

The cap counts the body AFTER decompression: the raw bytes are read as received (`iter_raw`) and
their Content-Encoding (`gzip`, `deflate`, stacked as in `gzip, gzip`) is decoded here in pieces
of at most 64 KiB (collectors/http_decode.py), so a few hundred bytes that would inflate to GiBs
hold at most the cap plus one piece. Pitwall asks for `Accept-Encoding: gzip, deflate`, only what
it decodes; any other encoding, or a broken compressed stream, is an EncodingError naming the URL.
The raw bytes have a cap of their own (`compressed_cap`), so a stream that inflates to nothing
cannot run on.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from collectors.base import CollectorError
from collectors.http_decode import ACCEPT_ENCODING, BodyDecoder

KIB = 1024
MIB = 1024 * KIB

# Largest body accepted per endpoint, bytes. A real server's /metrics is ~50-500 KiB; /server_info
# with every server arg ~10-50 KiB; /health is empty or a few bytes.
BODY_CAPS: dict[str, int] = {
    "/metrics": 16 * MIB,  # 4x what the series cap (runner.metrics_max_series, 20,000) lets through
    "/server_info": 4 * MIB,
    "/get_server_info": 4 * MIB,
    "/model_info": 4 * MIB,
    "/get_model_info": 4 * MIB,
    "/v1/loads": 4 * MIB,
    "/get_load": 4 * MIB,
    "/health": 64 * KIB,
    "/health_generate": 64 * KIB,
    "/generate": 4 * MIB,  # the canary's few tokens, streamed
    "/v1/images/generations": 4 * MIB,  # the canary's one 64x64 image, base64
}
DEFAULT_BODY_CAP = 4 * MIB  # any path not in BODY_CAPS
CHUNK_BYTES = 64 * KIB  # bytes asked of the socket per body read


def auth_headers(api_key: str | None) -> dict[str, str]:
    """{"Authorization": "Bearer <key>"} when a key is set, else {} (no header at all)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class DeadlineExceeded(CollectorError):
    """A read took longer than its total deadline (seconds, connect + every read)."""


class CapExceeded(CollectorError):
    """A response body passed its size cap (bytes, counted after decompression)."""


def body_cap(path: str) -> int:
    """The body cap in bytes for an endpoint path ("/metrics" -> 16 MiB), counted after decompression."""
    return BODY_CAPS.get(path, DEFAULT_BODY_CAP)


def compressed_cap(cap: int) -> int:
    """The most raw (still compressed) bytes read for a decoded cap of `cap` bytes: the cap plus
    gzip's worst-case growth on incompressible data (~0.03 %) with room to spare. It bounds a body
    that inflates to nothing (empty deflate blocks, sent until the deadline)."""
    return cap + cap // 64 + CHUNK_BYTES


def cap_message(path: str, url: str, cap: int) -> str:
    """The one sentence of a body over its cap (the cap counts decoded bytes)."""
    return (f"{path} body passed {_fmt_bytes(cap)} (limit), counted after decompression, at {url}; "
            "the server sent more than Pitwall reads from this endpoint.")


def _fmt_bytes(n: int) -> str:
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB} MiB"
    if n >= KIB and n % KIB == 0:
        return f"{n // KIB} KiB"
    return f"{n} bytes"


# -- the deadline, down in the socket layer ---------------------------------------------------
_current = threading.local()  # .deadline: time.monotonic() value of the running call, or absent


def _clamp(timeout: float | None) -> float | None:
    """The socket timeout to use now, seconds: never past the current call's deadline."""
    deadline: float | None = getattr(_current, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _clamp(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _clamp(timeout), local_address,
                                                       socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _clamp(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


_tls_lock = threading.Lock()
_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """One TLS context (httpx's defaults: certifi, or SSL_CERT_FILE / SSL_CERT_DIR) for every
    client. httpx builds one in every transport, even for plain http://, and loading the CA bundle
    is most of a fresh connection's CPU: a read with `client=None` once cost about 15 ms of it,
    a third of an idle runner's CPU. An SSLContext is safe to share between threads."""
    global _tls
    with _tls_lock:
        if _tls is None:
            _tls = httpx.create_ssl_context()
        return _tls


def capped_client(timeout_s: float = 10.0) -> httpx.Client:
    """An httpx.Client whose connections honour `get_capped`'s total deadline."""
    transport = httpx.HTTPTransport(verify=_tls_context())
    # httpx offers no public hook for the network backend; the pool reads this attribute when it
    # opens each connection (httpcore 1.x). Without it the deadline still holds between chunks.
    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = _DeadlineBackend()
    return httpx.Client(timeout=timeout_s, transport=transport)


@contextmanager
def _deadline(deadline: float) -> Iterator[None]:
    prev = getattr(_current, "deadline", None)
    _current.deadline = deadline if prev is None else min(prev, deadline)
    try:
        yield
    finally:
        _current.deadline = prev


@dataclass(frozen=True, slots=True)
class CappedResponse:
    """A whole response read within its deadline and cap; `elapsed_s` in seconds."""

    status_code: int
    content: bytes | bytearray  # the read buffer as it is (no copy)
    elapsed_s: float

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; raises ValueError on a body that is not JSON."""
        return json.loads(self.content)


def get_capped(
    client: httpx.Client | None,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    deadline_s: float,
    max_bytes: int | None = None,
    method: str = "GET",
    json_body: Any = None,
    on_chunk: Callable[[bytes], None] | None = None,
) -> CappedResponse:
    """Read `url` whole within `deadline_s` seconds in total and at most `max_bytes` of body.

    `max_bytes` (decoded bytes) defaults to the endpoint's BODY_CAPS entry. `client=None` opens a
    fresh connection and closes it (no keep-alive socket left for the server to close). `on_chunk`
    sees each decoded piece as it arrives (the canary's time to first token). Raises
    DeadlineExceeded, CapExceeded, EncodingError (all CollectorError, the message names the figure
    and the limit, or the encoding) or httpx.HTTPError.
    """
    path = httpx.URL(url).path or "/"
    cap = body_cap(path) if max_bytes is None else max_bytes
    raw_cap = compressed_cap(cap)
    t0 = time.monotonic()
    deadline = t0 + deadline_s
    own = client is None
    cl = capped_client(deadline_s) if client is None else client
    timeout = httpx.Timeout(deadline_s)
    sent = {"Accept-Encoding": ACCEPT_ENCODING, **dict(headers or {})}
    try:
        with _deadline(deadline):
            try:
                with cl.stream(method, url, headers=sent, json=json_body, timeout=timeout) as resp:
                    decoder = BodyDecoder(resp.headers.get("content-encoding"), url=url)
                    buf = bytearray()
                    raw_n = 0

                    def take(pieces: Iterable[bytes]) -> None:
                        for piece in pieces:
                            if len(buf) + len(piece) > cap:
                                raise CapExceeded(cap_message(path, url, cap))
                            buf.extend(piece)
                            if on_chunk is not None:
                                on_chunk(piece)

                    # raw bytes as received, decoded here in bounded pieces (httpx's own decoding
                    # inflates a whole chunk at once, before any cap can count it)
                    for chunk in resp.iter_raw(CHUNK_BYTES):
                        raw_n += len(chunk)
                        if raw_n > raw_cap:
                            raise CapExceeded(
                                f"{path} compressed body passed {_fmt_bytes(raw_cap)} (limit) at "
                                f"{url}; the server sent more than Pitwall reads from this endpoint.")
                        take(decoder.feed(chunk))
                        if time.monotonic() > deadline:
                            raise httpx.ReadTimeout("total deadline passed")
                    take(decoder.finish())
                    # the buffer itself, not a copy: a 16 MiB answer is held once
                    return CappedResponse(resp.status_code, buf, time.monotonic() - t0)
            except httpx.TimeoutException as exc:
                if time.monotonic() - t0 >= deadline_s * 0.95:
                    raise DeadlineExceeded(
                        f"{path} took longer than {deadline_s:g} s in total (limit) at {url}; the "
                        "server is stalled or dripping its answer."
                    ) from exc
                raise
    finally:
        if own:
            cl.close()
