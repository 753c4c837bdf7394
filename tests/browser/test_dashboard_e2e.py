"""End-to-end: `pitwall up` in demo mode, driven through headless Debian Chromium (Playwright).

One `python -m cli up` per module (the runner, the demo simulator and Streamlit), with its
data dir, demo port and a 1-second canary in tmp. The tests run in file order and build on each
other like an operator would: look at the Overview, start a sweep, relaunch under another
profile, compare, export. Screenshots of every page go to the test's tmp dir and, when
PITWALL_SCREENSHOT_DIR is set, are copied there too (to look at them).

Skipped with the reason when /usr/bin/chromium is missing (`make system-deps` installs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pwtest import PY, REPO, free_demo_port, free_port, subprocess_env

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="needs Debian's chromium at /usr/bin/chromium (make system-deps)"),
]
#: the demo's simulators at 4x: the flows here read pages, not figures;
#: the demo's first sweep and a relaunch take a quarter of the wall time
SIM_SPEED = 4
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
GRADES = ("pass", "warn", "fail")


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
def pitwall(tmp_path_factory, request):
    """`pitwall up` in demo mode; a module that imports this fixture may add TOML to its
    pitwall.toml through a module-level `PITWALL_TOML` string (e.g. an alert rule), and run the
    demo's simulators faster through a module-level `SIM_SPEED` (model seconds per wall second,
    default 1): the bundled profiles are copied with that SGLANG_SIM_SPEED, as an operator's own
    profiles folder (PITWALL_PROFILES_DIR). Figures keep model time; the flows take less wall time."""
    tmp = tmp_path_factory.mktemp("pitwall-e2e")
    speed = getattr(request.module, "SIM_SPEED", 1)
    extra: dict[str, str] = {}
    if speed != 1:
        profiles = tmp / "profiles"
        profiles.mkdir()
        for src in sorted((REPO / "profiles").glob("*.toml")):
            text = src.read_text(encoding="utf-8")
            (profiles / src.name).write_text(
                text.replace('SGLANG_SIM_SPEED = "1"', f'SGLANG_SIM_SPEED = "{speed}"'), encoding="utf-8")
        assert f'SGLANG_SIM_SPEED = "{speed}"' in (profiles / "demo.toml").read_text(encoding="utf-8")
        extra["PITWALL_PROFILES_DIR"] = str(profiles)
    port, demo_port = free_port(), free_demo_port()
    # No [[servers]]: `pitwall up` runs the demo. Throughput and cost have no default SLO (they
    # depend on model, hardware and price), so the operator's config sets them, as in production;
    # the demo simulator's canary gives a few output tok/s at 3.80 USD/GPU-h.
    config = tmp / "pitwall.toml"
    config.write_text("[slo]\noutput_tok_s = 1.0\nusd_per_1m_output_tok = 100000.0\n"
                      + getattr(request.module, "PITWALL_TOML", ""), encoding="utf-8")
    env = subprocess_env({
        "PITWALL_DATA_DIR": str(tmp / "data"),
        "PITWALL_DATABASE_URL": f"sqlite:///{tmp / 'data' / 'pitwall.db'}",
        "PITWALL_CONFIG": str(config),
        "PITWALL_DEMO": "auto",
        "PITWALL_DEMO_PORT": str(demo_port),
        "PITWALL_CANARY_INTERVAL_S": "1",
        **extra,
    })
    with serving([PY, "-m", "cli", "up", "--port", str(port)], cwd=tmp, env=env,
                 log_path=tmp / "pitwall-up.log", port=port):
        yield {"url": f"http://127.0.0.1:{port}", "tmp": tmp, "env": env}


@contextlib.contextmanager
def serving(argv: list[str], *, cwd: Path, env: dict[str, str], log_path: Path, port: int,
            stop_s: float = 40) -> Iterator[None]:
    """Run `argv` (its own process group, output to `log_path`) until Streamlit on `port`
    answers its health check; on exit SIGTERM the group, SIGKILL after `stop_s`."""
    log = open(log_path, "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/_stcore/health", 90)
        yield
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(stop_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


@contextlib.contextmanager
def app_on(tmp: Path, url: str) -> Iterator[dict]:
    """`streamlit run app.py` on the database `url` with no runner and no demo (a seeded database
    is shown as seeded), until the block ends: {"url", "tmp", "env"}."""
    port = free_port()
    env = subprocess_env({"PITWALL_DATA_DIR": str(tmp / "data"), "PITWALL_DATABASE_URL": url,
                          "PITWALL_CONFIG": "", "PITWALL_DEMO": "off", "PITWALL_MANAGED_RUNNER": "1"})
    argv = [PY, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.address", "127.0.0.1",
            "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    with serving(argv, cwd=tmp, env=env, log_path=tmp / "streamlit.log", port=port, stop_s=30):
        yield {"url": f"http://127.0.0.1:{port}", "tmp": tmp, "env": env}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, pitwall):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    ctx.close()


def shot(page, pitwall, name: str) -> Path:
    """Screenshot the whole app (Streamlit scrolls inside stMain, so grow the viewport first)."""
    out = pitwall["tmp"] / "screenshots"
    out.mkdir(exist_ok=True)
    path = out / f"{name}.png"
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    page.set_viewport_size({"width": 1400, "height": max(1000, min(int(height) + 40, 6000))})
    page.wait_for_timeout(400)
    page.screenshot(path=str(path))
    extra = os.environ.get("PITWALL_SCREENSHOT_DIR")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)
    page.set_viewport_size({"width": 1400, "height": 1000})
    return path


def goto(page, pitwall, path: str) -> None:
    page.goto(pitwall["url"] + path)
    page.get_by_test_id("stSidebarNav").wait_for()


def wait_for_pattern(pg, pattern: str, timeout_s: float) -> str:
    """The page's text once `pattern` (a regex) appears in it; live parts refresh in place."""
    deadline = time.time() + timeout_s
    text = ""
    while time.time() < deadline:
        text = pg.inner_text("body")
        if re.search(pattern, text):
            return text
        pg.wait_for_timeout(2000)
    raise AssertionError(f"{pattern!r} never appeared:\n{text[-3000:]}")


