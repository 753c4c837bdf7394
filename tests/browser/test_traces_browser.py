"""The Traces page in a real browser: Streamlit serves app.py on a real SQLite file holding the
demo's trace (imported as `pitwall trace import traces/demo-chat.jsonl` stores it); Chromium
opens the page, sees the table and the preview (figures, the arrival-rate and length charts,
the replay command), imports a second trace through the upload form, and sees it listed with
its bad row named. Screenshotted (the test's tmp dir, and PITWALL_SCREENSHOT_DIR when set).
"""

from __future__ import annotations

import pytest
from pwtest import REPO
from test_dashboard_e2e import (  # noqa: F401 - fixtures, and the browser marks (skip without chromium)
    app_on,
    browser,
    no_traceback,
    pick,
    pytestmark,
    shot,
    wait_for_pattern,
)

from collectors.trace import importer
from storage import repo


@pytest.fixture(scope="module")
def pitwall(tmp_path_factory):
    from storage.db import make_engine

    tmp = tmp_path_factory.mktemp("pitwall-traces")
    url = f"sqlite:///{tmp / 'data' / 'pitwall.db'}"
    (tmp / "data").mkdir()
    engine = make_engine(url)
    importer.store(engine, importer.build([REPO / "traces" / "demo-chat.jsonl"]))
    engine.dispose()
    with app_on(tmp, url) as served:
        yield {**served, "db": url}


def test_the_traces_page_previews_and_imports(browser, pitwall) -> None:  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.goto(pitwall["url"] + "/traces")
    text = wait_for_pattern(page, r"--trace demo-chat --speed auto(.|\n)*Import a trace", 120)
    text = wait_for_pattern(page, r"Prefix reuse(.|\n)*Sessions", 60)
    page.get_by_test_id("stVegaLiteChart").nth(1).wait_for(timeout=60_000)  # both charts drawn
    no_traceback(page)
    shot(page, pitwall, "traces-preview")

    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
        str(REPO / "tests" / "fixtures" / "traces" / "azure_2024_conv.csv"))
    page.get_by_role("button", name="Import").click()
    text = wait_for_pattern(page, r"Stored azure_2024_conv: 3 requests", 120)
    assert "1 row(s) could not be read" in text
    pick(page, "Preview", "azure_2024_conv")
    wait_for_pattern(page, r"1 row\(s\) could not be read \(the first ones\)", 60)
    cells = page.locator("[data-testid='stDataFrame'] table[role='grid'] td")
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stDataFrame] table[role=grid] td')]"
                           ".some(td => td.textContent.includes(\"GeneratedTokens is 'x'\"))", timeout=60_000)
    assert any("GeneratedTokens is 'x', not a number" in t for t in cells.all_text_contents())
    no_traceback(page)
    shot(page, pitwall, "traces-imported")
    from storage.db import make_engine

    engine = make_engine(pitwall["db"])
    assert {t.name for t in repo.list_traces(engine)} == {"demo-chat", "azure_2024_conv"}
    audits = [a for a in repo.list_audit(engine) if a.action == "trace_import"]
    assert len(audits) == 1 and audits[0].target == "azure_2024_conv"
    ctx.close()
