"""The Overview at 50 servers in a real browser: Streamlit serves app.py on a real SQLite file
seeded with tests/fleet_seed.py (no runner: the figures are the seed's), Debian Chromium drives
it. The fleet table shows 50 rows, a host filter narrows it to 10, a click on a header sorts it,
and the fleet scorecards show; screenshotted (the test's tmp dir, and PITWALL_SCREENSHOT_DIR
when set).

Skipped with the reason when /usr/bin/chromium is missing (`make system-deps` installs it).
"""

from __future__ import annotations

import pytest
from fleet_seed import seed_fleet
from pwtest import wait_for
from test_dashboard_e2e import (  # noqa: F401 - fixtures, and the browser marks (skip without chromium)
    app_on,
    browser,
    no_traceback,
    pick,
    pytestmark,
    shot,
    wait_for_pattern,
)

from dashboard.components.fleet import TABLE_COLUMNS


@pytest.fixture(scope="module")
def pitwall(tmp_path_factory):
    """Streamlit on a database with 50 seeded servers (the dict shape test_dashboard_e2e's
    `shot` expects)."""
    from storage.db import make_engine

    tmp = tmp_path_factory.mktemp("pitwall-fleet")
    url = f"sqlite:///{tmp / 'data' / 'pitwall.db'}"
    (tmp / "data").mkdir()
    engine = make_engine(url)
    seed_fleet(engine, 50)
    engine.dispose()
    # no runner: one with no [[servers]] would retire the seeded fleet
    with app_on(tmp, url) as served:
        yield served


@pytest.fixture
def page(browser, pitwall):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    ctx.close()


def _table(page):
    """The fleet table's grid (the first dataframe on the page)."""
    grid = page.get_by_test_id("stDataFrame").first
    grid.wait_for(timeout=90_000)
    return grid


def _rows(grid) -> int:
    """Data rows of a glide-data-grid: it draws only the visible rows, but its accessible table
    says how many there are (aria-rowcount counts the header row too)."""
    return int(grid.locator("table[role='grid']").get_attribute("aria-rowcount") or 0) - 1


def _server_col(grid) -> int:
    heads = [t.strip() for t in grid.locator("table[role='grid'] [role='columnheader']").all_text_contents()]
    assert "Server" in heads, heads
    return heads.index("Server")


def _server(grid, row: int) -> str:
    cell = grid.locator("table[role='grid'] tbody tr").nth(row).locator("td").nth(_server_col(grid))
    return str(cell.text_content()).strip()


def _first_server(grid) -> str:
    return _server(grid, 0)


def test_fifty_servers_table_filters_and_sorts(page, pitwall):
    page.goto(pitwall["url"] + "/")
    page.get_by_test_id("stSidebarNav").wait_for()
    wait_for_pattern(page, r"50 servers · figures over the last 15 min", 90)
    grid = _table(page)
    wait_for(lambda: _rows(grid) == 50, 30, "the table's 50 rows", poll_s=0.25)
    assert _first_server(grid) == "srv-00"
    no_traceback(page)
    shot(page, pitwall, "fleet-01-table-50")

    # sort by output tok/s: click its header (drawn on a canvas, at its fixed column offset)
    # twice: ascending, then descending
    box = grid.bounding_box()
    left = sum(w for c, w in TABLE_COLUMNS.items() if list(TABLE_COLUMNS).index(c) < list(
        TABLE_COLUMNS).index("output_tok_s"))
    x, y = box["x"] + left + TABLE_COLUMNS["output_tok_s"] / 2, box["y"] + 17
    for _ in range(2):
        page.mouse.click(x, y)
        page.wait_for_timeout(800)
    # 5,000 tok/s from its log: the highest (the grid sorts in the browser: poll, never a fixed wait)
    wait_for(lambda: _first_server(grid) == "srv-49", 30, "srv-49 first after the sort", poll_s=0.25)

    pick(page, "Host", "h2")
    page.keyboard.press("Escape")  # close the multiselect's list
    wait_for_pattern(page, r"10 servers · figures over", 60)
    grid = _table(page)
    wait_for(lambda: _rows(grid) == 10, 30, "the 10 rows of host h2", poll_s=0.25)
    names = {_server(grid, i) for i in range(10)}
    assert names == {f"srv-{i:02d}" for i in range(50) if i % 5 == 1}
    wait_for_pattern(page, r"Fleet scorecards", 30)
    scorecards = page.get_by_test_id("stDataFrame").nth(1)
    assert _rows(scorecards) >= 3  # one group per model, at least (h2 serves all three)
    shot(page, pitwall, "fleet-02-host-h2")
    no_traceback(page)
