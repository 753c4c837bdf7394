"""The Overview at 50 servers (AppTest, real SQLite file): the fleet table, filters, the view
toggle, the fleet scorecards and their exports."""

from __future__ import annotations

import pytest
from fleet_seed import MODELS, seed_fleet
from pwtest import REPO
from streamlit.testing.v1 import AppTest

from dashboard.components.fleet import MISSING

APP = str(REPO / "app.py")


@pytest.fixture
def fleet_env(app_env):
    from storage.db import make_engine

    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    seed_fleet(engine, 50)
    engine.dispose()
    return app_env


def _run() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _cards(at: AppTest) -> list[str]:
    """Element ids of the server cards (a keyed container's id ends with its key, card_<name>)."""
    return [c.proto.id for c in at.get("container") if "card_srv" in c.proto.id]


def _table(at: AppTest):
    frames = [d.value for d in at.dataframe if "server" in d.value.columns and "host" in d.value.columns]
    assert frames, "no fleet table"
    return frames[0]


def test_fifty_servers_show_as_a_table_with_one_row_each(fleet_env):
    at = _run()
    table = _table(at)
    assert len(table) == 50
    assert set(table["host"]) == {"h1", "h2", "h3", "h4", "h5"}
    assert table.loc[table["server"] == "srv-03", "output_tok_s"].iloc[0] == pytest.approx(400.0)
    assert table["open"].iloc[0] == "server?server=srv-00"
    assert not _cards(at)  # 50 servers: the table, no cards


def test_host_filter_narrows_the_table_and_few_servers_become_cards(fleet_env):
    at = _run()
    at.multiselect(key="fleet-host").set_value(["h2"]).run()
    assert len(_table(at)) == 10
    at.text_input(key="fleet-search").set_value("srv-0").run()  # h2 and srv-0x: srv-01, srv-06
    assert not [d for d in at.dataframe if "host" in d.value.columns]  # auto: 2 servers -> cards
    assert len(_cards(at)) == 2
    titles = " ".join(m.value for m in at.markdown).replace("\\-", "-")  # names are md-escaped
    assert "srv-01" in titles and "srv-06" in titles and "srv-11" not in titles
    at.segmented_control(key="fleet-view").set_value("table").run()
    assert list(_table(at)["server"]) == ["srv-01", "srv-06"]


def test_fleet_scorecards_per_model_then_per_profile(fleet_env):
    at = _run()
    sc = [d.value for d in at.dataframe if "group" in d.value.columns][0]
    assert set(MODELS) <= set(sc["group"])
    assert "different workloads" in " ".join(sc["note"])
    at.segmented_control(key="fleet-group").set_value("profile").run()
    sc = [d.value for d in at.dataframe if "group" in d.value.columns][0]
    assert list(sc["group"].drop_duplicates()) == ["p1", "p2", "p3", "p4"]
    labels = [b.label for b in at.get("download_button")]
    assert labels.count("CSV") == 2 and labels.count("JSON") == 2 and labels.count("MD") == 2


def test_a_missing_figure_reads_as_a_dash_not_none(fleet_env):
    """Both grids draw a missing figure (no probe run, no price) as MISSING: Streamlit's own
    default is a grey "None". The table holds NaN there (it sorts as a number); the text is the
    element's placeholder, drawn by the browser (the screenshots in test_fleet_browser.py)."""
    at = _run()
    table = _table(at)
    sc = [d for d in at.dataframe if "group" in d.value.columns][0]
    assert table["rps"].isna().any() and sc.value["ttft_p50_s"].isna().any()
    grids = [d for d in at.dataframe if "group" in d.value.columns or "host" in d.value.columns]
    assert len(grids) == 2 and {d.proto.placeholder for d in grids} == {MISSING}
