"""The golden fixtures (captured by bench/sim_capture_golden.py) still match SGLang's forms (sim_forms.py).

Other engineers' parsers test against tests/fixtures/sim-0.5.23-llm.log and
sim-0.5.23-metrics.prom; these checks keep those files honest.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from sim_forms import check_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_golden_log_lines_match_reference_forms() -> None:
    text = (FIXTURES / "sim-0.5.23-llm.log").read_text()
    bad, counts = check_log(text)
    assert bad == []
    # The capture fills a 1200-token pool with 32 requests: prefill, decode and retraction.
    for lead in ("Prefill batch", "Decode batch", "KV cache pool is full",
                 "The server is fired up", "max_total_num_tokens=", "access"):
        assert counts.get(lead, 0) >= 1, lead
    assert "max_total_num_tokens=1200," in text


def test_golden_metrics_parse_with_0_5_23_names() -> None:
    text = (FIXTURES / "sim-0.5.23-metrics.prom").read_text()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                 "sglang:gen_throughput", "sglang:cache_hit_rate", "sglang:prompt_tokens",
                 "sglang:generation_tokens", "sglang:cached_tokens", "sglang:num_requests",
                 "sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
                 "sglang:inter_token_latency_seconds", "sglang:num_retracted_reqs",
                 "sglang:queue_time_seconds", "sglang:realtime_tokens"):
        assert name in fams, name
    gen = sum(s.value for s in fams["sglang:generation_tokens"].samples
              if s.name.endswith("_total"))
    # 32 x 80 generated + 20 chat tokens + the 8-token warm-up request.
    assert gen == 32 * 80 + 20 + 8
