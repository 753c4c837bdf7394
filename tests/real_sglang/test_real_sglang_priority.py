"""Priority scheduling on the real SGLang 0.5.23 server on CPU (--enable-priority-scheduling): its
queue gauges carry the total under priority="" and one series per priority in the same family,
and Pitwall reads the total once (not the total plus its breakdown) and the breakdown per
priority; the tokenizer's histograms carry the request's own priority. The facts the simulator's
priority labels copy (tests/simulator/test_sim_priority.py)."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.base import ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.metrics import snapshot
from storage import series_keys as sk

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]

REAL_SERVER_FLAGS = ["--enable-priority-scheduling", "--max-running-requests", "1"]
TIMEOUT = httpx.Timeout(300.0)


def _running(text: str) -> dict[str, float]:
    """priority label -> value of the num_running_reqs series."""
    return {s.labels.get("priority", "?"): s.value for fam in text_string_to_metric_families(text)
            for s in fam.samples if s.name == "sglang:num_running_reqs"}


def test_a_running_request_is_counted_once_and_by_its_priority(real_server: Any) -> None:
    base = real_server.base_url
    body = {"text": "Count slowly.", "priority": 5,
            "sampling_params": {"max_new_tokens": 600, "temperature": 0, "ignore_eos": True}}
    errors: list[BaseException] = []

    def send() -> None:
        try:
            httpx.post(f"{base}/generate", json=body, timeout=TIMEOUT).raise_for_status()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    worker = threading.Thread(target=send)
    worker.start()
    seen = None
    while worker.is_alive() and seen is None:  # every scrape while the request runs
        text = httpx.get(f"{base}/metrics", timeout=TIMEOUT).text
        if _running(text).get("") == 1:
            seen = text
    worker.join(300)
    assert not errors, errors
    assert seen is not None, "no scrape caught the request running"
    running = _running(seen)
    # the total and its breakdown, in one family (the warm-up's "None" stays listed, at 0)
    assert running[""] == 1 and running["5"] == 1, running
    assert sum(v for k, v in running.items() if k not in ("", "5")) == 0, running
    values = {r.metric: r.value for r in snapshot(ServerTarget(1, "real", base), parse_metrics(seen), None, 1.0).rows}
    assert values[sk.METRICS_NUM_RUNNING_REQS] == 1  # not 2
    assert values["metrics.num_running_reqs_by_priority.5"] == 1
    after = httpx.get(f"{base}/metrics", timeout=TIMEOUT).text
    ttft = {s.labels.get("priority") for fam in text_string_to_metric_families(after) for s in fam.samples
            if s.name == "sglang:time_to_first_token_seconds_count"}
    assert "5" in ttft  # the tokenizer labels the request's own priority
