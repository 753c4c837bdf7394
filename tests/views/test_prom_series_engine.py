"""The Server page's Prometheus window is read through the server's engine (its PromReader):
an engine Pitwall cannot read there keeps the stored panels, with a caption saying why."""

from __future__ import annotations

import pandas as pd
import pytest
import toy_engine
from pwtest import free_port

from collectors.engines import ENGINES
from dashboard.services.views import prom_series, timeseries


def test_an_engine_without_a_reader_keeps_the_stored_panels(monkeypatch) -> None:
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ValueError, match="^Pitwall cannot read Toy's series through Prometheus"):
        prom_series.read_window(url, 'instance="t:1"', ["metrics.num_running_reqs"], 0.0, 60.0, engine="toy")
    stored: dict[str, pd.DataFrame] = {}
    panels = [p for p in timeseries.PANELS if any(k.startswith("metrics.") for k, _ in p.series)][:1]
    out, caption = prom_series.panel_series(stored, panels, url, 'instance="t:1"', 0.0, 60.0, engine="toy")
    assert out == stored
    assert caption.startswith("Prometheus 127.0.0.1:") and "Pitwall cannot read Toy's series" in caption
