"""Prefill/decode disaggregation in the simulator (simulator/disagg.py) behind the router
look-alike (simulator/router.py), as SGLang 0.5.23 and sglang-router 0.3.2 serve it: the client
gets the decode server's completion; each role exports its own queues and stage histograms under
engine_type prefill|decode, the prefill side the per-request KV transfer; a slow transfer shows
there and not in the decode server's ITL; a failed transfer is counted on both sides. Pitwall reads
every one of these through its alias table (model seconds: no wall-clock assertion)."""

from __future__ import annotations

from pathlib import Path

import httpx
from sim_fixture import running_pd, running_sim

from collectors.base import ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.log_parse import parse_line
from collectors.sglang.metrics import snapshot
from storage import series_keys as sk

PROMPT = {"text": "The disaggregated service sends this prompt's KV cache from prefill to decode. " * 8,
          "sampling_params": {"max_new_tokens": 12}}


def _values(url: str, text: str, prev: dict | None, ts: float) -> tuple[dict[str, float], dict]:
    snap = snapshot(ServerTarget(1, "s", url), parse_metrics(text), prev, ts)
    return {r.metric: r.value for r in snap.rows}, snap.state


def _scrape(url: str) -> str:
    return httpx.get(url if url.endswith("/metrics") else f"{url}/metrics", timeout=10).text


def test_a_request_through_the_router_is_prefilled_moved_and_decoded(tmp_path: Path) -> None:
    with running_pd(tmp_path) as pd:
        before = {k: _values(pd[k], _scrape(pd[k] if k != "router" else pd["router_metrics"]), None, 0.0)[1]
                  for k in ("prefill", "decode", "router")}
        out = [httpx.post(f"{pd['router']}/generate", json=PROMPT, timeout=60).json() for _ in range(3)]
        chat = httpx.post(f"{pd['router']}/v1/chat/completions", timeout=60, json={
            "model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stream": True})
        texts = {k: _scrape(pd[k]) for k in ("prefill", "decode")}
        texts["router"] = _scrape(pd["router_metrics"])
        workers = httpx.get(f"{pd['router']}/workers", timeout=10).json()
        loads = httpx.get(f"{pd['prefill']}/v1/loads", timeout=10).json()
    assert all(o["meta_info"]["completion_tokens"] == 12 for o in out)  # decode's answer, not prefill's one token
    assert chat.status_code == 200 and chat.text.rstrip().endswith("data: [DONE]")
    assert {w["worker_type"] for w in workers["workers"]} == {"prefill", "decode"}
    assert loads["loads"][0]["disaggregation"]["mode"] == "prefill"
    p, _ = _values(pd["prefill"], texts["prefill"], before["prefill"], 10.0)
    d, _ = _values(pd["decode"], texts["decode"], before["decode"], 10.0)
    r, _ = _values(pd["router"], texts["router"], before["router"], 10.0)
    assert 'engine_type="prefill"' in texts["prefill"] and 'engine_type="decode"' in texts["decode"]
    assert p[sk.hist_key("kv_transfer_latency", "window_count")] == 4  # one a request, prefill side only
    assert sk.hist_key("kv_transfer_latency", "window_count") not in d
    assert 0 < p[sk.hist_key("kv_transfer_latency", "mean")] < 0.1  # 1 ms + the KV at 25 GB/s
    assert p[sk.hist_key("kv_transfer_size", "mean")] > 1e6  # an 8B model's KV of ~130 tokens
    assert p[sk.hist_key("stage_latency", "window_count") + ".prefill_transfer_kv_cache"] == 4
    assert d[sk.hist_key("stage_latency", "window_count") + ".decode_transferred"] == 4
    assert r[sk.METRICS_ROUTER_REQUESTS_PER_S] == 4 / 10.0
    assert r[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_HEALTH) + pd["decode"]] == 1.0
    assert r[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_CB) + pd["prefill"]] == 0.0
    # the scheduler logs carry each role's queues in SGLang's form
    plog = [parse_line(x) for x in (tmp_path / "prefill.log").read_text().splitlines()]
    dlog = [parse_line(x) for x in (tmp_path / "decode.log").read_text().splitlines()]
    prefill_lines = [x for x in plog if x is not None and x.kind == "prefill" and "bootstrap_req" in x.fields]
    decode_lines = [x for x in dlog if x is not None and x.kind == "decode" and "prealloc_req" in x.fields]
    assert prefill_lines and {"inflight_req", "optimistic_req"} <= set(prefill_lines[-1].fields)
    assert decode_lines and {"transfer_req", "retracted_req", "pre_allocated_usage"} <= set(decode_lines[-1].fields)
    assert not any(x is not None and x.kind == "prefill" for x in dlog)  # a decode server logs no prefill batch


