"""The Server page of a server read through Prometheus (AppTest over dashboard/pages/server.py, a
real Prometheus scraping a real simulator): its metrics.* charts come from Prometheus for the
window, with the caption naming it, the step and the newest sample's age; with Prometheus gone
the stored samples stay on the page and the caption says why."""

from __future__ import annotations

import re

import pytest
from prom_rig import PromRig, needs_prometheus, rig_fixture  # noqa: F401 (fixture `rig`)
from pwtest import REPO, runner_thread, wait_for
from streamlit.testing.v1 import AppTest

from collectors.prometheus_source import PrometheusSourceCollector
from runner.loop import Runner
from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _page() -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.query_params["server"] = "remote"
    at.query_params["window"] = "15m"
    at.run()
    at.switch_page("dashboard/pages/server.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@needs_prometheus
def test_server_page_reads_metrics_through_prometheus(app_env, rig: PromRig) -> None:
    import streamlit as st

    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    srv = repo.upsert_server(engine, name="remote", base_url=rig.base(), prometheus_url=rig.url,
                             prometheus_selector=f'instance="{rig.instance()}"')
    source = PrometheusSourceCollector(interval_s=0.5, first_window_s=30.0)
    with runner_thread(Runner(engine, [source], tick_s=0.05, flush_s=0.2)):
        wait_for(lambda: repo.latest_samples(engine, server_id=srv.id,
                                             metrics=["metrics.num_running_reqs"]), 60, "stored samples")
    engine.dispose()

    at = _page()
    captions = [str(c.value) for c in at.caption]
    prom = [c for c in captions if c.startswith("read through Prometheus")]
    # the step follows the window drawn, which a young server's data clamps (views.timeseries)
    assert prom == [prom[0]] and re.search(rf"127\.0\.0\.1:{rig.prom_port} · step \d+ s · last sample", prom[0])
    assert len(at.get("vega_lite_chart")) >= 3  # batch, KV usage, cache hits from Prometheus

    rig.stop_prometheus()
    st.cache_data.clear()
    at = _page()
    text = " ".join(str(c.value) for c in at.caption)
    assert "could not be read, showing stored samples" in text and "Could not reach Prometheus" in text
    assert len(at.get("vega_lite_chart")) >= 3  # the stored samples are still drawn
