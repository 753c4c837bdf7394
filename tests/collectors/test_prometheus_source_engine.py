"""Prometheus as a source reads each server through its own engine (the Engine's `prometheus`):
an engine without a reader is refused with one sentence, before any request is sent."""

from __future__ import annotations

import pytest
import toy_engine
from pwtest import free_port

from collectors.base import CollectorContext, CollectorError, ServerTarget
from collectors.engines import ENGINES, get_engine
from collectors.prometheus_source import PrometheusSourceCollector

# a healthy read is handed in by the poll that started it, on a loaded host too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("patient_polls")


def _ctx(server: ServerTarget) -> CollectorContext:
    store: dict = {}
    return CollectorContext(servers=[server], load_state=store.get, save_state=store.__setitem__, now=lambda: 1000.0)


def test_a_server_of_an_engine_without_a_reader_is_refused(monkeypatch) -> None:
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)
    server = ServerTarget(id=3, name="t", base_url="http://127.0.0.1:9", engine="toy",
                          prometheus_url=f"http://127.0.0.1:{free_port()}", prometheus_selector='instance="t:1"')
    collector = PrometheusSourceCollector(deadline_s=2.0)
    try:
        with pytest.raises(CollectorError) as err:
            collector.poll(_ctx(server))
    finally:
        collector.close()
    assert str(err.value) == ("Server 't': Pitwall cannot read Toy's series through Prometheus; remove its "
                              "prometheus_url so its /metrics is scraped directly.")


def test_sglangs_reader_asks_for_sglangs_names() -> None:
    factory = get_engine("sglang").prometheus
    assert factory is not None
    reader = factory()
    assert reader.names == '__name__=~"sglang[:_].*"' and reader.series_label == "sglang:*"
