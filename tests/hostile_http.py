"""Hostile HTTP servers on 127.0.0.1 for the caps tests (real sockets, threads, no mocks).

Modes of `HostileServer(mode)`:

| mode | answer |
|---|---|
| drip | every path, one byte every `drip_s` seconds forever (the response head included) |
| big | `/metrics`: `big_bytes` of a repeated valid Prometheus line, generated as written (never held in memory); `/health` 200 |
| gzipbomb | every path: `Content-Encoding: gzip, gzip`, a few KiB that inflate to `bomb_bytes` |
| deflatebomb | every path: `Content-Encoding: deflate, gzip` (deflated, then gzipped), same size |
| badgzip | every path: `Content-Encoding: gzip`, half a valid gzip stream followed by junk |
| brotli | every path: `Content-Encoding: br` (an encoding Pitwall does not decode) |
| hugejson | every path: one JSON object of `big_bytes` (`{"text": "xxx..."}`), generated as written |
| emptygzip | every path: `Content-Encoding: gzip`, `big_bytes` of empty deflate blocks (inflate to nothing) |

Every mode but `drip` records the last request's headers in `last_headers`. A body is
`text/plain` on `/metrics`, else `application/json`.
"""

from __future__ import annotations

import gzip
import threading
import time
import tracemalloc
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

METRIC_LINE = b'sglang:num_running_reqs{model_name="m"} 1\n'
MIB = 1024 * 1024
_bombs: dict[tuple[str, int], bytes] = {}


def bomb(encoding: str, size: int) -> bytes:
    """`size` bytes of Prometheus lines encoded as `encoding` ("gzip, gzip" or "deflate, gzip"),
    built once per process (level 1 keeps it fast: 256 MiB -> ~3 KiB in about half a second)."""
    key = (encoding, size)
    if key not in _bombs:
        block = METRIC_LINE * (MIB // len(METRIC_LINE))
        first = zlib.compressobj(1, zlib.DEFLATED, 31 if encoding == "gzip, gzip" else 15)
        parts = [first.compress(block[: min(len(block), size - at)]) for at in range(0, size, len(block))]
        inner = b"".join(parts) + first.flush()
        _bombs[key] = gzip.compress(inner, 9)
    return _bombs[key]


def bad_gzip() -> bytes:
    good = gzip.compress(METRIC_LINE * 1000)
    return good[: len(good) // 2] + b"\x00junk-not-deflate" * 8


class LoopbackServer:
    """A threaded HTTP/1.1 server on a free 127.0.0.1 port whose every GET and POST (body read
    first) goes to `_answer(handler)`; a context manager. `stopping` is set on exit, so an
    answer that runs on (a drip, an endless body) can end."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                outer._answer(self)

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                outer._answer(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError


class HostileServer(LoopbackServer):
    def __init__(self, mode: str, *, big_bytes: int = 300 * MIB, drip_s: float = 0.5,
                 bomb_bytes: int = 256 * MIB) -> None:
        super().__init__()
        self.mode = mode
        self.big_bytes = big_bytes
        self.drip_s = drip_s
        self.bomb_bytes = bomb_bytes
        self.last_headers: dict[str, str] = {}

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        self.last_headers = dict(h.headers.items())
        ctype = "text/plain" if h.path.split("?")[0] == "/metrics" else "application/json"
        try:
            if self.mode in ("gzipbomb", "deflatebomb", "badgzip", "brotli"):
                encoding, body = {
                    "gzipbomb": lambda: ("gzip, gzip", bomb("gzip, gzip", self.bomb_bytes)),
                    "deflatebomb": lambda: ("deflate, gzip", bomb("deflate, gzip", self.bomb_bytes)),
                    "badgzip": lambda: ("gzip", bad_gzip()),
                    "brotli": lambda: ("br", b"\x0b\x02\x80hello\x03"),
                }[self.mode]()
                self._send(h, 200, ctype, body, encoding)
            elif self.mode == "emptygzip":
                h.send_response(200)
                h.send_header("Content-Type", ctype)
                h.send_header("Content-Encoding", "gzip")
                h.send_header("Content-Length", str(self.big_bytes))
                h.end_headers()
                # a gzip header, then empty non-final stored blocks (BFINAL=0, LEN=0, NLEN=0xffff)
                head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
                block = b"\x00\x00\x00\xff\xff" * (MIB // 5)
                h.wfile.write(head)
                left = self.big_bytes - len(head)
                while left > 0 and not self.stopping.is_set():
                    part = block[:left]
                    h.wfile.write(part)
                    left -= len(part)
            elif self.mode == "hugejson":
                h.send_response(200)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", str(self.big_bytes))
                h.end_headers()
                head, tail = b'{"text": "', b'"}'
                h.wfile.write(head)
                block = b"x" * MIB
                left = self.big_bytes - len(head) - len(tail)
                while left > 0 and not self.stopping.is_set():
                    part = block[:left]
                    h.wfile.write(part)
                    left -= len(part)
                h.wfile.write(tail)
            elif self.mode == "drip":
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"
                i = 0
                while not self.stopping.is_set():
                    h.wfile.write(head[i:i + 1] if i < len(head) else b"x")
                    h.wfile.flush()
                    i += 1
                    time.sleep(self.drip_s)
            elif h.path == "/metrics":
                h.send_response(200)
                h.send_header("Content-Type", "text/plain")
                h.send_header("Content-Length", str(self.big_bytes))
                h.end_headers()
                block = METRIC_LINE * (MIB // len(METRIC_LINE))
                sent = 0
                while sent < self.big_bytes and not self.stopping.is_set():
                    part = block[: self.big_bytes - sent]
                    h.wfile.write(part)
                    sent += len(part)
            else:
                body = b"{}" if h.path != "/health" else b""
                h.send_response(200 if h.path == "/health" else 404)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body)
        except OSError:
            pass  # the client gave up: that is the point

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, ctype: str, body: bytes, encoding: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Encoding", encoding)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


class TracedPeak:
    """`with TracedPeak() as peak:` ... then `peak.bytes`: the most memory Python held at once
    inside the block (tracemalloc's peak above what was held on entry). Every bytes object a
    decoder or an HTTP client makes is traced, so this is the read's own high-water mark."""

    def __init__(self) -> None:
        self.bytes = 0
        self._base = 0

    def __enter__(self) -> TracedPeak:
        tracemalloc.start()
        tracemalloc.reset_peak()
        self._base = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self.bytes = tracemalloc.get_traced_memory()[1] - self._base
        tracemalloc.stop()
