"""The GPU wall in a real browser, on the demo with no GPU: `pitwall up` in demo mode reads the
simulator's dcgm-exporter look-alikes (gpu.dcgm_url defaults to them), so the demo's Server page
shows GPU panels, achieved bandwidth and the "bound by" verdict, and the image server's page the
denoising stage's wall and the what-if on another card. Screenshotted (the test's tmp dir, and
PITWALL_SCREENSHOT_DIR when set).

Skipped with the reason when /usr/bin/chromium is missing (`make system-deps` installs it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_dashboard_e2e import browser, goto, no_traceback, page, pitwall, shot, wait_for_pattern  # noqa: F401
from test_image_browser import _wait_run_done

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(),
                       reason="needs Debian's chromium at /usr/bin/chromium (make system-deps)"),
]


def test_llm_demo_server_page_shows_the_gpu_wall(page, pitwall):  # noqa: F811
    goto(page, pitwall, "/server?server=demo&window=15m")
    page.get_by_text("GPU wall: what bounds the GPU").first.wait_for(timeout=90_000)
    wait_for_pattern(page, r"bound by: ", 120)
    # the panel draws in pieces: wait for its achieved-bandwidth figure too before reading it
    text = wait_for_pattern(page, r"Achieved band[\s\S]*[GT]B/s", 60)
    page.get_by_text("GPU wall: what bounds the GPU").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    shot(page, pitwall, "gpu-01-demo-server")
    no_traceback(page)
    # the simulated card's name and an achieved bandwidth against its peak, from its exporter
    assert "NVIDIA H200" in text and re.search(r"Achieved band", text) and re.search(r"[GT]B/s", text)


def test_image_demo_server_page_shows_the_denoising_wall_and_the_what_if(page, pitwall):  # noqa: F811
    _wait_run_done(pitwall, "demo-image: first sweep", 300)
    goto(page, pitwall, "/server?server=demo-image&window=15m")
    page.get_by_text("Denoising: which wall, and the step on another card").first.wait_for(timeout=90_000)
    wait_for_pattern(page, r"\(what-if\)", 120)
    text = wait_for_pattern(page, r"bound by: ", 60)  # the GPU wall panel below draws after it
    page.get_by_text("Denoising: which wall, and the step on another card").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    shot(page, pitwall, "gpu-02-image-denoise")
    no_traceback(page)
    assert "B300" in text and "bound by: " in text