def no_traceback(page) -> None:
    assert page.get_by_test_id("stException").count() == 0
    assert "Traceback" not in page.inner_text("body")


def pick(page, label: str, option: str) -> None:
    """Choose `option` in the Streamlit selectbox/multiselect labelled `label`."""
    box = page.locator("[data-testid='stSelectbox'], [data-testid='stMultiSelect']").filter(
        has=page.get_by_text(label, exact=True))
    field = box.first.locator("input").first
    field.click()
    if page.get_by_role("option").count() == 0:  # focused but not open (react-aria's ComboBox
        field.press("ArrowDown")                  # opens on a press only sometimes): open it
    page.get_by_role("option", name=option).first.click()


def wait_text(page, text: str, timeout_s: float) -> None:
    page.get_by_text(text).first.wait_for(timeout=timeout_s * 1000)


def test_overview_shows_the_demo_servers_four_grades(page, pitwall):
    goto(page, pitwall, "/")
    card = page.locator(".st-key-card_demo")
    card.wait_for(timeout=60_000)
    deadline = time.time() + 150
    text = ""
    while time.time() < deadline:  # the canary and collectors need a few rounds before grading
        text = card.inner_text()
        # status badge first: on a busy host a health check can time out for a moment
        up = text.splitlines()[0].strip().endswith("up") if text else False
        if up and all(d in text for d in ("Latency", "Throughput", "Cost", "Stability")) and sum(
                text.count(g) for g in GRADES) >= 4:
            break
        page.wait_for_timeout(2000)
    shot(page, pitwall, "01-overview")
    no_traceback(page)
    assert text.splitlines()[0].strip().endswith("up"), text
    assert sum(text.count(g) for g in GRADES) >= 4, f"four graded dimensions expected:\n{text}"


