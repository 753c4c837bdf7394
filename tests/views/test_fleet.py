"""The fleet table and fleet scorecards on a real SQLite file with 50 seeded servers
(tests/fleet_seed.py has the arithmetic)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from fleet_seed import MODELS, PRICE, count_queries, fingerprint, seed_fleet, server_name, ttfts

from dashboard.services.views.fleet import (
    FleetFilter,
    filter_options,
    filter_rows,
    fleet_rows,
)
from dashboard.services.views.fleet_scorecards import MIXED_NOTE, fleet_scorecards
from export.fleet import fleet_meta, render_fleet
from storage import repo


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    from storage.db import make_engine

    eng = make_engine(f"sqlite:///{tmp_path_factory.mktemp('fleet') / 'pitwall.db'}")
    now = seed_fleet(eng, 50)
    yield eng, now, fleet_rows(eng, now=now)
    eng.dispose()


def test_one_row_per_server_with_host_model_profile_status(fleet):
    _, _, rows = fleet
    assert [r.name for r in rows] == [server_name(i) for i in range(50)]
    for i, r in enumerate(rows):
        assert (r.host, r.model, r.profile) == (f"h{i % 5 + 1}", MODELS[i % 3], f"p{i % 4 + 1}")
        assert r.status == ("down" if i % 10 == 9 else "up")
        assert r.figures["queue"] == i % 4 and r.figures["kv_usage"] == 0.5


def test_row_figures_are_the_servers_scorecard(fleet):
    from dashboard.services.views.fleet import FLEET_WINDOW_S
    from scorecard.build import build_scorecard

    eng, now, rows = fleet
    for i in (0, 3, 9):  # a probed server, a canary-only one, a down one
        card = build_scorecard(eng, server=server_name(i), since_s=FLEET_WINDOW_S, now=now)
        row = rows[i]
        for ours, theirs in (("output_tok_s", "output_tok_s"), ("ttft_p95_s", "ttft_p95_s"),
                             ("usd_per_mtok", "usd_per_1m_output_tok"), ("success_rate", "success_rate"),
                             ("cache_hit_rate", "radix_hit_rate"), ("rps", "rps")):
            assert row.figures[ours] == pytest.approx(card.value(theirs)), (i, ours)
        assert row.stability == pytest.approx({k: card.value(k) for k in row.stability})
        for dim, g in card.dimensions.items():
            assert row.grades[dim] == g.grade, (i, dim)
    assert rows[3].figures["cache_hit_rate"] == pytest.approx(0.75)  # 60 / (60 + 20), SQL sums
    # canary-only server 3: 400 tok/s, 2 GPUs x 2 USD/h -> 4 / (400 x 3600) x 1e6 = 2.777 USD/1M
    assert rows[3].figures["output_tok_s"] == pytest.approx(400.0)
    assert rows[3].figures["usd_per_mtok"] == pytest.approx(2 * PRICE / (400 * 3600) * 1e6)


def test_query_count_does_not_grow_with_servers(tmp_path):
    from storage.db import make_engine

    counts = []
    for n in (10, 50):
        eng = make_engine(f"sqlite:///{tmp_path / f'f{n}.db'}")
        now = seed_fleet(eng, n)
        q, rows = count_queries(eng, lambda e=eng, t=now: fleet_rows(e, now=t))
        assert len(rows) == n
        counts.append(q)
        eng.dispose()
    assert counts[0] == counts[1] == 14, counts  # README: "a fixed 14 queries"


def test_filters_narrow_by_host_model_profile_status_and_name(fleet):
    _, _, rows = fleet
    opts = filter_options(rows)
    assert opts["hosts"] == ["h1", "h2", "h3", "h4", "h5"] and opts["models"] == list(MODELS)
    assert {r.name for r in filter_rows(rows, FleetFilter(hosts=["h2"]))} == {
        server_name(i) for i in range(50) if i % 5 == 1}
    both = filter_rows(rows, FleetFilter(hosts=["h1"], models=["org/m-a"]))
    assert {r.name for r in both} == {server_name(i) for i in range(50) if i % 5 == 0 and i % 3 == 0}
    assert {r.name for r in filter_rows(rows, FleetFilter(statuses=["down"]))} == {
        server_name(i) for i in range(9, 50, 10)}
    assert [r.name for r in filter_rows(rows, FleetFilter(search="SRV-4"))] == [
        server_name(i) for i in range(40, 50)]
    assert filter_rows(rows, FleetFilter(profiles=["p9"])) == []


def test_scorecards_pool_probe_requests_exactly_per_workload(fleet):
    _, _, rows = fleet
    cards = fleet_scorecards(rows, by="model")
    heads = {c["group"]: c for c in cards if c["fingerprint"] is None or c["note"].startswith("latency")}
    for m_i, model in enumerate(MODELS):
        members = [i for i in range(50) if i % 3 == m_i]
        head = heads[model]
        assert head["servers"] == len(members)
        # Σ throughput of the members' own rows; cost = Σ price x GPUs / Σ tok/s
        tok = sum(rows[i].figures["output_tok_s"] for i in members)
        assert head["output_tok_s"] == pytest.approx(tok)
        assert head["usd_per_mtok"] == pytest.approx(len(members) * 2 * PRICE / (tok * 3600) * 1e6)
        assert head["errors"] == sum(1 for i in members if i % 2 == 0)  # one failed request each
        graded = [rows[i] for i in members]
        assert head["slo_met"] == pytest.approx(sum(r.grade == "pass" for r in graded) / len(graded))
        fps = {fingerprint(i) for i in members if i % 2 == 0}
        if len(fps) == 1:
            pooled = np.concatenate([ttfts(i) for i in members if i % 2 == 0])
            for p in (50, 95, 99):
                assert head[f"ttft_p{p}_s"] == pytest.approx(np.percentile(pooled, p))
                assert head[f"e2e_p{p}_s"] == pytest.approx(np.percentile(pooled * 10, p))
            assert head["requests"] == pooled.size
        else:  # model m-c ran two workloads: no mixed latency, one row per fingerprint
            assert head["ttft_p50_s"] is None and head["note"] == MIXED_NOTE.format(n=2)
            subs = [c for c in cards if c["group"] == model and c["fingerprint"] in fps
                    and c["note"].startswith("workload")]
            assert {c["fingerprint"] for c in subs} == fps
            for c in subs:
                pooled = np.concatenate([ttfts(i) for i in members
                                         if i % 2 == 0 and fingerprint(i) == c["fingerprint"]])
                assert c["ttft_p99_s"] == pytest.approx(np.percentile(pooled, 99))


def test_scorecards_group_by_profile(fleet):
    _, _, rows = fleet
    cards = [c for c in fleet_scorecards(rows, by="profile") if not c["note"].startswith("workload")]
    assert [c["group"] for c in cards] == ["p1", "p2", "p3", "p4"]
    assert [c["servers"] for c in cards] == [13, 13, 12, 12]
    with pytest.raises(ValueError, match="group by"):
        fleet_scorecards(rows, by="gpu")


def test_exports_parse_back_with_the_same_numbers(fleet):
    _, now, rows = fleet
    meta = fleet_meta(window_s=900, until=now, filters={"host": ["h1"]})
    table = [r.as_dict() for r in rows]
    back = list(csv.DictReader(io.StringIO(render_fleet("csv", "table", table, meta).decode())))
    assert len(back) == 50 and back[3]["server"] == "srv-03" and back[3]["resolution"] == "raw"
    assert float(back[3]["usd_per_mtok"]) == pytest.approx(rows[3].figures["usd_per_mtok"])
    assert back[3]["images_per_min"] == ""  # missing stays missing, never 0
    assert float(back[3]["cache_hit_rate"]) == pytest.approx(0.75)
    doc = json.loads(render_fleet("json", "table", table, meta))
    assert doc["kind"] == "pitwall.fleet.table" and doc["window_s"] == 900
    assert doc["filters"] == {"host": ["h1"]} and doc["generated_at"] > 0
    assert doc["rows"][0]["ttft_p95_s"] == pytest.approx(rows[0].figures["ttft_p95_s"])
    cards = fleet_scorecards(rows, by="model")
    sdoc = json.loads(render_fleet("json", "scorecards", cards, meta))
    assert [r["group"] for r in sdoc["rows"]] == [c["group"] for c in cards]
    assert sdoc["rows"][0]["ttft_p99_s"] == pytest.approx(cards[0]["ttft_p99_s"])
    scsv = list(csv.DictReader(io.StringIO(render_fleet("csv", "scorecards", cards, meta).decode())))
    assert float(scsv[0]["usd_per_mtok"]) == pytest.approx(cards[0]["usd_per_mtok"])
    md = render_fleet("md", "scorecards", cards, meta).decode()
    assert "# Fleet scorecards" in md and "host: h1" in md and "org/m-c" in md


def test_export_rejects_unknown_format_with_the_choices(fleet):
    from export.formats import ExportError

    with pytest.raises(ExportError, match="csv, json, md"):
        render_fleet("xlsx", "table", [], fleet_meta(window_s=900, until=0.0))


def test_fleet_frame_sorts_numbers_as_numbers(fleet):
    from dashboard.components.fleet import table_frame

    _, _, rows = fleet
    frame = table_frame(rows)
    assert frame["output_tok_s"].dtype.kind == "f"
    top = frame.sort_values("output_tok_s", ascending=False)["server"].iloc[0]
    assert top == "srv-49"  # 5,000 tok/s beats "srv-9"'s 1,000 (a text sort would not)


def test_a_server_without_samples_gets_a_row_not_an_error(tmp_path):
    from storage.db import make_engine

    eng = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    repo.upsert_server(eng, name="bare", base_url="http://127.0.0.1:9")
    (row,) = fleet_rows(eng)
    assert row.status == "unknown" and row.model is None and row.profile is None
    assert row.figures["output_tok_s"] is None


def _one_server(tmp_path):
    """Server srv-00 of the seed (probed at level 4), on its own file."""
    from storage.db import make_engine

    eng = make_engine(f"sqlite:///{tmp_path / 'one.db'}")
    return eng, seed_fleet(eng, 1)


def test_pooled_latency_is_from_the_headline_level_as_the_servers_own(tmp_path):
    """Requests of a lower level (slower here, and fewer req/s) are not pooled: a group of one
    server shows that server's own p95, never concurrency 1 mixed with 4."""
    from fleet_seed import _req

    eng, now = _one_server(tmp_path)
    (run,) = repo.list_probe_runs(eng)
    with eng.begin() as conn:
        slow = [{**_req(run.id, 100 + k, now - 290 + k, 5.0 + k), "level": 1.0} for k in range(3)]
        repo.insert_probe_requests(conn, rows=slow)
    (row,) = fleet_rows(eng, now=now)
    (head,) = fleet_scorecards([row], by="model")
    assert head["requests"] == len(ttfts(0))
    assert head["ttft_p95_s"] == pytest.approx(row.figures["ttft_p95_s"])
    assert head["ttft_p99_s"] == pytest.approx(np.percentile(ttfts(0), 99))
    eng.dispose()


def test_a_target_the_fleet_view_does_not_read_is_listed_not_passed(tmp_path):
    """An SLO target on GPU power: the server's scorecard fails it; the fleet row cannot check it
    (it reads no per-GPU series), so it names it in `unchecked` instead of grading it."""
    from dashboard.services.views.fleet import FLEET_WINDOW_S
    from scorecard import slo
    from scorecard.build import build_scorecard

    eng, now = _one_server(tmp_path)
    srv = repo.get_server(eng, name=server_name(0))
    with eng.begin() as conn:
        repo.insert_samples(conn, rows=[
            {"ts": now - 60.0 * k, "server_id": srv.id, "launch_id": None, "source": "gpu",
             "metric": f"gpu.{g}.power_w", "value": 300.0} for g in (0, 1) for k in range(1, 5)])
    slo.save_override(eng, server=server_name(0), key="avg_power_w", target=100.0)
    card = build_scorecard(eng, server=server_name(0), since_s=FLEET_WINDOW_S, now=now)
    assert card.figures["avg_power_w"].grade == "fail"
    (row,) = fleet_rows(eng, now=now)
    assert row.unchecked == ["avg_power_w"] and row.as_dict()["unchecked"] == "avg_power_w"
    eng.dispose()
