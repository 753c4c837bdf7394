"""The probe client's whole-body reads (a JSON answer to a streamed request, an error answer, an
image, model discovery) are capped after decompression like its SSE reads: a huge JSON answer or
a compression bomb is error_kind "too_large" with the limit named, and memory stays bounded."""

from __future__ import annotations

import asyncio

from hostile_http import MIB, HostileServer, TracedPeak, bomb

from collectors.probe.client import (
    MAX_RESPONSE_BYTES,
    RequestRecord,
    get_json,
    make_session,
    send,
)


def _send(url: str, api: str = "generate") -> RequestRecord:
    async def go() -> RequestRecord:
        async with make_session() as session:
            return await send(session, url, api, {"text": "hi", "stream": True}, timeout_s=60)
    return asyncio.run(go())


def test_a_huge_json_answer_is_refused_at_the_cap_with_memory_bounded():
    # 384 MiB of one JSON object where a streamed answer was asked for; the cap is 64 MiB, so the
    # client holds at most 64 MiB and a piece (reading it whole held the 384 MiB, then its parse)
    with HostileServer("hugejson", big_bytes=384 * MIB) as srv, TracedPeak() as peak:
        rec = _send(srv.url + "/generate")
    assert peak.bytes < MAX_RESPONSE_BYTES + 32 * MIB, f"held {peak.bytes / MIB:.0f} MiB"
    assert rec.error_kind == "too_large", (rec.error_kind, rec.error_detail)
    assert "the response passed 64 MiB (limit), counted after decompression" in (rec.error_detail or "")


def test_a_compression_bomb_on_the_json_path_is_refused_with_memory_bounded():
    # ~6 KiB of "gzip, gzip" inflating to 1 GiB: stopped at 64 MiB decoded
    bomb("gzip, gzip", 1024 * MIB)
    with HostileServer("gzipbomb", bomb_bytes=1024 * MIB) as srv, TracedPeak() as peak:
        rec = _send(srv.url + "/v1/chat/completions", "chat")
        sent = srv.last_headers
    assert peak.bytes < MAX_RESPONSE_BYTES + 32 * MIB, f"held {peak.bytes / MIB:.0f} MiB"
    assert rec.error_kind == "too_large", (rec.error_kind, rec.error_detail)
    assert "passed 64 MiB (limit), counted after decompression" in (rec.error_detail or "")
    assert sent.get("Accept-Encoding") == "gzip, deflate"


def test_a_broken_gzip_answer_is_an_invalid_response():
    with HostileServer("badgzip") as srv:
        rec = _send(srv.url + "/generate")
    assert rec.error_kind == "invalid_response"
    assert "broken gzip body" in (rec.error_detail or "")


def test_model_discovery_reads_at_most_its_cap():
    # a 16 MiB /v1/models is no model list: None, as for any failure, without reading it all
    async def go() -> object:
        async with make_session() as session:
            return await get_json(session, srv.url + "/v1/models", timeout_s=30)
    with HostileServer("hugejson", big_bytes=16 * MIB) as srv, TracedPeak() as peak:
        assert asyncio.run(go()) is None
    assert peak.bytes < 8 * MIB, f"held {peak.bytes / MIB:.0f} MiB"
