"""A fresh demo looks alive: every page at 1400x900 on a demo about two minutes old, as a newcomer
starts it (`pitwall up`, no pitwall.toml), through headless Debian Chromium (Playwright).

What is checked on every page, and how:
- No clipped label. DOM text (st.metric labels and values, and any element of the main area that
  ellipsizes with CSS `text-overflow: ellipsis`) is clipped when its text, measured with a DOM
  Range, is wider than its box. Vega charts draw into a canvas, so the page is loaded with a
  wrapper around CanvasRenderingContext2D.fillText (an init script) that records every string a
  chart draws with where it lands: Vega cuts a legend label, axis title or chart title that
  passes its `labelLimit` / `titleLimit` and draws it ending in "…", and a string that runs past
  the canvas's right edge is cut by the canvas itself; either is a clipped label.
- No empty chart area wider than half the axis: on each Server-page time-series canvas, the
  columns holding coloured pixels (series lines and event rules, not the grey axes and grid) in
  the plot band span at least half the canvas (a young server's data in the right-most sliver of
  a 1-hour axis spanned about 3 %). A chart under half is read again for a few seconds (a
  canvas caught mid-repaint under load is whole on its next render; see `_coverage`).
- The young server's window says what it shows ("Showing the N minutes since demo started").
Screenshots of each page go to the test's tmp dir and, with PITWALL_SCREENSHOT_DIR, there too.

The same demo then shows the GPU wall with no GPU: demo mode reads the simulator's
dcgm-exporter look-alikes (gpu.dcgm_url defaults to them), so the demo's Server page shows GPU
panels, achieved bandwidth and the "bound by" verdict, and the image server's page the denoising
stage's wall and the what-if on another card (one `pitwall up` for both: a demo costs a core's
fraction for as long as it runs).

The demo is used once it is two minutes old (DEMO_AGE_S); its window is clamped to its data
from the first sample on, and a chart whose series start later to its own first sample, at
least 60 s long.
Skipped with the reason when /usr/bin/chromium is missing (`make system-deps` installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from pwtest import PY, free_demo_port, free_port, stop_group, subprocess_env
from test_dashboard_e2e import (  # noqa: F401 - the browser marks (skip without chromium)
    CHROMIUM,
    _wait_http,
    goto,
    no_traceback,
    pytestmark,
    shot,
    wait_for_pattern,
)
from test_image_browser import _wait_run_done

DEMO_AGE_S = 120.0
REREAD_S = 12.0  # longer than the 1-h page's 5-s refresh: a chart mid-repaint is whole by then
PAGES = (
    ("overview", "/"),
    ("server-demo-1h", "/server?server=demo&window=1h"),
    ("server-demo-7d", "/server?server=demo&window=7d"),
    ("server-image-1h", "/server?server=demo-image&window=1h"),
    ("benchmarks", "/benchmarks?server=demo"),
    ("events", "/events"),
    ("alerts", "/alerts"),
    ("compare", "/compare?server=demo"),
    ("tune", "/tune?server=demo"),
    ("profiles", "/profiles"),
    ("traces", "/traces"),
    ("about", "/about"),
)

# Every string a canvas draws: text, its left and right edge in canvas pixels, the canvas width.
RECORD_TEXT = """
(() => {
  // what each canvas shows now: a string drawn by fillText stays recorded until a clearRect
  // erases the spot it was drawn on (Vega clears a canvas, or the dirty part of it, before each
  // render), so a label drawn in a passing render (a resize, a refresh) is not counted.
  const orig = CanvasRenderingContext2D.prototype.fillText;
  const clear = CanvasRenderingContext2D.prototype.clearRect;
  const ids = new WeakMap(); let next = 0;
  const id = (c) => { if (!ids.has(c)) ids.set(c, ++next); return ids.get(c); };
  window.__canvasId = id;
  window.__drawn = [];
  CanvasRenderingContext2D.prototype.fillText = function (text, x, y, maxWidth) {
    try {
      const m = this.getTransform();
      const w = this.measureText(String(text)).width;
      const shift = this.textAlign === 'right' || this.textAlign === 'end' ? w
        : this.textAlign === 'center' ? w / 2 : 0;
      const left = m.a * (x - shift) + m.e, right = m.a * (x - shift + w) + m.e;
      const cy = m.d * y + m.f;
      window.__drawn.push({text: String(text), left, right, y: cy, canvas: id(this.canvas),
                           width: this.canvas.width,
                           chart: !!this.canvas.closest('[data-testid=stVegaLiteChart],[data-testid=stArrowVegaLiteChart]')});
    } catch (e) {}
    return orig.call(this, text, x, y, maxWidth);
  };
  CanvasRenderingContext2D.prototype.clearRect = function (x, y, w, h) {
    try {
      const m = this.getTransform(), c = id(this.canvas);
      const x0 = m.a * x + m.e, x1 = m.a * (x + w) + m.e, y0 = m.d * y + m.f, y1 = m.d * (y + h) + m.f;
      window.__drawn = window.__drawn.filter(d => d.canvas !== c || d.right < x0 || d.left > x1
                                                  || d.y < y0 || d.y > y1);
    } catch (e) {}
    return clear.call(this, x, y, w, h);
  };
})();
"""

CLIPPED_DOM = """
() => {
  const main = document.querySelector('[data-testid=stMain]') || document.body;
  const out = [];
  for (const el of main.querySelectorAll('*')) {
    if (el.children.length > 0 && !el.matches('[data-testid=stMarkdownContainer]')) continue;
    const cs = getComputedStyle(el);
    const box = el.closest('.stMarkdownEllipsis') || (cs.textOverflow === 'ellipsis' ? el : null);
    if (!box || !el.textContent.trim()) continue;
    const r = document.createRange(); r.selectNodeContents(el);
    const text = r.getBoundingClientRect().width;
    if (text > box.clientWidth + 1) out.push(el.textContent.trim().slice(0, 60));
  }
  return [...new Set(out)];
}
"""

# columns with coloured pixels in the plot band (5 %..80 % of the height: below it the legend's
# coloured symbols), as a share of the width
COVERAGE = """
() => [...document.querySelectorAll('[data-testid=stVegaLiteChart] canvas')].map(c => {
  const ctx = c.getContext('2d'); const {width, height} = c;
  if (!width || !height) return {width, share: 1};
  const img = ctx.getImageData(0, Math.floor(height * 0.05), width, Math.floor(height * 0.75)).data;
  const rows = Math.floor(height * 0.75);
  let lo = width, hi = -1;
  for (let y = 0; y < rows; y++) for (let x = 0; x < width; x++) {
    const i = (y * width + x) * 4;
    if (img[i + 3] < 128) continue;
    const mx = Math.max(img[i], img[i + 1], img[i + 2]), mn = Math.min(img[i], img[i + 1], img[i + 2]);
    if (mx - mn > 60) { if (x < lo) lo = x; if (x > hi) hi = x; }
  }
  // which chart, for the failure message: the heading above it and the strings it shows now
  const box = c.closest('[data-testid=stElementContainer]');
  let title = '', prev = box && box.previousElementSibling;
  for (let i = 0; prev && i < 3 && !title; i++, prev = prev.previousElementSibling) title = prev.innerText.trim();
  const texts = (window.__drawn || []).filter(d => d.canvas === window.__canvasId(c)).map(d => d.text);
  return {width, share: hi < 0 ? 0 : (hi - lo) / width, lo, hi, title: title.slice(0, 60),
          texts: texts.slice(0, 20)};
})
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):  # type: ignore[no-untyped-def]
    """`pitwall up` as a newcomer runs it: demo mode, no pitwall.toml, nothing else set."""
    tmp = tmp_path_factory.mktemp("pitwall-fresh")
    port, demo_port = free_port(), free_demo_port()
    env = subprocess_env({
        "PITWALL_DATA_DIR": str(tmp / "data"),
        "PITWALL_DATABASE_URL": f"sqlite:///{tmp / 'data' / 'pitwall.db'}",
        "PITWALL_DEMO": "auto",
        "PITWALL_DEMO_PORT": str(demo_port),
    })
    env.pop("PITWALL_CONFIG", None)
    log = (tmp / "pitwall-up.log").open("wb")
    proc = subprocess.Popen([PY, "-m", "cli", "up", "--port", str(port)], cwd=tmp, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.time()
    try:
        _wait_http(f"http://127.0.0.1:{port}/_stcore/health", 90)
        yield {"url": f"http://127.0.0.1:{port}", "tmp": tmp, "started": started, "db": tmp / "data" / "pitwall.db",
               "env": env}
    finally:
        stop_group(proc)
        log.close()


@pytest.fixture(scope="module")
def page(demo):  # type: ignore[no-untyped-def]
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless=new", "--no-sandbox",
                                                                      "--disable-gpu", "--no-first-run"])
        pg = browser.new_page(viewport={"width": 1400, "height": 900})
        pg.add_init_script(RECORD_TEXT)
        yield pg
        browser.close()


