"""A dimension with no target reads "no target set" (not "no grade yet", which waiting would never
end), on the scorecard and the Overview card; the demo ships targets for all four dimensions on
both demo servers (config/settings.py DEMO_SLO), so neither card says it.

Real SQLite (the `engine` fixture); the settings are loaded as `pitwall up` loads them.
"""

from __future__ import annotations

from pathlib import Path

from config.settings import load_settings
from dashboard.components.format import grade_badge
from scorecard.build import build_scorecard
from scorecard.grades import server_grades as grades
from storage import repo

NOW = 1_000_000.0


def _image_server(engine):  # type: ignore[no-untyped-def]
    return repo.upsert_server(engine, name="demo-image", base_url="http://127.0.0.1:1", kind="image")


def test_a_dimension_without_a_target_says_no_target_set(engine):
    _image_server(engine)
    card = build_scorecard(engine, server="demo-image", since_s=600, now=NOW)
    cost = card.dimensions["cost"]
    assert cost.grade == "none" and cost.no_target
    assert grade_badge(cost.grade, no_target=cost.no_target)[0] == "no target set"
    assert any("Compare → SLO targets" in r for r in cost.reasons)  # where to set one
    # latency has a default target (image p99 30 s) but no value yet: that one is "no grade yet"
    latency = card.dimensions["latency"]
    assert not latency.no_target and grade_badge(latency.grade)[0] == "no grade yet"


def test_the_demo_ships_targets_for_all_four_dimensions_on_both_servers(engine, tmp_path: Path):
    settings = load_settings(env={"PITWALL_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    srv = _image_server(engine)
    *_, unset = grades(engine, srv, NOW, settings)
    assert unset == ()  # every dimension of demo-image has a target
    llm = repo.upsert_server(engine, name="demo", base_url="http://127.0.0.1:2")
    assert grades(engine, llm, NOW, settings)[-1] == ()
    # without the demo's targets (a configured fleet) the image server's throughput and cost have none
    other = repo.upsert_server(engine, name="img-b", base_url="http://127.0.0.1:3", kind="image")
    assert set(grades(engine, other, NOW, settings)[-1]) == {"throughput", "cost"}
