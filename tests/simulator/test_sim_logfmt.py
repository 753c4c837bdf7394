"""Log line formatters and rank/ms prefixes against SGLang 0.5.23's forms (sim_forms.py)."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import httpx
from conftest import FAST, WAIT_S, StartSim
from sim_forms import ABORT, ACCESS, DECODE, HEAD, KV, PREFILL, PREFIX, RETRACT, check_log

from simulator import logfmt


def test_prefill_line_form_and_generic_parse() -> None:
    line = logfmt.prefill_line(new_seq=1, new_token=20, cached_token=5, token_usage=0.004,
                               running_req=0, queue_req=0, pending_token=0, cuda_graph=False,
                               input_throughput=1234.564)
    # An exact 0.5.11-0.5.23 Prefill line.
    assert line == ("Prefill batch, #new-seq: 1, #new-token: 20, #cached-token: 5, "
                    "token usage: 0.00, #running-req: 0, #queue-req: 0, #pending-token: 0, "
                    "cuda graph: False, input throughput (token/s): 1234.56")
    assert PREFILL.match(line)
    body = HEAD.sub("", line, count=1)
    keys = [m.group("key") for m in KV.finditer(body)]
    assert keys == ["#new-seq", "#new-token", "#cached-token", "token usage", "#running-req",
                    "#queue-req", "#pending-token", "cuda graph", "input throughput (token/s)"]


def test_decode_and_retract_lines() -> None:
    line = logfmt.decode_line(running_req=3, num_token=512, token_usage=0.0123, cuda_graph=True,
                              gen_throughput=123.454, queue_req=0)
    # A 0.5.9-0.5.23 Decode line (no trailing comma).
    assert line == ("Decode batch, #running-req: 3, #token: 512, token usage: 0.01, "
                    "cuda graph: True, gen throughput (token/s): 123.45, #queue-req: 0")
    assert DECODE.match(line)
    r = logfmt.retract_line(retracted=2, tokens_gained=300, old_ratio=0.1, new_ratio=0.5)
    assert RETRACT.match(r)
    # The reference's version-spanning regex still finds the count.
    assert re.search(r"(Decode out of memory happened|KV cache pool is full\. Retract requests)"
                     r"\. #retracted_reqs: (\d+)", r).group(2) == "2"  # type: ignore[union-attr]


def test_prefix_ranks_and_access() -> None:
    assert logfmt.rank_tags(dp_rank=None, tp_rank=0, tp_size=1) == ""
    assert logfmt.rank_tags(dp_rank=None, tp_rank=1, tp_size=2) == " TP1"
    assert logfmt.rank_tags(dp_rank=1, tp_rank=0, tp_size=1) == " DP1"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}",
                        logfmt.timestamp(0.5, with_ms=True))
    assert re.fullmatch(r"\d{2}-\d{2} \d{2}:\d{2}:\d{2}",
                        logfmt.timestamp(0.5, with_ms=False, diffusion=True))
    acc = logfmt.access_msg("127.0.0.1:5678", "POST", "/generate", 200)
    assert acc == 'INFO:     127.0.0.1:5678 - "POST /generate HTTP/1.1" 200 OK'
    assert ACCESS.match(acc)


def test_tp_dp_rank_tags_and_ms_timestamps_live(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--tp-size", "2", "--dp-size", "2", "--decode-log-interval", "2",
                    env={"SGLANG_LOG_MS": "1"})
    for _ in range(2):  # round-robin over the two DP ranks
        httpx.post(sim.base + "/generate", timeout=WAIT_S,
                   json={"text": "hi there", "sampling_params": {"max_new_tokens": 4}})
    log = sim.log()
    assert check_log(log)[0] == []
    ranks = {m.group("ranks") for m in map(PREFIX.match, log.splitlines())
             if m and m.group("msg").startswith("Load weight begin")}
    assert ranks == {" DP0 TP0", " DP0 TP1", " DP1 TP0", " DP1 TP1"}
    batch_ranks = {m.group("ranks") for m in map(PREFIX.match, log.splitlines())
                   if m and m.group("msg").startswith(("Prefill batch", "Decode batch"))}
    assert batch_ranks == {" DP0 TP0", " DP1 TP0"}  # only attn-TP rank 0 logs batches
    assert all(re.match(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}", x)
               for x in log.splitlines() if x.startswith("[2"))


def test_client_disconnect_aborts_request(start_sim: StartSim) -> None:
    # model time at wall speed: 100,000 new tokens take minutes, so the stream is still running
    # whenever the client hangs up, however late a loaded host lets it (at --sim-speed 50 a
    # 5000-token stream could finish before a late hang-up, and there was no disconnect to see)
    sim = start_sim("--sim-speed", "1", "--sim-startup-s", "0.2", "--log-requests")

    async def drop() -> None:
        async with aiohttp.ClientSession() as s:
            body = {"text": "long", "stream": True, "sampling_params": {"max_new_tokens": 100000}}
            async with s.post(sim.base + "/generate", json=body) as r:
                await r.content.readline()  # first chunk, then hang up

    asyncio.run(drop())
    sim.wait_for("Request is disconnected from the client side (type 1)")
    msgs = [m.group("msg") for m in map(PREFIX.match, sim.log().splitlines()) if m]
    assert any(ABORT.match(m) for m in msgs)
    assert any(m.startswith("Receive: obj=GenerateReqInput(rid=") for m in msgs)


def test_hot_path_stream_chunk_equals_generic_sse() -> None:
    from simulator import llm_api

    meta = llm_api.meta_info(rid='a"b', prompt_tokens=7, completion_tokens=2, cached_tokens=3,
                             finish_reason=None, num_retractions=1, final=False,
                             timing={"forward_entry_time": 1.5, "prefill_finished_time": 2.0,
                                     "queue_time": 0.25})
    head, tail = llm_api.split_meta_json(meta)
    assert head + "2" + tail == llm_api.compact_dumps(meta)
    chunk = llm_api.native_chunk(text=' a "b"', ids_json="5,6", meta_json=head + "2" + tail,
                                 index=None)
    assert chunk == llm_api.sse({"text": ' a "b"', "output_ids": [5, 6], "meta_info": meta})
