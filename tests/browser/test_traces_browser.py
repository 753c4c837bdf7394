"""The Traces page in a real browser: Streamlit serves app.py on a real SQLite file holding the
demo's trace (imported as `pitwall trace import traces/demo-chat.jsonl` stores it) and a server
(the simulator, a real process on loopback); Chromium opens the page, sees the table and the
preview (figures, the arrival-rate and length charts), asks for a replay of a window of the
trace against the server, the runner's probe lane handler (runner/sweeps.py, as `pitwall up`
wires it) carries the intent out in a sweep process, and the page lists the replay with what it
measured; then it imports a second trace through the upload form and sees it listed with its bad
row named. Screenshotted (the test's tmp dir, and PITWALL_SCREENSHOT_DIR when set).
"""

from __future__ import annotations

import pytest
from pwtest import REPO, wait_for
from sim_fixture import sim_server  # noqa: F401 - the module's simulator, fixture `sim`
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
def pitwall(tmp_path_factory, sim):
    from storage.db import make_engine

    tmp = tmp_path_factory.mktemp("pitwall-traces")
    url = f"sqlite:///{tmp / 'data' / 'pitwall.db'}"
    (tmp / "data").mkdir()
    engine = make_engine(url)
    importer.store(engine, importer.build([REPO / "traces" / "demo-chat.jsonl"]))
    repo.upsert_server(engine, name="sim", base_url=sim, kind="llm", managed=False)
    engine.dispose()
    with app_on(tmp, url) as served:
        yield {**served, "db": url}


def test_the_traces_page_previews_and_imports(browser, pitwall) -> None:  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.goto(pitwall["url"] + "/traces")
    text = wait_for_pattern(page, r"--trace demo-chat --speed 1(.|\n)*Import a trace", 120)
    text = wait_for_pattern(page, r"Prefix reuse(.|\n)*Sessions", 60)
    page.get_by_test_id("stVegaLiteChart").nth(1).wait_for(timeout=60_000)  # both charts drawn
    no_traceback(page)
    shot(page, pitwall, "traces-preview")

    # a replay: the first 10 s of the trace at 2x against the simulator
    page.get_by_role("spinbutton", name="Speed (x)").fill("2")
    page.get_by_role("spinbutton", name="To (s, 0: the end)").fill("10")
    page.get_by_role("button", name="Replay").click()
    text = wait_for_pattern(page, r"Replay of demo-chat at 2x against sim queued: run (\d+)", 60)
    from runner.sweeps import Sweeps
    from storage.db import make_engine

    engine = make_engine(pitwall["db"])
    (intent,) = repo.list_intents(engine, kinds=("probe",), states=("pending",))
    Sweeps(engine, pitwall["db"], timeout_s=300).handle(intent)  # the runner's probe lane
    done = repo.get_intent(engine, intent_id=intent.id)
    assert done is not None and done.state == "done", done.message if done else None
    run = repo.get_probe_run(engine, run_id=intent.payload["run_id"])
    assert run is not None and run.status == "done" and run.spec["trace"] == "demo-chat"
    sent = repo.probe_requests(engine, run_id=run.id)
    window = [r for r in importer.build([REPO / "traces" / "demo-chat.jsonl"]).trace.requests
              if r.arrival_s < 10 and r.status != "failed"]
    assert len(sent) == len(window) and sent["ok"].astype(bool).all()
    page.reload()
    wait_for(lambda: "done" in " ".join(page.locator("[data-testid='stDataFrame'] table[role='grid'] td")
                                          .all_text_contents()), 60, "the replay listed as done")
    no_traceback(page)
    shot(page, pitwall, "traces-replayed")

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
    assert {t.name for t in repo.list_traces(engine)} == {"demo-chat", "azure_2024_conv"}
    audits = [a for a in repo.list_audit(engine) if a.action in ("trace_import", "replay_start")]
    assert sorted((a.action, a.target) for a in audits) == [("replay_start", "sim"), ("trace_import", "azure_2024_conv")]
    ctx.close()
