"""One live simulator: endpoint JSON shapes, /metrics, log line forms."""

from __future__ import annotations

import json

import pytest
from conftest import FAST, Sim, StartSim
from prometheus_client.parser import text_string_to_metric_families
from sim_forms import check_log

# Key set of a real 0.5.23 /generate meta_info (tests/fixtures/sglang-0.5.23-real-cpu-generate.json,
# --enable-metrics) minus nothing: the simulator must print every one.
META_KEYS = {"id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions",
             "storage_prefetch_wait", "storage_staging_wait", "forward_entry_time",
             "prefill_finished_time", "queue_time", "reasoning_tokens", "completion_tokens",
             "cached_tokens", "weight_versions", "cached_tokens_details", "dp_rank",
             "e2e_latency", "request_received_ts", "first_token_latency",
             "api_server_dispatch_finish_ts", "request_finished_ts", "decode_throughput",
             "response_sent_to_client_ts"}


@pytest.fixture
def sim(start_sim: StartSim) -> Sim:
    return start_sim(*FAST, "--enable-metrics", "--enable-cache-report",
                     "--decode-log-interval", "4", "--served-model-name", "llama-8b")


def sse_events(body: str) -> list[str]:
    assert body.endswith("data: [DONE]\n\n")
    parts = body.split("\n\n")
    assert all(p.startswith("data: ") for p in parts if p)
    return [p[len("data: "):] for p in parts if p]


def test_generate_native_shapes(sim: Sim) -> None:
    with sim.client() as c:
        r = c.post("/generate", json={"text": "The quick brown fox",
                                      "sampling_params": {"max_new_tokens": 6}})
        assert r.status_code == 200
        out = r.json()
        assert set(out) == {"text", "output_ids", "meta_info"}
        assert set(out["meta_info"]) == META_KEYS
        assert out["meta_info"]["completion_tokens"] == 6 == len(out["output_ids"])
        assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 6}
        # Same prompt again: all but the last prompt token come from the radix cache.
        again = c.post("/generate", json={"text": "The quick brown fox",
                                          "sampling_params": {"max_new_tokens": 2}}).json()
        assert again["meta_info"]["cached_tokens"] == again["meta_info"]["prompt_tokens"] - 1
        batch = c.post("/generate", json={"input_ids": [[5, 6, 7], [8, 9]],
                                          "sampling_params": {"max_new_tokens": 3}}).json()
        assert [b["meta_info"]["prompt_tokens"] for b in batch] == [3, 2]
        bad = c.post("/generate", json={"sampling_params": {}})
        assert bad.status_code == 400 and "message" in bad.json()["error"]


def test_generate_stream_is_cumulative(sim: Sim) -> None:
    with sim.client() as c:
        r = c.post("/generate", json={"text": "Hello", "stream": True,
                                      "sampling_params": {"max_new_tokens": 5}})
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(e) for e in sse_events(r.text)[:-1]]
    assert len(events) == 5
    texts = [e["text"] for e in events]
    assert all(b.startswith(a) and len(b) > len(a) for a, b in zip(texts, texts[1:], strict=False))
    assert [len(e["output_ids"]) for e in events] == [1, 2, 3, 4, 5]
    assert [e["meta_info"]["finish_reason"] for e in events[:-1]] == [None] * 4
    assert "e2e_latency" in events[-1]["meta_info"]


