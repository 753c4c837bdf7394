"""Hostile SGLang look-alikes on 127.0.0.1 for the hostile-server tier (real sockets, threads).

Each `FakeSGLang(behaviour)` answers SGLang's control endpoints like a healthy 0.5.23 server
(/health, /server_info, /get_model_info, /v1/loads from the real-CPU golden files) and misbehaves
on `/metrics` only, so one behaviour leaves one trace. `served` lists the sequence numbers of the
/metrics answers it finished writing; the healthy one exports that number as
`sglang:num_running_reqs`, so a test can tell exactly which scrapes reached storage.

Behaviours (what a server of the field did, or could do, to a reader):
- healthy:    a small valid payload whose running-request gauge is the scrape's sequence number.
- nonfinite:  counters reading +Inf and NaN beside good series (Inf - Inf = NaN downstream).
- labels:     100,000 values of a split label (`tp_rank`), about 6 MiB a scrape.
- huge_bad:   15 MiB of valid series (under the 16 MiB cap) with one bad last line (the parser's slow path).
- malformed:  garbage lines between good ones (a broken exporter, a proxy's error page spliced in).
- gzip_bomb:  `Content-Encoding: gzip, gzip`, a few KiB that inflate to 1 GiB.
- deflate_bomb: `Content-Encoding: deflate, gzip`, the same with a zlib stream inside.
- drip:       a valid answer, one byte every half second.
- endless:    a chunked answer that never ends, as fast as the socket takes it.
- stall:      the response head, then nothing: the body never comes.
"""

from __future__ import annotations

import io
import threading
import time
from functools import cache
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from hostile_http import LoopbackServer, bomb

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MIB = 1024 * 1024

LABELS = 'model_name="Qwen/Qwen2.5-7B-Instruct",engine_type="unified",tp_rank="0",pp_rank="0"'
HEALTHY = (
    "# HELP sglang:num_running_reqs The number of running requests.\n"
    "# TYPE sglang:num_running_reqs gauge\n"
    f"sglang:num_running_reqs{{{LABELS}}} {{seq}}\n"
    "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n"
    "# TYPE sglang:num_queue_reqs gauge\n"
    f"sglang:num_queue_reqs{{{LABELS}}} 0.0\n"
    "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
    "# TYPE sglang:prompt_tokens_total counter\n"
    f"sglang:prompt_tokens_total{{{LABELS}}} {{tokens}}\n"
)


def healthy_payload(seq: int) -> bytes:
    return HEALTHY.replace("{seq}", f"{float(seq)}").replace("{tokens}", f"{100.0 * seq}").encode()


def nonfinite_payload(seq: int) -> bytes:
    inf = "+Inf" if seq % 2 else "NaN"
    return (
        "# TYPE sglang:generation_tokens_total counter\n"
        f"sglang:generation_tokens_total{{{LABELS}}} +Inf\n"
        "# TYPE sglang:prompt_tokens_total counter\n"
        f"sglang:prompt_tokens_total{{{LABELS}}} {inf}\n"
        "# TYPE sglang:token_usage gauge\n"
        f"sglang:token_usage{{{LABELS}}} NaN\n"
        "# TYPE sglang:num_queue_reqs gauge\n"
        f"sglang:num_queue_reqs{{{LABELS}}} -Inf\n"
        "# TYPE sglang:num_running_reqs gauge\n"
        f"sglang:num_running_reqs{{{LABELS}}} {seq}.0\n"
    ).encode()


@cache
def labels_payload(n: int = 100_000) -> bytes:
    out = io.StringIO()
    out.write("# HELP sglang:token_usage The token usage.\n# TYPE sglang:token_usage gauge\n")
    for i in range(n):
        out.write(f'sglang:token_usage{{model_name="m",engine_type="unified",tp_rank="{i}",pp_rank="0"}} 0.5\n')
    return out.getvalue().encode()


@cache
def huge_bad_payload(size: int = 15 * MIB) -> bytes:
    line = 'sglang:num_used_tokens{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",x="%08d"} 12.0\n'
    head = "# HELP sglang:num_used_tokens The number of used tokens.\n# TYPE sglang:num_used_tokens gauge\n"
    parts = [head]
    total, i = len(head), 0
    while total < size:
        s = line % i
        parts.append(s)
        total += len(s)
        i += 1
    parts.append("sglang:num_used_tokens{model_name=\"m\"} not-a-number\n")
    return "".join(parts).encode()


