"""The image cockpit in a real browser: `pitwall up` in demo mode starts `demo-image` (simulated
Qwen-Image on a B300) and queues its first sweep; the Overview card, the Server page's image
pipeline and the README's image A/B (sweep from Benchmarks, relaunch under demo-image-fast,
rerun the baseline, Compare with the image check) are driven through headless Debian Chromium and screenshotted (the test's tmp dir, and
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

from dashboard.services.views.servers import DEMO_IMAGE_SERVER
from storage import repo
from storage.db import make_engine

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(),
                       reason="needs Debian's chromium at /usr/bin/chromium (make system-deps)"),
]
#: the demo's simulators at 4x: the README image A/B reads pages and the image check, not latencies;
#: its three sweeps take a quarter of the wall time
SIM_SPEED = 4


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


def test_the_readme_image_flow_from_the_page(page, pitwall):  # noqa: F811
    """The README's image A/B, every step from the page as a newcomer does it: sweep demo-image
    from Benchmarks' image form, relaunch it under demo-image-fast on Profiles, "Rerun the
    baseline workload" there, follow its link to Compare and read the image check. A screenshot at
    each step (img-1x-*)."""
    _wait_run_done(pitwall, "demo-image: first sweep", 280)  # the demo's own sweep goes first
    # 1. Benchmarks knows demo-image is an image server: its form sends the images API
    goto(page, pitwall, "/benchmarks?server=demo-image")
    page.get_by_label("Image size").first.wait_for(timeout=60_000)
    page.get_by_label("Concurrency levels").fill("1,2")
    page.get_by_label("Requests per level").fill("9")  # 9: three repeats of 3, a measured spread
    page.get_by_label("Name (optional)").fill("image baseline")
    page.get_by_role("button", name="Start sweep…").click()
    wait_for_pattern(page, r"image requests \(1024x1024, 20 steps", 60)  # the dialog says what it sends
    page.get_by_role("button", name="Start sweep", exact=True).click()
    page.get_by_text("Sweep image baseline").first.wait_for(timeout=60_000)  # the page took the sweep
    page.goto("about:blank")  # the sweep is read from the database: no live page redrawn meanwhile
    baseline = _wait_run_done(pitwall, "image baseline", 300)
    goto(page, pitwall, "/benchmarks?server=demo-image")
    page.get_by_text("Per-image latency", exact=False).first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)
    shot(page, pitwall, "img-10-benchmarks-image-sweep")
    no_traceback(page)
    # 2. relaunch under demo-image-fast
    goto(page, pitwall, "/profiles?server=demo-image")
    pick(page, "Profile", "demo-image-fast")
    page.get_by_role("button", name="Relaunch…").click()
    wait_for_pattern(page, r"under profile demo-image-fast\?", 60)
    page.get_by_role("button", name="Relaunch now").click()
    wait_for_pattern(page, r"ready under profile demo-image-fast", 240)
    # 3. rerun the baseline workload on the new launch, from the same panel
    page.get_by_role("button", name="Rerun the baseline workload").click(timeout=60_000)
    shot(page, pitwall, "img-11-profiles-relaunched-rerun")
    no_traceback(page)
    link = page.get_by_role("link", name=re.compile(r"Compare run \d+ \(before\)"))
    link.wait_for(timeout=300_000)
    assert f"Compare run {baseline} (before)" in link.inner_text()
    shot(page, pitwall, "img-12-profiles-rerun-done")
    # 4. the link leads straight to Compare with both runs picked, baseline first
    link.click()
    page.get_by_text("Image check").first.wait_for(timeout=90_000)
    page.get_by_text("PSNR").first.wait_for(timeout=60_000)
    page.wait_for_timeout(2000)
    shot(page, pitwall, "img-13-compare-image-check")
    no_traceback(page)
    text = page.inner_text("body")
    # the headline is read at a load level both runs measured, and says which
    assert re.search(r"against the baseline: at concurrency [12]: ", text), text[:3000]
    assert "$/image" in text
    assert "same pictures" in text or "different pictures" in text
    assert "SSIM" in text and page.locator("[data-testid='stImage']").count() >= 2
