"""`pitwall up`: serves the dashboard, the page renders in headless Chromium without an
exception, and SIGTERM stops every process it started (no orphans)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
import urllib.request

import psutil
import pytest
from pwtest import PY, free_port, subprocess_env

CHROMIUM = shutil.which("chromium")
CHROME_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {timeout} s")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (make system-deps)")
def test_up_serves_a_page_that_renders_and_stops_cleanly(tmp_path):
    port = free_port()
    env = subprocess_env({
        "PITWALL_DATA_DIR": str(tmp_path / "data"),
        "PITWALL_DATABASE_URL": "",
        "PITWALL_DEMO": "off",
        "PITWALL_CONFIG": "",
    })
    proc = subprocess.Popen([PY, "-m", "cli", "up", "--port", str(port)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/_stcore/health", 60)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2  # runner + streamlit

        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"http://127.0.0.1:{port}/", wait_until="networkidle")
            page.get_by_text("Overview").first.wait_for(timeout=30_000)
            page.wait_for_timeout(1000)
            page.screenshot(path=str(tmp_path / "up-overview.png"), full_page=True)
            body = page.inner_text("body")
            browser.close()
        assert not errors
        assert "Traceback" not in body and "Exception" not in body
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "Pitwall stopped." in out
    _, left = psutil.wait_procs(children, timeout=30)  # a loaded host may take a while to reap them
    alive = [c.pid for c in left if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"orphans left: {alive}"