def malformed_payload(seq: int) -> bytes:
    good = healthy_payload(seq).decode().splitlines(keepends=True)
    junk = ["<html><body>502 Bad Gateway</body></html>\n", "sglang:num_queue_reqs{model_name=} 3\n",
            "sglang:token_usage 0.5 0.6 0.7 extra\n"]
    return "".join(good[:3] + junk + good[3:]).encode()


def gzip_bomb() -> bytes:
    """`Content-Encoding: gzip, gzip`: a few KiB that inflate to 1 GiB (tests/hostile_http.py)."""
    return bomb("gzip, gzip", 1024 * MIB)


def deflate_bomb() -> bytes:
    """`Content-Encoding: deflate, gzip`: the same with a zlib stream inside."""
    return bomb("deflate, gzip", 1024 * MIB)


class FakeSGLang(LoopbackServer):
    """One fake SGLang server on a free loopback port (see the module docstring)."""

    def __init__(self, behaviour: str) -> None:
        super().__init__()
        self.behaviour = behaviour
        self.served: list[int] = []
        self._seq = 0
        self._lock = threading.Lock()

    # -- answers ------------------------------------------------------------------------------
    def _send(self, h: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str,
              headers: dict[str, str] | None = None) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        try:
            if path == "/metrics":
                self._metrics(h)
            elif path in ("/health", "/health_generate"):
                self._send(h, 200, b"", "text/plain")
            elif path in ("/server_info", "/get_server_info"):
                self._send(h, 200, (FIXTURES / "sglang-0.5.23-real-cpu-server_info.json").read_bytes(),
                           "application/json")
            elif path in ("/model_info", "/get_model_info"):
                self._send(h, 200, (FIXTURES / "sglang-0.5.23-real-cpu-get_model_info.json").read_bytes(),
                           "application/json")
            elif path == "/v1/loads":
                self._send(h, 200, (FIXTURES / "sglang-0.5.23-real-cpu-v1_loads.json").read_bytes(),
                           "application/json")
            else:
                self._send(h, 404, b'{"detail":"Not Found"}', "application/json")
        except OSError:
            pass  # the reader gave up: that is the point of most behaviours

    def _metrics(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self._seq += 1
            seq = self._seq
        ctype = "text/plain; version=0.0.4; charset=utf-8"
        b = self.behaviour
        if b == "healthy":
            self._send(h, 200, healthy_payload(seq), ctype)
        elif b == "nonfinite":
            self._send(h, 200, nonfinite_payload(seq), ctype)
        elif b == "labels":
            self._send(h, 200, labels_payload(), ctype)
        elif b == "huge_bad":
            self._send(h, 200, huge_bad_payload(), ctype)
        elif b == "malformed":
            self._send(h, 200, malformed_payload(seq), ctype)
        elif b == "gzip_bomb":
            self._send(h, 200, gzip_bomb(), ctype, {"Content-Encoding": "gzip, gzip"})
        elif b == "deflate_bomb":
            self._send(h, 200, deflate_bomb(), ctype, {"Content-Encoding": "deflate, gzip"})
        elif b == "drip":
            body = healthy_payload(seq)
            h.send_response(200)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            for i in range(len(body)):
                if self.stopping.wait(0.5):
                    break
                h.wfile.write(body[i:i + 1])
                h.wfile.flush()
        elif b == "endless":
            h.send_response(200)
            h.send_header("Content-Type", ctype)
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            block = healthy_payload(seq) * 2000
            chunk = b"%x\r\n%s\r\n" % (len(block), block)
            while not self.stopping.is_set():
                h.wfile.write(chunk)
        elif b == "stall":
            h.send_response(200)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", "1000")
            h.end_headers()
            h.wfile.flush()
            self.stopping.wait(120)
        else:
            raise ValueError(f"unknown behaviour {b!r}")
        with self._lock:
            self.served.append(seq)


def log_line(text: str, ts: float | None = None) -> str:
    """One SGLang 0.5.23 scheduler log line stamped `ts`, in local time as the server writes it."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts if ts is not None else time.time()))
    return f"[{stamp} TP0] {text}\n"
