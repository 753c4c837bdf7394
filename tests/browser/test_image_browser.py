"""The image cockpit in a real browser: `pitwall up` in demo mode starts `demo-image` (simulated
Qwen-Image on a B300) and queues its first sweep; the Overview card, the Server page's image
pipeline and a Compare of demo-image against demo-image-fast with the image check are driven
through headless Debian Chromium and screenshotted (the test's tmp dir, and
PITWALL_SCREENSHOT_DIR when set).

Skipped with the reason when /usr/bin/chromium is missing (`make system-deps` installs it).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from test_dashboard_e2e import (  # noqa: F401
    browser,
    goto,
    no_traceback,
    page,
    pick,
    pitwall,
    shot,
    wait_for_pattern,
)

from dashboard.services.views.benchmarks import start_sweep
from dashboard.services.views.servers import DEMO_IMAGE_SERVER, demo_image_sweep
from storage import repo
from storage.db import make_engine

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(),
                       reason="needs Debian's chromium at /usr/bin/chromium (make system-deps)"),
]


def _engine(pitwall):  # noqa: F811
    return make_engine(pitwall["env"]["PITWALL_DATABASE_URL"])


def _wait_run_done(pitwall, name: str, timeout_s: float) -> int:  # noqa: F811
    eng = _engine(pitwall)
    deadline = time.time() + timeout_s
    try:
        while time.time() < deadline:
            srv = repo.get_server(eng, name=DEMO_IMAGE_SERVER)
            runs = [r for r in repo.list_probe_runs(eng, server_id=srv.id)] if srv else []
            run = next((r for r in runs if r.name == name), None)
            if run is not None and run.status in ("done", "failed", "aborted"):
                assert run.status == "done", run.error
                return int(run.id)
            time.sleep(2)
    finally:
        eng.dispose()
    raise AssertionError(f"sweep {name!r} did not finish within {timeout_s:.0f} s")


def test_image_overview_card(page, pitwall):  # noqa: F811
    _wait_run_done(pitwall, "demo-image: first sweep", 280)
    goto(page, pitwall, "/")
    card = page.locator(".st-key-card_demo-image")
    card.wait_for(timeout=60_000)
    deadline = time.time() + 60
    while time.time() < deadline and not re.search(r"Images/min\s+[0-9]", card.inner_text()):
        page.wait_for_timeout(2000)
    shot(page, pitwall, "img-01-overview")
    no_traceback(page)
    text = card.inner_text()
    assert "image" in text and "Image p50" in text and "s / step" in text
    assert re.search(r"Images/min\s+[0-9]", text), text


def test_image_server_page_stage_chart(page, pitwall):  # noqa: F811
    goto(page, pitwall, "/server?server=demo-image&window=15m")
    page.get_by_text("Image pipeline").first.wait_for(timeout=60_000)
    page.get_by_text("Time per request by stage (stacked)").first.wait_for(timeout=60_000)
    page.wait_for_timeout(2000)
    shot(page, pitwall, "img-02-server")
    no_traceback(page)
    assert page.locator("[data-testid='stVegaLiteChart']").count() >= 4


def test_compare_demo_image_against_fast_with_the_image_check(page, pitwall):  # noqa: F811
    first = _wait_run_done(pitwall, "demo-image: first sweep", 60)
    goto(page, pitwall, "/profiles?server=demo-image")
    pick(page, "Profile", "demo-image-fast")
    page.get_by_role("button", name="Relaunch…").click()
    wait_for_pattern(page, r"under profile demo-image-fast\?", 60)  # the dialog names what it relaunches
    page.get_by_role("button", name="Relaunch now").click()
    deadline = time.time() + 240
    body = ""
    while time.time() < deadline:
        body = page.inner_text("body")
        if "ready under profile demo-image-fast" in body:
            break
        page.wait_for_timeout(2000)
    assert "ready under profile demo-image-fast" in body, body[-2000:]
    eng = _engine(pitwall)
    start_sweep(eng, demo_image_sweep(name="demo-image-fast sweep"), requested_by="e2e")
    eng.dispose()
    second = _wait_run_done(pitwall, "demo-image-fast sweep", 280)
    goto(page, pitwall, "/compare?server=demo-image")
    for run_id in (first, second):
        box = page.locator("[data-testid='stMultiSelect']").first
        box.locator("input").first.click()
        page.get_by_role("option", name=f"#{run_id} ").first.click()
        page.keyboard.press("Escape")
        page.wait_for_timeout(800)
    page.get_by_text("Image check").first.wait_for(timeout=90_000)
    page.get_by_text("PSNR").first.wait_for(timeout=60_000)
    page.wait_for_timeout(2000)
    shot(page, pitwall, "img-03-compare")
    no_traceback(page)
    text = page.inner_text("body")
    assert "against the baseline: p50" in text and "$/image" in text
    assert "same pictures" in text or "different pictures" in text
    assert "SSIM" in text and page.locator("[data-testid='stImage']").count() >= 2