def test_openai_shapes_and_cache_report(sim: Sim) -> None:
    with sim.client() as c:
        comp = c.post("/v1/completions", json={"model": "llama-8b", "prompt": "Say hi",
                                               "max_tokens": 4}).json()
        assert comp["object"] == "text_completion"
        assert set(comp["choices"][0]) >= {"index", "text", "logprobs", "finish_reason"}
        assert comp["usage"]["completion_tokens"] == 4
        assert "cached_tokens" in comp["usage"]["prompt_tokens_details"]
        msgs = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Hi"}]
        chat = c.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 3}).json()
        assert chat["object"] == "chat.completion"
        assert chat["choices"][0]["message"]["role"] == "assistant"
        r = c.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 3,
                                                 "stream": True,
                                                 "stream_options": {"include_usage": True}})
        events = [json.loads(e) for e in sse_events(r.text)[:-1]]
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 3
    # Second identical chat: its template prefix is cached and reported.
    assert events[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert events[-2]["choices"][0]["finish_reason"] == "length"


def test_info_endpoints(sim: Sim) -> None:
    with sim.client() as c:
        for path in ("/health", "/health_generate"):
            assert c.get(path).status_code == 200
        info = c.get("/server_info").json()
        assert c.get("/get_server_info").json().keys() == info.keys()
        assert {"internal_states", "version", "model_path", "tp_size"} <= set(info)
        assert info["version"] == "0.5.23"
        st = info["internal_states"][0]
        assert {"last_gen_throughput", "memory_usage",
                "effective_max_running_requests_per_dp"} <= set(st)
        mi = c.get("/model_info").json()
        assert {"model_path", "tokenizer_path", "is_generation", "preferred_sampling_params",
                "weight_version", "served_model_name"} <= set(mi)
        assert c.get("/get_model_info").json() == mi
        models = c.get("/v1/models").json()
        assert models["object"] == "list" and models["data"][0]["id"] == "llama-8b"
        loads = c.get("/v1/loads").json()
        assert {"timestamp", "version", "accelerator", "num_accelerators", "loads"} <= set(loads)
        assert {"dp_rank", "num_running_reqs", "num_waiting_reqs", "num_used_tokens",
                "max_total_num_tokens", "token_usage", "gen_throughput",
                "cache_hit_rate"} <= set(loads["loads"][0])
        flush = c.post("/flush_cache")
        assert flush.status_code == 200 and flush.text.startswith("Cache flushed.")


def test_metrics_names_types_labels_buckets(sim: Sim) -> None:
    with sim.client() as c:
        c.post("/generate", json={"text": "a b c", "sampling_params": {"max_new_tokens": 8}})
        text = c.get("/metrics").text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    # 0.5.23's names and types (prometheus_client strips _total from counter family names).
    expect = {"sglang:num_running_reqs": "gauge", "sglang:num_queue_reqs": "gauge",
              "sglang:num_used_tokens": "gauge", "sglang:token_usage": "gauge",
              "sglang:gen_throughput": "gauge", "sglang:cache_hit_rate": "gauge",
              "sglang:prompt_tokens": "counter", "sglang:generation_tokens": "counter",
              "sglang:num_requests": "counter", "sglang:cached_tokens": "counter",
              "sglang:time_to_first_token_seconds": "histogram",
              "sglang:e2e_request_latency_seconds": "histogram",
              "sglang:inter_token_latency_seconds": "histogram",
              "sglang:queue_time_seconds": "histogram",
              "sglang:max_total_num_tokens": "gauge", "sglang:kv_used_tokens": "gauge",
              "sglang:http_requests": "counter", "sglang:http_requests_active": "gauge"}
    for name, typ in expect.items():
        assert fams[name].type == typ, name
    assert "sglang:time_per_output_token_seconds" not in fams  # removed in 0.4.5
    assert "sglang:num_requests_total{" in text and "_created" not in text
    run = fams["sglang:num_running_reqs"].samples[0].labels
    assert set(run) == {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}
    assert run["model_name"] == "llama-8b"
    req = {s.labels["is_streaming"]: s.value for s in fams["sglang:num_requests"].samples
           if s.name.endswith("_total")}
    # Both series exist from the start (as on a real server); only the non-streaming one counted.
    assert set(req) == {"false", "true"} and req["false"] >= 1 and req["true"] == 0

    def buckets(name: str) -> list[float]:
        les = [s.labels["le"] for s in fams[name].samples if s.name.endswith("_bucket")]
        return [float(x) for x in dict.fromkeys(les) if x != "+Inf"]

    # SGLang's default buckets, 0.5.3 - 0.5.23.
    assert buckets("sglang:time_to_first_token_seconds") == [
        0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
    assert buckets("sglang:inter_token_latency_seconds") == [
        0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
        0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8]
    assert buckets("sglang:e2e_request_latency_seconds") == [
        0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200,
        1800, 2400]


def test_log_lines_match_reference_forms(sim: Sim) -> None:
    with sim.client() as c:
        for i in range(3):
            c.post("/generate", json={"text": f"prompt {i} " * 30,
                                      "sampling_params": {"max_new_tokens": 12}})
    sim.proc.terminate()
    assert sim.wait_exit() == 0
    bad, counts = check_log(sim.log())
    assert bad == []
    for lead in ("Prefill batch", "Decode batch", "The server is fired up",
                 "max_total_num_tokens=", "Load weight begin", "Load weight end",
                 "Memory pool end", "Capture ", "INFO:     Uvicorn running", "access"):
        assert counts.get(lead, 0) >= 1, lead
    assert "INFO:     Finished server process [" in sim.log()


def test_api_key_enforced(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--api-key", "sekret")
    with sim.client() as c:
        r = c.post("/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 1}})
        assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
        assert c.get("/v1/models").status_code == 401
        assert c.get("/health").status_code == 200  # health is open, as in SGLang
        ok = c.get("/v1/models", headers={"Authorization": "Bearer sekret"})
        assert ok.status_code == 200
        assert c.get("/metrics").status_code == 404  # no --enable-metrics
