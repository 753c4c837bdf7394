"""A tiny SGLang/OpenAI-shaped streaming server that stamps its true send times.

Runs as its own process (`python tests/probe/probe_stub_server.py --port 0`, prints `PORT <n>`
when listening on 127.0.0.1) so the client under test never shares its event loop. Every stamp
is `time.perf_counter()` (CLOCK_MONOTONIC, the same clock as the client in another process on
this host): per request id (the client's `X-Request-Id` header) `t0` = request parsed and `ts` =
each chunk about to be written to the socket. `GET /stamps` returns and clears them.

Behaviour is chosen per request by a path prefix, so one server serves every failure test:
`/mode/<mode>/generate` etc. Modes: `ok` (same as no prefix), `hang` (never answers),
`status<code>` (answers HTTP <code>), `badjson` (a non-JSON SSE data line), `nodone` (ends the
stream without [DONE]), `die` (the process exits after the second chunk: killed mid-stream),
`multi` (two tokens per chunk), `reason` (chat: first half of the tokens on reasoning_content).

Token k of a prompt is a word chosen by a hash of (prompt, k), so greedy outputs are repeatable.
Tokens are sent at t0 + first_delay + k x delay (absolute schedule, no drift).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import hashlib
import json
import os
import time
from typing import Any

from aiohttp import web

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
STAMPS: dict[str, dict[str, Any]] = {}


def token(prompt: str, k: int) -> str:
    h = hashlib.sha256(f"{prompt}|{k}".encode()).digest()
    return " " + WORDS[h[0] % len(WORDS)]


async def _sleep_until(t: float) -> None:
    d = t - time.perf_counter()
    if d > 0:
        await asyncio.sleep(d)


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def handle_stream(api: str, request: web.Request) -> web.StreamResponse:
    t0 = time.perf_counter()
    cfg = request.app["cfg"]
    mode = request.match_info.get("mode", "ok")
    if mode == "hang":
        await asyncio.sleep(3600)
    if mode.startswith("status"):
        return web.json_response({"error": {"message": "stub error"}}, status=int(mode[6:]))
    body = await request.json()
    rid = request.headers.get("X-Request-Id", "")
    stamps = STAMPS.setdefault(rid, {"t0": t0, "ts": [], "auth": request.headers.get("Authorization")})
    if api == "generate":
        prompt = body.get("text", "")
        n = int(body.get("sampling_params", {}).get("max_new_tokens", 16))
    else:
        prompt = body.get("prompt") or json.dumps(body.get("messages"))
        n = int(body.get("max_tokens", 16))
    per_chunk = 2 if mode == "multi" else 1
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    text = ""
    sent = 0
    chunk_i = 0
    while sent < n:
        await _sleep_until(t0 + cfg.first_delay + chunk_i * cfg.delay)
        k = min(per_chunk, n - sent)
        piece = "".join(token(prompt, sent + j) for j in range(k))
        sent += k
        text += piece
        if mode == "badjson":
            data = b"data: {not json\n\n"
        elif api == "generate":
            meta = {"id": rid, "prompt_tokens": len(prompt.split()), "completion_tokens": sent,
                    "cached_tokens": 3, "finish_reason": {"type": "length", "length": n} if sent == n else None}
            data = _sse({"text": text, "output_ids": list(range(sent)), "meta_info": meta})
        elif api == "chat":
            field = "reasoning_content" if mode == "reason" and sent <= n // 2 else "content"
            data = _sse({"choices": [{"index": 0, "delta": {field: piece}}]})
        else:
            data = _sse({"choices": [{"index": 0, "text": piece}]})
        # stamped just before the write: a lower bound of the send instant, so the client can
        # never legitimately see the chunk before its stamp (inflation is never under-stated)
        stamps["ts"].append(time.perf_counter())
        await resp.write(data)
        chunk_i += 1
        if mode == "die" and chunk_i == 2:
            os._exit(1)
    if api != "generate" and (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n, "total_tokens": n,
                 "prompt_tokens_details": {"cached_tokens": 2}}
        await resp.write(_sse({"choices": [], "usage": usage}))
    if mode != "nodone":
        await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def handle_image(request: web.Request) -> web.Response:
    cfg = request.app["cfg"]
    mode = request.match_info.get("mode", "ok")
    if mode.startswith("status"):
        return web.json_response({"error": {"message": "stub error"}}, status=int(mode[6:]))
    body = await request.json()
    await asyncio.sleep(cfg.first_delay)
    n = int(body.get("n", 1))
    img = base64.b64encode(hashlib.sha256(body["prompt"].encode()).digest()).decode()
    return web.json_response({"created": 0, "data": [{"b64_json": img}] * n, "inference_time_s": cfg.first_delay})


async def handle_stamps(_request: web.Request) -> web.Response:
    out = dict(STAMPS)
    STAMPS.clear()
    return web.json_response(out)


async def handle_models(_request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "stub-model"}]})


def make_app(delay: float, first_delay: float) -> web.Application:
    app = web.Application()
    app["cfg"] = argparse.Namespace(delay=delay, first_delay=first_delay)
    stream_paths = {"generate": "/generate", "completions": "/v1/completions", "chat": "/v1/chat/completions"}
    for api, path in stream_paths.items():
        for prefix in ("", "/mode/{mode}"):
            app.router.add_post(prefix + path, functools.partial(handle_stream, api))
    for prefix in ("", "/mode/{mode}"):
        app.router.add_post(prefix + "/v1/images/generations", handle_image)
    app.router.add_get("/stamps", handle_stamps)
    app.router.add_get("/v1/models", handle_models)
    return app


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--delay-ms", type=float, default=10.0)
    p.add_argument("--first-delay-ms", type=float, default=10.0)
    args = p.parse_args()

    async def run() -> None:
        app = make_app(args.delay_ms / 1000, args.first_delay_ms / 1000)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", args.port, backlog=1024)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"PORT {port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()


def spawn(delay_ms: float = 2.0, first_delay_ms: float = 20.0, timeout_s: float = 20.0):  # type: ignore[no-untyped-def]
    """Start the server as a subprocess; returns (Popen, port). Caller kills it."""
    import selectors
    import subprocess
    import sys

    argv = [sys.executable, __file__, "--port", "0", "--delay-ms", str(delay_ms),
            "--first-delay-ms", str(first_delay_ms)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout_s):
        proc.kill()
        raise RuntimeError("stub server did not start in time")
    line = proc.stdout.readline()
    if not line.startswith("PORT"):
        proc.kill()
        raise RuntimeError(f"stub server failed to start: {line!r}")
    return proc, int(line.split()[1])