def _shot(page, demo, name: str) -> None:  # type: ignore[no-untyped-def]
    out = demo["tmp"] / "screenshots"
    out.mkdir(exist_ok=True)
    main = page.locator("[data-testid=stMain]")
    for i in range(3):  # the top of the page and two screens down (Streamlit scrolls stMain)
        path = out / f"{name}-{i}.png"
        page.screenshot(path=str(path))
        if os.environ.get("PITWALL_SCREENSHOT_DIR"):
            Path(os.environ["PITWALL_SCREENSHOT_DIR"]).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(os.environ["PITWALL_SCREENSHOT_DIR"]) / path.name)
        main.evaluate("(el) => el.scrollBy(0, 800)")
        page.wait_for_timeout(600)


def _settle(page) -> None:  # type: ignore[no-untyped-def]
    """Wait until the script has run and charts had time to paint (no spinner, no stale element)."""
    page.get_by_test_id("stSidebarNav").wait_for(timeout=90_000)
    deadline = time.time() + 60
    while time.time() < deadline:
        page.wait_for_timeout(1500)
        if page.locator("[data-testid=stStatusWidget] *").count() == 0:
            break
    page.wait_for_timeout(2500)


def _coverage(page) -> list[dict]:  # type: ignore[no-untyped-def]
    """COVERAGE of each chart, read again for up to REREAD_S while a chart reads under half.

    The rule is about where the data lie on the axis, not about one frame: under load a canvas
    was once caught mid-repaint (1 visit in about 12, two CPU hogs beside the demo), showing only
    the region Vega had marked dirty (91-177 px of 462, the axis labels gone) and whole again on
    its next render. A chart whose data cover under half the axis reads so on every render, so
    it still fails here; each chart keeps its widest reading.
    """
    # on a loaded host the page's script may not have started when _settle looked (no status
    # widget yet): give a Server page up to a minute to draw its first chart
    first = time.time() + 60
    cover = page.evaluate(COVERAGE)
    while not cover and time.time() < first:
        page.wait_for_timeout(1000)
        cover = page.evaluate(COVERAGE)
    deadline = time.time() + REREAD_S
    while cover and any(c["share"] < 0.5 for c in cover) and time.time() < deadline:
        page.wait_for_timeout(1000)
        again = page.evaluate(COVERAGE)
        if len(again) != len(cover):
            cover = again
            continue
        cover = [c if c["share"] >= a["share"] else a for c, a in zip(cover, again, strict=True)]
    return cover


