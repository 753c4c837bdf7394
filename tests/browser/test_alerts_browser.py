"""The Alerts page in a real browser: the demo under `pitwall up` with one threshold rule that
holds while the demo serves its canary (running requests >= 0 on `demo`), so it fires through the
runner's own evaluation; the operator silences it from the page, the silence shows, the alert is
marked silenced, and the sidebar and Overview card show it firing. Screenshotted (the test's
tmp dir, and PITWALL_SCREENSHOT_DIR when set).

Skipped with the reason when chromium is missing (the marks of test_dashboard_e2e).
"""

from __future__ import annotations

import re
import time

from test_dashboard_e2e import (  # noqa: F401 - fixtures, and the browser marks (skip without chromium)
    browser,
    goto,
    no_traceback,
    page,
    pick,
    pitwall,
    pytestmark,
    shot,
    wait_for_pattern,
)

from storage import repo
from storage.db import make_engine

# read by the `pitwall` fixture: a rule that fires as soon as the demo's log has a sample
PITWALL_TOML = """
[alerting]
eval_interval_s = 2.0

[[alerts]]
name = "demo-busy"
kind = "threshold"
metric = "log.running_req"
op = ">="
value = 0
window_s = 120
for_s = 0
severity = "warning"
servers = ["demo"]
"""


def test_alert_fires_is_silenced_and_shows_everywhere(page, pitwall):  # noqa: F811
    goto(page, pitwall, "/alerts")
    page.get_by_text("Firing and pending").first.wait_for(timeout=90_000)
    # tables are drawn on a canvas, so the text checked is the headings, sidebar and cards
    wait_for_pattern(page, r"Firing and pending \([1-9]\d* firing", 180)
    no_traceback(page)

    pick(page, "Rule", "demo-busy")
    pick(page, "On server", "demo")
    page.get_by_label("Reason").fill("browser test: expected while the demo serves")
    page.get_by_role("button", name="Silence", exact=True).click()
    page.get_by_text("Expire now").first.wait_for(timeout=60_000)  # drawn for an active silence
    engine = make_engine(pitwall["env"]["PITWALL_DATABASE_URL"])
    try:
        active = repo.list_silences(engine, active_at=time.time())
        assert [(s.rule, s.server, s.created_by) for s in active] == [("demo-busy", "demo", "local")]
        assert "alert_silence" in [a.action for a in repo.list_audit(engine)]
    finally:
        engine.dispose()
    sidebar = wait_for_pattern(page, r"\(\d+ silenced\)", 30)  # the sidebar's count re-reads within seconds
    assert re.search(r"\d+ firing", sidebar)
    page.wait_for_timeout(6000)  # the live table's next refresh marks the alert silenced
    shot(page, pitwall, "alerts-01-firing-and-silence")
    no_traceback(page)

    goto(page, pitwall, "/")
    card = wait_for_pattern(page, r"demo-busy: .*\(silenced\)", 60)
    assert "demo" in card
    shot(page, pitwall, "alerts-02-overview-card")
    no_traceback(page)
