"""A lean stamping SSE server for bench/probe_overhead.py: raw asyncio.Protocol, HTTP/1.1
keep-alive, chunked SSE in the SGLang /generate shape (cumulative text + meta_info).

The aiohttp stub server of the tests (tests/probe/probe_stub_server.py) cannot push 128 streams
x 100 tokens/s from one core, so the throughput figure would measure the server. This one does
a few microseconds of work per chunk. Stamps (time.perf_counter, CLOCK_MONOTONIC): `t0` when the
request is parsed, `ts[k]` just before chunk k is handed to the socket; `GET /stamps` returns
and clears them. Token k is sent at t0 + (k + 1) x delay (absolute schedule).

    python bench/stamp_server.py --port 0 --delay-ms 10     # prints "PORT <n>"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

STAMPS: dict[str, dict[str, Any]] = {}
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Proto(asyncio.Protocol):
    delay = 0.01

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr: asyncio.Transport = transport  # type: ignore[assignment]
        self.buf = b""
        self.loop = asyncio.get_running_loop()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
            n = int(headers.get("content-length", "0"))
            if len(self.buf) < end + 4 + n:
                return
            body = self.buf[end + 4:end + 4 + n]
            self.buf = self.buf[end + 4 + n:]
            method, path = head[0].split(" ")[:2]
            self.handle(method, path, headers, body)

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        if method == "GET" and path == "/stamps":
            out = json.dumps(STAMPS).encode()
            STAMPS.clear()
            self.tr.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (len(out), out))
            return
        t0 = time.perf_counter()
        req = json.loads(body)
        rid = headers.get("x-request-id", "")
        stamps = STAMPS[rid] = {"t0": t0, "ts": []}
        n = int(req.get("sampling_params", {}).get("max_new_tokens", 16))
        self.tr.write(HEAD)
        base = self.loop.time() - (time.perf_counter() - t0)  # t0 on the loop clock
        self.loop.call_at(base + self.delay, self.token, base, 0, n, stamps, "")

    def token(self, base: float, k: int, n: int, stamps: dict[str, Any], text: str) -> None:
        if self.tr.is_closing():
            return
        text += " tok"
        obj = {"text": text, "meta_info": {"prompt_tokens": 2, "completion_tokens": k + 1, "cached_tokens": 0}}
        data = _chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")
        if k + 1 == n:
            data += _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        stamps["ts"].append(time.perf_counter())
        self.tr.write(data)
        if k + 1 < n:
            self.loop.call_at(base + (k + 2) * self.delay, self.token, base, k + 1, n, stamps, text)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--delay-ms", type=float, default=10.0)
    args = p.parse_args()
    Proto.delay = args.delay_ms / 1000

    async def run() -> None:
        server = await asyncio.get_running_loop().create_server(Proto, "127.0.0.1", args.port, backlog=2048)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()

    asyncio.run(run())


if __name__ == "__main__":
    main()
