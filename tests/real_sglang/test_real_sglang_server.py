"""The real SGLang 0.5.23 server on CPU answers in the forms Pitwall reads (the tier's shared server).

What this pins down, on the real thing: the ready/startup lines, the 0.5.23 Prefill/Decode line
fields, /health, /generate (plain and streamed), the OpenAI streams with usage, radix-cache hits,
exact /metrics counter deltas, /server_info and /v1/loads (that the sgl_kernel stub is never called
and a clean SIGTERM shutdown: test_real_sglang_zz_shutdown.py). Skips (visibly) when
`make sglang-cpu` has not been run.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from real_sglang_helpers import kv_keys, rs, sse_json

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]

PREFILL_KEYS = [
    "#new-seq", "#new-token", "#cached-token", "token usage", "#running-req", "#queue-req",
    "#pending-token", "cpu graph", "input throughput (token/s)",
]
DECODE_KEYS = [
    "#running-req", "#token", "token usage", "cpu graph", "gen throughput (token/s)", "#queue-req",
]
SHARED = (
    "A shared system prompt is repeated so the radix cache can reuse its tokens. "
    "Pitwall watches SGLang inference servers: prefill, decode, cache hits and queues. "
)
TIMEOUT = httpx.Timeout(120.0)


def _gen(base: str, text: str, n: int, **extra: Any) -> dict[str, Any]:
    body = {"text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}}
    body.update(extra)
    r = httpx.post(f"{base}/generate", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _stream(base: str, path: str, body: dict[str, Any]) -> tuple[httpx.Headers, bytes]:
    with httpx.stream("POST", f"{base}{path}", json=body, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        return r.headers, r.read()


def _counters(base: str) -> dict[str, float]:
    """Counter samples summed over labels: {'sglang:num_requests_total': 11.0, ...}."""
    text = httpx.get(f"{base}/metrics", timeout=TIMEOUT).text
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        if fam.type == "counter":
            for s in fam.samples:
                if s.name.endswith("_total"):
                    out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def _lines(server: Any, head: str) -> list[str]:
    return [ln for ln in server.log_text().splitlines() if f"] {head}, " in ln]


def test_startup_lines_in_real_log(real_server: Any) -> None:
    log = real_server.log_text()
    for needle in (
        rs.READY_LINE, "Load weight end", "KV Cache is allocated", "max_total_num_tokens=4096",
        f"Uvicorn running on http://127.0.0.1:{real_server.base_url.rsplit(':', 1)[1]}",
    ):
        assert needle in log, f"{needle!r} missing from the real server log"


def test_health_endpoints_answer_200_with_empty_body(real_server: Any) -> None:
    for path in ("/health", "/health_generate"):
        r = httpx.get(real_server.base_url + path, timeout=TIMEOUT)
        assert (r.status_code, r.content) == (200, b""), path


def test_generate_returns_exactly_the_requested_tokens(real_server: Any) -> None:
    out = _gen(real_server.base_url, "hello world", 7)
    assert set(out) == {"text", "output_ids", "meta_info"}
    meta = out["meta_info"]
    assert len(out["output_ids"]) == 7 == meta["completion_tokens"]
    assert meta["finish_reason"] == {"type": "length", "length": 7}
    assert meta["prompt_tokens"] > 0 and 0 <= meta["cached_tokens"] <= meta["prompt_tokens"]
    # temperature 0 on the same dummy weights: identical output ids on a repeat
    assert _gen(real_server.base_url, "hello world", 7)["output_ids"] == out["output_ids"]


def test_generate_stream_is_cumulative_sse_ending_in_done(real_server: Any) -> None:
    body = {"text": "hello world", "stream": True,
            "sampling_params": {"max_new_tokens": 5, "temperature": 0, "ignore_eos": True}}
    headers, raw = _stream(real_server.base_url, "/generate", body)
    assert headers["content-type"].startswith("text/event-stream")
    assert raw.rstrip().endswith(b"data: [DONE]")
    chunks = sse_json(raw)
    ids = [c["output_ids"] for c in chunks]
    # cumulative: each chunk extends the last and the final one holds all 5 tokens. How many
    # tokens one chunk carries is the server's choice under load (stream_interval, a busy CPU),
    # so the count per chunk is not asserted (it failed once on a loaded machine).
    lengths = [len(i) for i in ids]
    assert lengths[-1] == 5 and all(a < b for a, b in zip(lengths, lengths[1:], strict=False))
    assert all(ids[k][: len(ids[k - 1])] == ids[k - 1] for k in range(1, len(ids)))
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 5}
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])


def test_shared_prefix_hits_radix_cache_and_prefill_line_agrees(real_server: Any) -> None:
    first = _gen(real_server.base_url, SHARED + "First: what is the capital of France?", 3)
    second = _gen(real_server.base_url, SHARED + "Second: count to ten.", 3)
    assert first["meta_info"]["cached_tokens"] < second["meta_info"]["cached_tokens"]
    cached = second["meta_info"]["cached_tokens"]
    new = second["meta_info"]["prompt_tokens"] - cached
    # the Prefill line of that batch logs the same split: #new-token + #cached-token = prompt
    assert any(f"#new-token: {new}, #cached-token: {cached}," in ln for ln in _lines(real_server, "Prefill batch"))


def test_concurrent_streams_show_batched_decode_lines(real_server: Any) -> None:
    errors: list[BaseException] = []

    def one(i: int) -> None:
        body = {"text": f"Tell me a story about robot {i}.", "stream": True,
                "sampling_params": {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True}}
        try:
            chunks = sse_json(_stream(real_server.base_url, "/generate", body)[1])
            assert chunks[-1]["meta_info"]["completion_tokens"] == 40
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not errors, errors
    running = [int(m.group(1)) for ln in _lines(real_server, "Decode batch")
               if (m := re.search(r"#running-req: (\d+),", ln))]
    assert running and max(running) >= 2, f"no batched Decode line: {running}"


def test_prefill_and_decode_lines_have_the_0523_fields_in_order(real_server: Any) -> None:
    _gen(real_server.base_url, "The quick brown fox", 12)  # >= decode-log-interval 10 steps
    prefill, decode = _lines(real_server, "Prefill batch"), _lines(real_server, "Decode batch")
    assert prefill and decode
    for ln in prefill:
        assert kv_keys(ln) == PREFILL_KEYS, ln
    for ln in decode:
        assert kv_keys(ln) == DECODE_KEYS, ln
        assert not ln.endswith(","), "0.5.9+ decode lines have no trailing comma"


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_openai_stream_ends_with_usage_chunk(real_server: Any, path: str) -> None:
    body: dict[str, Any] = {"model": "default", "max_tokens": 4, "temperature": 0, "ignore_eos": True,
                            "stream": True, "stream_options": {"include_usage": True}}
    if path.endswith("chat/completions"):
        body["messages"] = [{"role": "user", "content": "hi there"}]
    else:
        body["prompt"] = "hello world"
    _, raw = _stream(real_server.base_url, path, body)
    assert raw.rstrip().endswith(b"data: [DONE]")
    chunks = sse_json(raw)
    last = chunks[-1]
    assert last["choices"] == []
    usage = last["usage"]
    assert usage["completion_tokens"] == 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + 4
    assert "cached_tokens" in usage["prompt_tokens_details"]  # --enable-cache-report


def test_metrics_counters_move_by_exactly_one_request(real_server: Any) -> None:
    before = _counters(real_server.base_url)
    out = _gen(real_server.base_url, "Count from one to ten:", 6)
    after = _counters(real_server.base_url)
    meta = out["meta_info"]
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    assert delta["sglang:num_requests_total"] == 1
    assert delta["sglang:generation_tokens_total"] == 6
    assert delta["sglang:prompt_tokens_total"] == meta["prompt_tokens"]


def test_metrics_core_families_types_and_labels(real_server: Any) -> None:
    text = httpx.get(f"{real_server.base_url}/metrics", timeout=TIMEOUT).text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    expect = {
        "sglang:num_running_reqs": "gauge", "sglang:num_queue_reqs": "gauge",
        "sglang:token_usage": "gauge", "sglang:gen_throughput": "gauge",
        "sglang:cache_hit_rate": "gauge", "sglang:max_total_num_tokens": "gauge",
        "sglang:prompt_tokens": "counter", "sglang:generation_tokens": "counter",
        "sglang:num_requests": "counter", "sglang:cached_tokens": "counter",
        "sglang:time_to_first_token_seconds": "histogram",
        "sglang:inter_token_latency_seconds": "histogram",
        "sglang:e2e_request_latency_seconds": "histogram",
        "sglang:queue_time_seconds": "histogram",
    }
    got = {name: fams[name].type if name in fams else None for name in expect}
    assert got == expect
    labels = set(fams["sglang:num_running_reqs"].samples[0].labels)
    assert {"model_name", "engine_type", "tp_rank", "pp_rank"} <= labels
    max_tokens = fams["sglang:max_total_num_tokens"].samples[0].value
    assert max_tokens == 4096  # --max-total-tokens 4096


def test_server_info_and_loads_report_the_launch(real_server: Any) -> None:
    info = httpx.get(f"{real_server.base_url}/server_info", timeout=TIMEOUT).json()
    assert info["version"] == "0.5.23"
    assert (info["max_total_tokens"], info["decode_log_interval"], info["enable_metrics"]) == (4096, 10, True)
    assert info["disable_radix_cache"] is False and info["device"] == "cpu"
    assert "last_gen_throughput" in info["internal_states"][0]
    loads = httpx.get(f"{real_server.base_url}/v1/loads", timeout=TIMEOUT).json()
    assert loads["version"] == "0.5.23"
    assert loads["loads"][0]["max_total_num_tokens"] == 4096

