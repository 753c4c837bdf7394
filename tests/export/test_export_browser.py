"""The HTML export in headless Chromium with every network request blocked: it must open offline,
ask for nothing outside itself, show the four dimensions and the charts, and lead with the
verdict: at 1400x900 the first screen holds the comparison's verdict and the grades, and the
provenance (workload, server args) is folded at the end (screenshot saved)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scorecard_seed import DETAIL_A, seed_alpha

from export import formats
from scorecard.build import build_scorecard

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium (make system-deps)"),
]


def _open(html_path: Path, shot: Path) -> tuple[dict, list[str]]:
    from playwright.sync_api import sync_playwright

    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(20_000)
            own = html_path.as_uri()

            def route(r):  # the file itself may load; anything else is recorded and refused
                if r.request.url == own:
                    r.continue_()
                else:
                    requested.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.goto(own)
            page.wait_for_load_state("load")
            facts = page.evaluate("""() => ({
                dims: [...document.querySelectorAll('[data-dimension]')].map(e => e.dataset.dimension),
                headings: [...document.querySelectorAll('h2, h3')].map(e => e.textContent),
                top: Object.fromEntries(['#verdict', 'table.summary', 'details', 'table.prov']
                    .map(q => [q, document.querySelector(q).getBoundingClientRect().top])),
                folded: !document.querySelector('details').open,
                charts: [...document.querySelectorAll('[data-chart] svg')].length,
                marks: [...document.querySelectorAll('[data-chart] svg path, [data-chart] svg line')].length,
                text: document.body.innerText,
            })""")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    return facts, requested


def test_html_export_offline_in_chromium(engine, tmp_path):
    a = seed_alpha(engine, name="a")
    b = seed_alpha(engine, name="b", ttft_scale=2.0, fingerprint="fp-b",
                   detail=dict(DETAIL_A, levels=[8], max_new_tokens=256))
    cards = [build_scorecard(engine, run_id=a["run_id"], settings_slo={"ttft_p99_s": 0.5}),
             build_scorecard(engine, run_id=b["run_id"], settings_slo={"ttft_p99_s": 0.5})]
    html = formats.render("html", cards).decode()
    # no scripts, no linked resources (SVG's xmlns="http://www.w3.org/..." is a name, not a fetch)
    assert "<script" not in html
    assert not any(f'{attr}="{scheme}' in html for attr in ("src", "href")
                   for scheme in ("http", "//"))
    path = tmp_path / "review.html"
    path.write_text(html, encoding="utf-8")
    shot = tmp_path / "review.png"
    facts, requested = _open(path, shot)
    assert requested == []
    assert facts["dims"] == ["latency", "throughput", "cost", "stability"] * 2
    for h in ("Verdict", "Grades", "Deltas", "Latency", "Throughput", "Cost", "Stability",
              "Charts", "Provenance"):
        assert h in facts["headings"]
    # the verdict and the grades on the first screen; the provenance folded, after everything
    assert facts["top"]["#verdict"] < facts["top"]["table.summary"] < 900, facts["top"]
    assert facts["folded"] and facts["top"]["details"] > facts["top"]["table.summary"] + 900
    assert "Server args" not in facts["text"] and "chunked_prefill_size" not in facts["text"]
    # comparison bars + per card: latency vs load, throughput vs load, batch and queue
    assert facts["charts"] == 1 + 2 * 3
    assert facts["marks"] > 20
    assert "These runs differ in load levels" in facts["text"] and "levels: [4] -> [8]" in facts["text"]
    assert shot.stat().st_size > 50_000