def test_a_slow_kv_transfer_shows_as_transfer_time_not_as_itl(tmp_path: Path) -> None:
    with running_pd(tmp_path, prefill=["--sim-fault=slow-transfer=0.5"]) as pd:
        before = {k: _values(pd[k], _scrape(pd[k]), None, 0.0)[1] for k in ("prefill", "decode")}
        for _ in range(2):
            httpx.post(f"{pd['router']}/generate", json=PROMPT, timeout=60).raise_for_status()
        p, _ = _values(pd["prefill"], _scrape(pd["prefill"]), before["prefill"], 10.0)
        d, _ = _values(pd["decode"], _scrape(pd["decode"]), before["decode"], 10.0)
    assert p[sk.hist_key("kv_transfer_latency", "mean")] >= 0.5  # model seconds: the fault's 0.5 s a transfer
    assert d[sk.hist_key("stage_latency", "mean") + ".decode_transferred"] >= 0.5
    assert d[sk.hist_key("itl", "p99")] < 0.1  # the decode steps themselves are unchanged
    assert d[sk.hist_key("ttft", "mean")] >= 0.5  # the client waits for it before the first token


def test_a_failed_transfer_is_counted_on_both_sides_and_aborts_the_request(tmp_path: Path) -> None:
    with running_pd(tmp_path, prefill=["--sim-fault=transfer-fail-every=2"]) as pd:
        answers = [httpx.post(f"{pd['router']}/generate", json=PROMPT, timeout=60) for _ in range(2)]
        texts = {k: _scrape(pd[k]) for k in ("prefill", "decode")}
    failed = [a.json() for a in answers if a.json()["meta_info"]["finish_reason"]["type"] == "abort"]
    assert len(failed) == 1 and "KVTransferError" in failed[0]["meta_info"]["finish_reason"]["message"]
    for role in ("prefill", "decode"):
        by = {s.name: s.value for s in parse_metrics(texts[role]).samples}
        assert by["sglang:num_transfer_failed_reqs_total"] == 1
    assert "Prefill transfer failed for request rank=0" in (tmp_path / "prefill.log").read_text()
    assert "Decode transfer failed for request rank=0" in (tmp_path / "decode.log").read_text()


def test_a_pd_server_refuses_a_request_without_a_bootstrap_room(tmp_path: Path) -> None:
    with running_sim(["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "50",
                      "--disaggregation-mode=prefill"], tmp_path / "p.log") as url:
        r = httpx.post(f"{url}/generate", json={**PROMPT, "rid": "r1"}, timeout=30)
    assert r.status_code == 400
    assert "Disaggregated request received without bootstrap room id. req.rid='r1'" in r.text


def test_a_decode_server_with_the_fake_backend_serves_alone(tmp_path: Path) -> None:
    """SGLang's decode-only test mode: no prefill server, no bootstrap fields; a prefill server
    refuses the backend as its arguments resolve."""
    args = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "50", "--enable-metrics"]
    with running_sim([*args, "--disaggregation-mode=decode", "--disaggregation-transfer-backend=fake"],
                     tmp_path / "d.log") as url:
        out = httpx.post(f"{url}/generate", json=PROMPT, timeout=30).json()
    assert out["meta_info"]["completion_tokens"] == 12
    import subprocess
    import sys

    refused = subprocess.run([sys.executable, "-m", "simulator.launch_server", *args, "--disaggregation-mode=prefill",
                              "--disaggregation-transfer-backend=fake"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "Prefill server does not support 'fake' as the transfer backend" in refused.stderr
