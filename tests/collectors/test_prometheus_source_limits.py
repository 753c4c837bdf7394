"""The Prometheus source reports what it left out as the direct scrape does: a target
whose counters read +Inf/NaN in Prometheus gives finite rows and ONE event naming the server; a
server with more series than runner.metrics_max_series loses whole families with ONE event."""

from __future__ import annotations

import math
import time
from typing import Any

import httpx
import pytest
from hostile_servers import FakeSGLang
from prom_rig import SCRAPE_S, PromRig, needs_prometheus
from pwtest import wait_for

from collectors.base import CollectorContext, ServerTarget
from collectors.prometheus_source import PrometheusSourceCollector
from collectors.promtext import ParsedMetrics, ParsedSample
from collectors.sglang.metrics_prom import cap_series

# a healthy read is handed in by the poll that started it, on a loaded host too (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240), pytest.mark.usefixtures("patient_polls")]


def test_cap_series_skips_whole_families_and_says_so() -> None:
    parsed = ParsedMetrics(samples=[
        ParsedSample("a", {"tp_rank": str(i)}, 1.0, "a", "gauge") for i in range(3)
    ] + [ParsedSample("b", {}, 2.0, "b", "gauge")])
    assert cap_series(parsed, 4) is parsed
    out = cap_series(parsed, 2)  # family a (3 series) would pass 2: skipped whole, b kept
    assert [s.name for s in out.samples] == ["b"]
    assert out.limits == [("series", "family a has 3 series, over the 2-sample limit per scrape; it was skipped")]


@needs_prometheus
def test_nonfinite_series_and_the_series_cap_are_one_event_each(tmp_path) -> None:
    with FakeSGLang("nonfinite") as fake:
        rig = PromRig(tmp_path, n_sims=1)
        rig.sim_ports[0] = int(fake.url.rsplit(":", 1)[1])
        store: dict[str, Any] = {}
        capped: dict[str, Any] = {}
        col, tight = PrometheusSourceCollector(), PrometheusSourceCollector()
        tight.configure({"metrics_max_series": 2})
        try:
            rig.start_prometheus()
            q = f'count_over_time(sglang:num_running_reqs{{instance="{rig.instance(0)}"}}[1m])'

            def stored_scrapes() -> int:
                found = httpx.get(f"{rig.url}/api/v1/query", params={"query": q}).json()["data"]["result"]
                return int(found[0]["value"][1]) if found else 0

            wait_for(lambda: stored_scrapes() >= 3, 60, "three scrapes stored")
            server = ServerTarget(4, "inf-counters", fake.url, prometheus_url=rig.url,
                                  prometheus_selector=f'instance="{rig.instance(0)}"')
            t0 = time.time() + 2 * SCRAPE_S
            polls = []
            for i, (c, st) in enumerate([(col, store), (col, store), (tight, capped), (tight, capped)]):
                ctx = CollectorContext([server], st.get, st.__setitem__, now=lambda i=i: t0 + i * SCRAPE_S)
                polls.append(c.poll(ctx))
        finally:
            col.close()
            tight.close()
            rig.close()
    rows = [s for p in polls for s in p.samples]
    assert rows and all(math.isfinite(s.value) for s in rows)
    assert any(s.metric == "metrics.num_running_reqs" for s in polls[0].samples)
    ev = [e for p in polls[:2] for e in p.events]
    assert len(ev) == 1 and "'inf-counters'" in ev[0].message and "non-finite" in ev[0].message, ev
    ev = [e.message for p in polls[2:] for e in p.events if "metrics_max_series" in e.message]
    assert len(ev) == 1 and "'inf-counters'" in ev[0], ev
