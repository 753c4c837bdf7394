"""AppTest of the Overview card and Server page of an image server (tests/image_seed.py data,
timestamped a minute ago so the live windows hold it)."""

from __future__ import annotations

import time

import pytest
from image_seed import seed_image
from pwtest import REPO, run_page
from streamlit.testing.v1 import AppTest

APP = str(REPO / "app.py")


@pytest.fixture
def image_server(app_env):
    from storage.db import make_engine

    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    ids = seed_image(eng, name="demo-image", t0=time.time() - 60)
    eng.dispose()
    return ids


def _run(page: str, **params: str) -> AppTest:
    return run_page(page, **params)


def test_overview_card_shows_image_figures(image_server):
    at = _run("dashboard/pages/overview.py")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Image p50"] == "10.00 s"
    assert metrics["s / step"] == "400.0 ms"
    assert metrics["Images/min"][0].isdigit() and metrics["USD / image"].startswith("$")
    assert metrics["Peak memory"].startswith("58.6")  # 60,000 MiB = 58.6 GiB
    assert "p99 TTFT" not in metrics


def test_server_page_draws_the_image_pipeline(image_server):
    at = _run("dashboard/pages/server.py", server="demo-image", window="15m")
    assert any(s.value == "Image pipeline" for s in at.subheader)
    text = " ".join(str(m.value) for m in at.markdown)
    assert "Time per request by stage (stacked)" in text
    specs = [str(c.proto.spec) for c in at.get("vega_lite_chart")]
    stage = next(s for s in specs if '"bar"' in s)  # the stacked stage chart, with its unit
    assert "s per request" in stage and '"stack": "zero"' in stage
    titles = " ".join(specs)
    assert "Seconds per denoising step" in titles and "Peak GPU memory against the card" in titles
    assert "Queue, running and batch" in titles
