"""TTFT percentiles computed once (collectors/probe/stats.py): the probe report, the scorecard,
the fleet scorecards and the Overview give the same figure on one seeded run, the figure each of
their own computations gave before they shared one."""

from __future__ import annotations

import pytest
from scorecard_seed import T0, seed_levels

from collectors.probe.client import RequestRecord
from collectors.probe.pacing import LevelPlan, LevelResult
from collectors.probe.report import level_report
from dashboard.services.views.fleet import fleet_rows
from dashboard.services.views.fleet_scorecards import fleet_scorecards
from dashboard.services.views.overview import key_figures
from scorecard.build import build_scorecard
from storage import repo

NOW = T0 + 700
#: canary TTFTs in the Overview's window: sorted 0.11 0.12 0.13 0.14 0.2 0.5
CANARY = [0.11, 0.13, 0.12, 0.5, 0.14, 0.2]


@pytest.fixture
def seeded(engine):
    # one level at concurrency 4: 9 requests, TTFT 0.18 x 3, 0.2 x 3, 0.22 x 3 (jitter 10 %)
    ids = seed_levels(engine, name="alpha", levels={4: (0.5, 0.2)}, t0=T0, jitter=0.1)
    srv = repo.get_server(engine, name="alpha")
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=[
            {"ts": T0 + 100 + i, "server_id": srv.id, "launch_id": None, "source": "canary",
             "metric": "canary.ttft_s", "value": v} for i, v in enumerate(CANARY)])
    return engine, srv, ids["run_id"]


def test_ttft_percentiles_of_a_probe_run_are_one_figure_on_every_path(seeded) -> None:
    engine, _, run_id = seeded
    # numpy linear over 9 values: p50 rank 4 -> 0.2; p95 rank 7.6 and p99 rank 7.92 -> 0.22
    want = [0.2, 0.22, 0.22]
    reqs = repo.probe_requests(engine, run_id=run_id)
    recs = [RequestRecord(level=4, seq=int(r.seq), warmup=False, t_start=float(r.start_ts),
                          t_end=float(r.start_ts + r.e2e_s), ttft_s=r.ttft_s, e2e_s=r.e2e_s,
                          itl_s=list(r.itl_s), tokens_out=r.tokens_out, tpot_s=r.tpot_s, ok=True)
            for r in reqs.itertuples()]
    lv = level_report(LevelResult(LevelPlan("concurrency", 4, requests=9, warmup=0), records=recs,
                                  loop_lag_s=[0.001], cpu_pct=1.0, wall_s=5.0)).to_dict()
    report = [lv["ttft_s"][f"p{p}"] for p in (50, 95, 99)]
    card = build_scorecard(engine, run_id=run_id, now=NOW)
    scorecard = [card.value(f"ttft_p{p}_s") for p in (50, 95, 99)]
    group = fleet_scorecards(fleet_rows(engine, now=NOW))[0]
    fleet = [group[f"ttft_p{p}_s"] for p in (50, 95, 99)]
    assert report == pytest.approx(want) and group["requests"] == 9
    assert scorecard == report and fleet == report
    # the level's spread too: the scorecard's equals the report's to the last bit
    assert card.levels[0]["spread"]["rps"] == lv["spread"]["rps"]
    assert card.levels[0]["spread"]["ttft_p99_s"] == lv["spread"]["ttft_p99_s"] == pytest.approx([0.18, 0.22])


def test_the_overviews_canary_ttft_p99_is_the_scorecards(seeded) -> None:
    engine, srv, _ = seeded
    # p99 of the 6 canary values: rank 4.95 -> 0.2 + 0.95 x (0.5 - 0.2) = 0.485
    overview = key_figures(engine, srv, NOW)["ttft_p99_s"]
    card = build_scorecard(engine, server="alpha", since_s=900, now=NOW, use_probes=False)
    assert overview == pytest.approx(0.485)
    assert card.value("ttft_p99_s") == overview


def test_a_fleet_row_and_the_servers_scorecard_come_from_one_gatherer(engine) -> None:
    """scorecard/gather.py fills both from their own reads (the fleet's batched, the scorecard's
    per server); these are the figures both gave when each had its own gatherer."""
    from scorecard_seed import seed_alpha, seed_canary_only

    seed_alpha(engine)
    seed_canary_only(engine)
    now = T0 + 5
    rows = {r.name: r for r in fleet_rows(engine, now=now)}
    # alpha: probe level 4, 4 of 5 measured requests ok, TTFT 0.1..0.4 (p99 0.397); 1 req/s x
    # 100 tok; 2 GPUs x 2 USD/h / 3600 / 100 tok/s x 1e6 = 11.1 USD/1M; radix 80 / 100 cached
    # beta: canary only, TTFT 0.1 0.2 0.3 (p99 0.298), 3 of 4 ok
    want = {"alpha": {"output_tok_s": 100.0, "rps": 1.0, "ttft_p99_s": 0.397, "cache_hit_rate": 0.8,
                      "usd_per_mtok": 2 * 2.0 / 3600 / 100 * 1e6, "success_rate": 0.8},
            "beta": {"output_tok_s": None, "rps": None, "ttft_p99_s": 0.298, "cache_hit_rate": None,
                     "usd_per_mtok": None, "success_rate": 0.75}}
    for name, figures in want.items():
        card = build_scorecard(engine, server=name, since_s=900, now=now)
        row = rows[name]
        assert {k: row.figures[k] for k in figures} == pytest.approx(figures), name
        assert row.figures["cache_hit_rate"] == card.value("radix_hit_rate")
        assert row.figures["ttft_p99_s"] == card.value("ttft_p99_s")
        assert row.grades == {d: g.grade or "none" for d, g in card.dimensions.items()}
    alpha = build_scorecard(engine, server="alpha", since_s=900, now=now)
    # queue 0 -> 20 -> 5 (max 20), health 1 1 0 1 (one flap), the server's own TTFT p99 0.5, 0.7
    assert (alpha.value("queue_max"), alpha.value("health_flaps")) == (20.0, 1.0)
    assert alpha.value("server_ttft_p99_s") == pytest.approx(0.6)