def test_server_page_draws_live_charts(page, pitwall):
    goto(page, pitwall, "/server?server=demo&window=15m")
    page.locator("[data-testid='stVegaLiteChart']").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)
    shot(page, pitwall, "02-server")
    no_traceback(page)
    assert page.locator("[data-testid='stVegaLiteChart']").count() >= 4
    assert "SGLang" in page.inner_text("body")


def test_a_sweep_started_from_the_ui_completes_and_draws_curves(page, pitwall):
    goto(page, pitwall, "/benchmarks?server=demo")
    page.get_by_label("Concurrency levels").fill("1,2")
    page.get_by_label("Requests per level").fill("6")
    page.get_by_label("Max new tokens").fill("16")
    page.get_by_label("Name (optional)").fill("e2e sweep")
    page.get_by_role("button", name="Start sweep…").click()
    page.get_by_role("button", name="Start sweep", exact=True).click()
    wait_text(page, "e2e sweep", 30)
    wait_text(page, "finished: done", 240)
    page.get_by_text("Output throughput vs concurrency").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1000)
    shot(page, pitwall, "03-benchmarks")
    no_traceback(page)
    assert page.locator("[data-testid='stVegaLiteChart']").count() >= 3


def test_events_page_lists_events_as_text(page, pitwall):
    goto(page, pitwall, "/events?window=1h")
    page.get_by_text("Events", exact=True).first.wait_for()
    page.wait_for_timeout(1500)
    shot(page, pitwall, "04-events")
    no_traceback(page)


def test_relaunch_under_another_profile_then_compare_both(page, pitwall):
    goto(page, pitwall, "/profiles?server=demo")
    pick(page, "Profile", "demo-radix-off")
    page.get_by_role("button", name="Relaunch…").click()
    wait_for_pattern(page, r"under profile demo-radix-off\?", 60)  # the dialog names what it relaunches
    page.get_by_role("button", name="Relaunch now").click()
    deadline = time.time() + 240
    body = ""
    while time.time() < deadline:
        body = page.inner_text("body")
        tail = body.split("Relaunch R-", 1)[1][:400] if "Relaunch R-" in body else ""
        if "ready under profile demo-radix-off" in tail or "failed" in tail or "rolled back" in tail:
            break
        page.wait_for_timeout(2000)
    shot(page, pitwall, "05-profiles")
    no_traceback(page)
    assert "ready under profile demo-radix-off" in tail, body
    goto(page, pitwall, "/compare?server=demo")
    page.get_by_text("Launches", exact=True).first.click()
    page.wait_for_timeout(1000)
    for _ in range(2):
        box = page.locator("[data-testid='stMultiSelect']").first
        box.locator("input").first.click()
        page.get_by_role("option").first.click()
        page.keyboard.press("Escape")
        page.wait_for_timeout(800)
    wait_text(page, "Side by side", 60)
    page.wait_for_timeout(1500)
    shot(page, pitwall, "06-compare")
    no_traceback(page)
    text = page.inner_text("body")
    assert "demo-radix-off" in text and "profile demo" in text


def test_an_export_downloads(page, pitwall):
    goto(page, pitwall, "/compare?server=demo&window=15m")
    button = page.get_by_role("button", name="JSON", exact=True)
    button.wait_for(timeout=60_000)
    with page.expect_download(timeout=60_000) as dl:
        button.click()
    path = dl.value.path()
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    assert "schema_version" in json.dumps(doc)[:20000]


def test_about_page(page, pitwall):
    goto(page, pitwall, "/about")
    wait_text(page, "Runner", 30)
    page.wait_for_timeout(800)
    shot(page, pitwall, "07-about")
    no_traceback(page)
    assert "running as" in page.inner_text("body")


def test_repo_root_has_app(pitwall):
    assert (REPO / "app.py").exists()
