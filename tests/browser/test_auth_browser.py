"""Security model in a real browser: `pitwall up` on 127.0.0.1 with PITWALL_PASSWORD set, driven
through headless Debian Chromium (Playwright).

- A fresh browser session on the Profiles page gets a password field and no enabled Relaunch,
  Stop, Validate or Save control, although it comes from loopback; after signing in they work.
- A page opened under another host name that resolves to 127.0.0.1 (DNS rebinding, simulated with
  Chromium's --host-resolver-rules) is refused with one sentence.

Skipped with the reason when /usr/bin/chromium is missing (`make system-deps` installs it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from pwtest import PY, free_demo_port, free_port, subprocess_env

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="needs Debian's chromium at /usr/bin/chromium (make system-deps)"),
]
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
PASSWORD = "correct horse battery staple"
CONTROLS = ("Relaunch…", "Stop…", "Validate", "Save profile", "Save TOML")


def _wait_http(url: str, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - 127.0.0.1 only
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout_s:.0f} s")


@pytest.fixture(scope="module")
def pitwall(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pitwall-auth")
    port, demo_port = free_port(), free_demo_port()
    env = subprocess_env({
        "PITWALL_DATA_DIR": str(tmp / "data"),
        "PITWALL_DATABASE_URL": f"sqlite:///{tmp / 'data' / 'pitwall.db'}",
        "PITWALL_CONFIG": "",
        "PITWALL_DEMO": "auto",  # the demo simulator is a managed server: Relaunch / Stop apply
        "PITWALL_DEMO_PORT": str(demo_port),
        "PITWALL_PASSWORD": PASSWORD,
    })
    log = open(tmp / "pitwall-up.log", "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen([PY, "-m", "cli", "up", "--port", str(port)], cwd=tmp, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/_stcore/health", 90)
        yield {"port": port, "url": f"http://127.0.0.1:{port}", "tmp": tmp}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(40)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def _enabled(page, label: str) -> bool:
    buttons = page.get_by_role("button", name=label, exact=True)
    return any(buttons.nth(i).is_visible() and buttons.nth(i).is_enabled() for i in range(buttons.count()))


def _no_traceback(page) -> None:
    assert page.get_by_test_id("stException").count() == 0
    assert "Traceback" not in page.inner_text("body")


def test_loopback_visitor_signs_in_before_any_control(pitwall):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.set_default_timeout(30_000)
        # the runner seeds the demo server shortly after start: reload until the page lists it
        deadline = time.time() + 120
        while True:
            page.goto(pitwall["url"] + "/profiles?server=demo")
            page.get_by_test_id("stSidebarNav").wait_for()
            try:
                page.get_by_role("button", name="Relaunch…").first.wait_for(timeout=10_000)
                break
            except Exception:
                if time.time() > deadline:
                    raise
        password = page.locator("input[type='password']")
        assert password.count() == 1 and password.first.is_visible()
        assert not [c for c in CONTROLS if _enabled(page, c)], "a control is enabled before signing in"
        page.screenshot(path=str(pitwall["tmp"] / "auth-signed-out.png"), full_page=True)

        page.get_by_role("textbox", name="Name", exact=True).fill("alice")
        password.first.fill(PASSWORD)
        page.get_by_role("button", name="Sign in", exact=True).click()
        page.get_by_text("(operator)").first.wait_for()
        page.get_by_role("button", name="Save profile").first.wait_for()
        enabled = [c for c in CONTROLS if _enabled(page, c)]
        page.screenshot(path=str(pitwall["tmp"] / "auth-signed-in.png"), full_page=True)
        _no_traceback(page)
        assert enabled == list(CONTROLS[:4])  # Save TOML sits in the Raw TOML tab, not shown yet
        assert page.locator("input[type='password']").count() == 0
        browser.close()


def test_a_rebound_host_name_is_refused(pitwall):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # the attacker's name resolves to 127.0.0.1, as after a DNS rebinding
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=[*ARGS, "--host-resolver-rules=MAP rebind.test 127.0.0.1"])
        page = browser.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"http://rebind.test:{pitwall['port']}/profiles")
        page.get_by_text("This dashboard does not answer to that host name").wait_for()
        body = page.inner_text("body")
        browser.close()
    assert "Relaunch" not in body and "Password" not in body