def test_every_page_of_a_young_demo_has_no_clipped_label_and_no_empty_chart_area(page, demo):
    # the demo has data and is at least DEMO_AGE_S old (the runner's first samples start its clock)
    page.goto(demo["url"] + "/server?server=demo&window=1h")
    page.get_by_text("since demo started").first.wait_for(timeout=180_000)
    page.goto("about:blank")  # a live page redraws its charts every few seconds: CPU the demo's wait needs not
    time.sleep(max(0.0, DEMO_AGE_S - (time.time() - demo["started"])))
    problems: dict[str, list] = {}
    for name, path in PAGES:
        page.goto(demo["url"] + path)
        page.evaluate("() => { window.__drawn = []; }")
        _settle(page)
        assert page.get_by_text("Traceback").count() == 0, name
        clipped = page.evaluate(CLIPPED_DOM)
        drawn = page.evaluate("() => window.__drawn.filter(d => d.chart)")
        cut = sorted({d["text"] for d in drawn if d["text"].endswith("…") or d["right"] > d["width"] + 1
                      or d["left"] < -1})
        if clipped or cut:
            problems[name] = clipped + cut
        if name.startswith("server"):
            cover = _coverage(page)
            assert cover, f"{name}: no chart drawn"
            # the bug: every chart's data in the right-most sliver (3 % of a 1-h axis)
            empty = [c for c in cover if c["share"] < 0.5]
            if empty:
                problems.setdefault(name, []).append(f"{len(empty)} chart(s) with data over < half the axis: {empty}")
            assert page.get_by_text("since demo started").count() > 0 or name == "server-image-1h", name
        _shot(page, demo, name)
    assert not problems, f"clipped labels or empty chart areas at 1400x900: {problems}"


# -- the GPU wall, on the same demo (after the walk: it reads a young demo) ----------------------


def test_llm_demo_server_page_shows_the_gpu_wall(page, demo):  # type: ignore[no-untyped-def]
    goto(page, demo, "/server?server=demo&window=15m")
    page.get_by_text("GPU wall: what bounds the GPU").first.wait_for(timeout=90_000)
    wait_for_pattern(page, r"bound by: ", 120)
    # the panel draws in pieces: wait for its achieved-bandwidth figure too before reading it
    text = wait_for_pattern(page, r"Achieved band[\s\S]*[GT]B/s", 60)
    page.get_by_text("GPU wall: what bounds the GPU").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    shot(page, demo, "gpu-01-demo-server")
    no_traceback(page)
    # the simulated card's name and an achieved bandwidth against its peak, from its exporter
    assert "NVIDIA H200" in text and re.search(r"Achieved band", text) and re.search(r"[GT]B/s", text)


def test_image_demo_server_page_shows_the_denoising_wall_and_the_what_if(page, demo):  # type: ignore[no-untyped-def]
    _wait_run_done(demo, "demo-image: first sweep", 300)
    goto(page, demo, "/server?server=demo-image&window=15m")
    page.get_by_text("Denoising: which wall, and the step on another card").first.wait_for(timeout=90_000)
    wait_for_pattern(page, r"\(what-if\)", 120)
    text = wait_for_pattern(page, r"bound by: ", 60)  # the GPU wall panel below draws after it
    page.get_by_text("Denoising: which wall, and the step on another card").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    shot(page, demo, "gpu-02-image-denoise")
    no_traceback(page)
    assert "B300" in text and "bound by: " in text
    # the simulated B300 draws its 1,100 W on a 1024² DiT step with its clock held: the power
    # wall, and a what-if that says what it assumed of the power-held share
    assert "Held by power" in text and "held by the power cap as compute too" in text
