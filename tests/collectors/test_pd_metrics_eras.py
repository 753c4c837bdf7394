"""PD families under the names and types of releases before 0.5.23 read as the same keys: the
prefill pre-allocation queue became the bootstrap queue, and the KV-transfer figures were gauges
of the last request (ms, GB/s) before SGLang made them histograms (PR 19009, 2026-02)."""

from __future__ import annotations

import pytest

from collectors.base import ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.metrics import snapshot
from storage import series_keys as sk

LABELS = 'engine_type="prefill",model_name="m",tp_rank="0",pp_rank="0",moe_ep_rank="0"'


def test_the_older_pd_gauges_read_as_the_same_keys() -> None:
    text = (f"# TYPE sglang:num_prefill_prealloc_queue_reqs gauge\nsglang:num_prefill_prealloc_queue_reqs{{{LABELS}}} 4\n"
            f"# TYPE sglang:kv_transfer_latency_ms gauge\nsglang:kv_transfer_latency_ms{{{LABELS}}} 250\n"
            f"# TYPE sglang:kv_transfer_speed_gb_s gauge\nsglang:kv_transfer_speed_gb_s{{{LABELS}}} 2\n")
    values = {r.metric: r.value for r in snapshot(ServerTarget(1, "p", "http://p:1"), parse_metrics(text), None, 0.0).rows}
    assert values[sk.METRICS_PD_BOOTSTRAP_QUEUE] == 4
    assert values[sk.METRICS_KV_TRANSFER_LAST_S] == pytest.approx(0.25)
    assert values["metrics.kv_transfer_speed_last_bytes_s"] == 2 * 2 ** 30
