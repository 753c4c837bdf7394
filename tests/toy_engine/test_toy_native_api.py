"""The probe speaks an engine's native API through the seam: the toy engine (this folder)
registers `toygen` (its own path, body and chunk shape: collectors/native_api.py), and the probe's
API table, request bodies and stream parser use it with no change of theirs.

The toy server runs as a real process on 127.0.0.1; it answers 400 to any body not of its shape,
so a successful request proves the body came from the toy's builder.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator

import pytest
from pwtest import free_port

import toy_engine
from collectors.engines import ENGINES
from collectors.probe.client import RequestRecord, make_session, send
from collectors.probe.sse import StreamParser
from collectors.probe.sweep import SweepSpec, run_sweep
from collectors.probe.workloads import Prompt, WorkloadSpec, api_paths, request_body

pytestmark = pytest.mark.timeout(60)


@pytest.fixture()
def toy_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)  # the one line
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(toy_engine.SERVER), "--port", str(port), "--tick", "60"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "TOY READY"
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _send(url: str, text: str, tokens: int) -> RequestRecord:
    path, body = request_body("toygen", Prompt("p", text), WorkloadSpec(max_new_tokens=tokens))

    async def go() -> RequestRecord:
        async with make_session() as session:
            return await send(session, url + path, "toygen", body, keep_text=True)
    return asyncio.run(go())


def test_the_probe_speaks_the_toys_native_api(toy_url: str) -> None:
    assert api_paths()["toygen"] == "/toy_generate"
    assert api_paths()["generate"] == "/generate"  # SGLang's stays beside it
    path, body = request_body("toygen", Prompt("p", "two words"), WorkloadSpec(max_new_tokens=3, top_k=5))
    assert (path, body) == ("/toy_generate", {"prompt": "two words", "limit": 3,
                                              "knobs": {"temperature": 0.0, "top_k": 5}, "stream": True})
    rec = _send(toy_url, "two words", 3)
    # 3 chunks of one token each: incremental pieces joined, counts from "emitted" / "read"
    assert rec.ok, (rec.error_kind, rec.error_detail)
    assert rec.output_text == " t0 t1 t2" and (rec.tokens_in, rec.tokens_out) == (2, 3)
    assert rec.finish_reason == "length" and rec.ttft_s is not None and len(rec.itl_s) == 2


def test_the_toys_abort_reader_turns_a_refusal_into_an_error_kind(toy_url: str) -> None:
    rec = _send(toy_url, "please refuse", 3)
    assert (rec.ok, rec.error_kind, rec.error_detail) == (False, "http_422", "toy refuses this prompt")


def test_a_toy_chunk_of_another_shape_is_an_invalid_response(toy_url: str) -> None:
    from collectors.probe.sse import InvalidResponse

    with pytest.raises(InvalidResponse, match="/toy_generate chunk lacks 'piece'"):
        StreamParser("toygen").feed(b'data: {"text": "x", "meta_info": {}}')


def test_a_sweep_runs_on_the_toys_native_api(toy_url: str) -> None:
    spec = SweepSpec(url=toy_url, api="toygen", levels=[1], requests=3, warmup=0, discover_model=False,
                     workload=WorkloadSpec(max_new_tokens=4))
    report = asyncio.run(run_sweep(spec)).to_dict()
    level = report["levels"][0]
    assert report["status"] == "done" and level["ok"] == 3 and level["errors"] == {}
