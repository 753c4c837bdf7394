"""The toy engine's server: a tiny HTTP server started as a real process by the supervisor.

It says `TOY READY` when it listens, then one `toy: served=<n>` line a tick on stdout (the
launch log), serves /healthz (200), /about ({"toy_version": "9.9"}) and /toy_metrics (one
Prometheus-style line `toy_served_total <n>`), and stops on SIGTERM.

POST /toy_generate (its native API) takes `{"prompt", "limit", "knobs", "stream": true}` (400
otherwise) and streams `limit` chunks `data: {"piece": " t<k>", "emitted": k+1, "read": <prompt
words>}`, the last with `"end": "length"`, then `data: [DONE]`; a prompt containing "refuse" gets
one chunk `{"piece": "", "end": "refused", "status": 422, "why": ...}` in a 200 stream.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "9.9"
served = 0


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        routes = {"/healthz": ("text/plain", "ok"),
                  "/about": ("application/json", json.dumps({"toy_version": VERSION})),
                  "/toy_metrics": ("text/plain", f"toy_served_total {served}\n")}
        if self.path not in routes:
            self.send_error(404)
            return
        kind, body = routes[self.path]
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw or b"{}")
        if self.path != "/toy_generate":
            self.send_error(404)
            return
        if not isinstance(body.get("prompt"), str) or not isinstance(body.get("limit"), int) \
                or body.get("stream") is not True or not isinstance(body.get("knobs"), dict):
            self.send_error(400, "want prompt, limit, knobs and stream: true")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        words = len(body["prompt"].split())
        if "refuse" in body["prompt"]:
            chunks = [{"piece": "", "end": "refused", "status": 422, "why": "toy refuses this prompt"}]
        else:
            chunks = [{"piece": f" t{k}", "emitted": k + 1, "read": words} for k in range(body["limit"])]
            chunks[-1]["end"] = "length"
        for chunk in chunks:
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
        pass


def main() -> int:
    global served
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tick", type=float, default=0.2)
    args = ap.parse_args()
    httpd = ThreadingHTTPServer((args.host, args.port), Handler)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print("TOY READY", flush=True)
    while not stop.wait(args.tick):
        served += 3
        print(f"toy: served={served}", flush=True)
    httpd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
