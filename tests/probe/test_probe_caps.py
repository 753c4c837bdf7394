"""The probe's SSE reader is linear and capped: one line past 1 MiB or a response past 64 MiB is
error_kind "too_large", not a growing buffer."""

from __future__ import annotations

import asyncio

from aiohttp import web

from collectors.probe.client import MAX_SSE_LINE_BYTES, make_session, send

PIECE = b"x" * (64 * 1024)


async def _serve_and_send(pieces: int, newline_every: int | None) -> tuple[str | None, str]:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(pieces):
            await resp.write(PIECE)
            if newline_every and (i + 1) % newline_every == 0:
                await resp.write(b"\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/generate", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with make_session() as session:
            rec = await send(session, f"http://127.0.0.1:{port}/generate", "generate", {"text": "hi"},
                             timeout_s=60)
    finally:
        await runner.cleanup()
    return rec.error_kind, rec.error_detail


def test_one_sse_line_past_the_cap_is_too_large() -> None:
    # 2 MiB of one line in 64 KiB pieces, no newline: stopped at 1 MiB
    kind, detail = asyncio.run(_serve_and_send(32, None))
    assert kind == "too_large"
    assert f"one SSE line passed {MAX_SSE_LINE_BYTES >> 20} MiB (limit)" in detail


def test_a_response_past_the_cap_is_too_large() -> None:
    # 65 MiB in 256 KiB lines (each under the line cap): stopped at 64 MiB in total
    kind, detail = asyncio.run(_serve_and_send(65 * 16, 4))
    assert kind == "too_large" and "the response passed 64 MiB (limit)" in detail
