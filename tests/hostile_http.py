"""Hostile HTTP servers on 127.0.0.1 for the caps tests (real sockets, threads, no mocks).

`HostileServer("drip")` answers every path one byte every `drip_s` seconds forever (the response
head included); `HostileServer("big", big_bytes=N)` answers `/metrics` with N bytes of a repeated
valid Prometheus line, generated as it is written (never held in memory), and `/health` with 200.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METRIC_LINE = b'sglang:num_running_reqs{model_name="m"} 1\n'
MIB = 1024 * 1024


class HostileServer:
    def __init__(self, mode: str, *, big_bytes: int = 300 * MIB, drip_s: float = 0.5) -> None:
        self.mode = mode
        self.big_bytes = big_bytes
        self.drip_s = drip_s
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

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        try:
            if self.mode == "drip":
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
