"""The tuner in a real browser, on the demo: a small tune of `demo` started from the Tune page
(two candidates, one load level, few requests), its live panel (candidate, stage, ETA), the
result view (the verdict sentence, ranking table, goodput and Pareto charts of cost against p99 latency) and the doctor on the
Server page. Screenshotted (the test's tmp dir, and PITWALL_SCREENSHOT_DIR when set); skipped
like the other browser tests (their pytestmark) when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import re

import pytest
from test_dashboard_e2e import (  # noqa: F401
    browser,
    goto,
    no_traceback,
    page,
    pick,
    pitwall,
    pytestmark,
    shot,
)
from test_dashboard_e2e import wait_for_pattern as _wait_text


@pytest.mark.timeout(900)  # two relaunches, two workloads and a restore, beside the demo's first sweep
def test_a_tune_started_from_the_page_is_watched_then_ranked(page, pitwall):  # noqa: F811
    goto(page, pitwall, "/tune?server=demo")
    page.get_by_text("Candidate profiles").first.wait_for(timeout=60_000)
    for name in ("demo", "demo-radix-off"):
        pick(page, "Candidate profiles", name)
        page.keyboard.press("Escape")
    pick(page, "Workload", "shared-prefix")
    page.get_by_label("Concurrency levels").fill("4")
    page.get_by_label("Requests per level").fill("16")
    page.get_by_label("Max new tokens").fill("16")
    page.get_by_role("button", name="Start tune…").click()
    page.get_by_role("button", name="Start tune", exact=True).click()
    live = _wait_text(page, r"Tune R-\d+ · candidate", 90)
    shot(page, pitwall, "tune-01-live")
    no_traceback(page)
    assert "Tune R-" in live
    # the result view shows up once the run has candidates; wait for the tune to finish
    text = _wait_text(page, r"Running now: (?!in progress)\S+ · workload", 780)
    page.locator("[data-testid='stVegaLiteChart']").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)
    shot(page, pitwall, "tune-02-result")
    no_traceback(page)
    # both candidates started (a failed one would say so in its reason) and the server is back on demo
    # the verdict above the ranking: a winner, or a tie inside the measured spread
    assert re.search(r"(demo|demo-radix-off) wins: goodput|tie: goodput|No candidate met the SLO", text), text[-3000:]
    assert "Running now: demo ·" in text, text[-3000:]
    assert "did not start" not in text
    # the run's label names its candidates (the run picker's value can draw after the rest of the page)
    _wait_text(page, r"demo-radix-off", 60)
    assert page.locator("[data-testid='stVegaLiteChart']").count() >= 1  # the Pareto chart


def test_the_doctor_on_the_server_page(page, pitwall):  # noqa: F811
    goto(page, pitwall, "/server?server=demo&window=15m")
    page.get_by_text("Doctor", exact=True).first.wait_for(timeout=90_000)
    page.get_by_text("Doctor", exact=True).first.scroll_into_view_if_needed()
    page.wait_for_timeout(2000)
    shot(page, pitwall, "tune-03-doctor")
    no_traceback(page)
    text = page.inner_text("body")
    assert "Rules from SGLang's tuning guidance" in text
