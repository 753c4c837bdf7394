"""The router's metrics as the real binaries write them: sglang-router 0.3.2 (smg_*, no HELP
lines; the release SGLang 0.5.23 pairs with) and smg 1.13.0 (its successor package, HELP lines,
new families), each scraped from the real wheel routing a PD pair of stand-in workers on loopback
(the 0.3.2 capture's model label, a local folder there, is written as a model id here). Pitwall
reads the same keys from both: per-worker health and breaker, requests/s; the families it does
not know are ignored, never an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.base import ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.metrics import snapshot
from storage import series_keys as sk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WORKERS = ("http://127.0.0.1:31001", "http://127.0.0.1:31002")


@pytest.mark.parametrize("name", ["sglang-router-0.3.2-pd.prom", "smg-1.13.0-pd.prom"])
def test_both_router_releases_read_as_the_same_keys(name: str) -> None:
    parsed = parse_metrics((FIXTURES / name).read_text())
    assert not parsed.errors
    target = ServerTarget(1, "router", "http://127.0.0.1:30000", role="router")
    values = {r.metric: r.value for r in snapshot(target, parsed, None, 0.0).rows}
    for worker in WORKERS:
        assert values[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_HEALTH) + worker] == 1.0
        assert values[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_CB) + worker] == 0.0
        assert values[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_ACTIVE) + worker] == 0.0
    # counters need two scrapes: the same payload again, 10 s later, is 0 requests/s
    state = snapshot(target, parsed, None, 0.0).state
    again = {r.metric: r.value for r in snapshot(target, parsed, state, 10.0).rows}
    assert again[sk.METRICS_ROUTER_REQUESTS_PER_S] == 0.0


def test_the_older_sgl_router_names_read_as_the_same_keys() -> None:
    """sglang-router up to 0.2.4 named them sgl_router_* (running_requests for requests in flight)."""
    text = ('# TYPE sgl_router_running_requests gauge\nsgl_router_running_requests{worker="http://w:1"} 3\n'
            '# TYPE sgl_router_worker_health gauge\nsgl_router_worker_health{worker="http://w:1"} 0\n'
            '# TYPE sgl_router_cb_state gauge\nsgl_router_cb_state{worker="http://w:1"} 1\n')
    values = {r.metric: r.value for r in snapshot(ServerTarget(1, "r", "http://r:1"), parse_metrics(text), None, 0.0).rows}
    assert values[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_ACTIVE) + "http://w:1"] == 3
    assert values[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_HEALTH) + "http://w:1"] == 0
    assert values[sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_CB) + "http://w:1"] == 1
