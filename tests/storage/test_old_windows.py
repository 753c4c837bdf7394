"""Windows older than raw retention (storage/repo/windows.py, scorecard/window_reads.py): a
launch scored after retention removed its raw samples (then its minute rollups) gives the same
averages, sums and maxima as from the raw data, says which figures rollups cannot give, and every
export names the resolution; on SQLite and on the suite's real PostgreSQL (fixture pg_url)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from sqlalchemy import text

from export import formats
from scorecard.build import build_scorecard
from scorecard.window_reads import ROLLUP_NOTE
from storage import repo
from storage.db import make_engine

T0 = 1_800_000_000.0  # a whole quarter hour (1.8e9 / 900 = 2,000,000): the launch starts here
SPAN = 7200.0  # two hours: eight whole quarters, 120 whole minutes
D = 86_400.0
NOW = T0 + 3 * D  # scored three days later
STEP = 5.0  # one sample a series every 5 s: 1,440 per series, 12 per minute
#: the figures a rollup gives exactly (means, sums, maxima) and the raw-only ones it cannot
EXACT = ("output_tok_s", "server_ttft_p99_s", "radix_hit_rate", "avg_power_w", "queue_max",
         "success_rate", "error_count")
RAW_ONLY = ("ttft_p50_s", "ttft_p99_s", "ttft_p95_s", "queue_above_threshold_s")


def _seed(engine) -> int:  # type: ignore[no-untyped-def]
    """One server, one ended launch [T0, T0 + 2 h), eight series of uneven values, rolled up
    (minutes and quarters) as the runner does."""
    srv = repo.upsert_server(engine, name="old", base_url="http://127.0.0.1:1", gpu_indices=[0],
                             gpu_hourly_usd=2.0)
    launch = repo.create_launch(engine, server_id=srv.id, profile_name="p", status="stopped", started_at=T0,
                                 ended_at=T0 + SPAN)
    ts = np.arange(T0, T0 + SPAN, STEP)
    k = np.arange(ts.size)
    series = {
        "log.gen_throughput_tok_s": 100.0 + (k * 37 % 101),
        "metrics.ttft_p99_s": 0.2 + (k % 13) / 100.0,
        "log.prefill_cached_token": (k % 7) * 10.0,
        "log.prefill_new_token": 50.0 + (k % 5),
        "gpu.0.power_w": 300.0 + (k % 17),
        "log.queue_req": (k * 11 % 23).astype(float),
        "canary.ttft_s": 0.05 + (k % 29) / 1000.0,
        "canary.ok": (k % 50 != 0).astype(float),  # 29 failures of 1,440
    }
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=[
            {"ts": float(t), "server_id": srv.id, "launch_id": launch.id, "source": m.split(".")[0],
             "metric": m, "value": float(v)} for m, vals in series.items() for t, v in zip(ts, vals, strict=True)])
    repo.compute_rollups(engine, until=T0 + SPAN + 60, lookback_s=SPAN + 600)
    return int(launch.id)


def _count(engine, table: str) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)


def _check(engine) -> None:  # type: ignore[no-untyped-def]
    launch_id = _seed(engine)
    raw = build_scorecard(engine, launch_id=launch_id, now=NOW)
    assert raw.subject["resolution"] == "raw"
    assert all(raw.figures[k].status == "ok" for k in EXACT + RAW_ONLY), \
        {k: raw.figures[k].note for k in EXACT + RAW_ONLY}

    # retention at day 3 with raw samples kept 1 day: every sample of the launch leaves
    policy = {"samples_days": 1.0, "rollups_days": 0.0}
    gone = repo.apply_retention(engine, policy=policy, now=NOW, batch_rows=5000, max_batches=100)
    assert gone["sample"] == 8 * 1440 and _count(engine, "sample") == 0
    minute = build_scorecard(engine, launch_id=launch_id, now=NOW, retention=policy)
    assert minute.subject["resolution"] == "1-minute rollup"
    assert set(minute.subject["series_resolution"].values()) == {"1-minute rollup"}
    for key in EXACT:
        assert minute.figures[key].value == pytest.approx(raw.figures[key].value, rel=1e-9), key
    for key in RAW_ONLY:
        assert minute.figures[key].value is None and minute.figures[key].note == ROLLUP_NOTE, key
    assert any("1-minute rollup" in n and "ttft_p99_s" in n for n in minute.notes)

    # minute rollups kept 2 days: the launch's minutes leave too (their quarters are written)
    policy = {"samples_days": 1.0, "rollups_days": 2.0}
    gone = repo.apply_retention(engine, policy=policy, now=NOW, batch_rows=5000, max_batches=100)
    assert gone["rollup"] == 8 * 120 and _count(engine, "rollup") == 0
    quarter = build_scorecard(engine, launch_id=launch_id, now=NOW, retention=policy)
    assert quarter.subject["resolution"] == "15-minute rollup"
    for key in EXACT:
        assert quarter.figures[key].value == pytest.approx(raw.figures[key].value, rel=1e-9), key
    # the card's chart series come from the quarters: eight points a series, not a blank chart
    assert sum(1 for p in quarter.series if p["metric"] == "log.queue_req") == 8

    # every export says so
    doc = json.loads(formats.to_json([quarter]))
    assert doc["scorecards"][0]["subject"]["resolution"] == "15-minute rollup"
    rows = list(csv.DictReader(io.StringIO(formats.to_csv([quarter]))))
    assert {r["resolution"] for r in rows} == {"15-minute rollup"}
    md = formats.to_markdown([quarter])
    assert "| Resolution | 15-minute rollup (from rollups: canary.ok" in md
    assert "rollup" in formats.render("html", [quarter]).decode()


def test_old_window_reads_rollups_on_sqlite(tmp_path):
    _check(make_engine(f"sqlite:///{tmp_path / 'old.db'}"))


@pytest.mark.integration
def test_old_window_reads_rollups_on_postgres(pg_url):
    _check(make_engine(pg_url))


def test_window_half_past_raw_retention_mixes_tiers(tmp_path):
    """The policy's cutoff in the middle of the launch: its first hour is read from minute
    rollups (though the samples are still stored), its second raw; the sums agree with raw."""
    engine = make_engine(f"sqlite:///{tmp_path / 'mix.db'}")
    launch_id = _seed(engine)
    raw = build_scorecard(engine, launch_id=launch_id, now=NOW)
    # raw kept from T0 + 1 h: samples_days = (NOW - (T0 + 3600)) / D
    policy = {"samples_days": (NOW - T0 - 3600.0) / D}
    mixed = build_scorecard(engine, launch_id=launch_id, now=NOW, retention=policy)
    assert mixed.subject["resolution"] == "1-minute rollup + raw"
    for key in EXACT:
        assert mixed.figures[key].value == pytest.approx(raw.figures[key].value, rel=1e-9), key
    agg = repo.window_aggregate(engine, server_id=1, metric="log.queue_req", since=T0, until=T0 + SPAN,
                                raw_since=T0 + 3600)
    # 720 samples before the cutoff arrive as 60 minutes of 12; 720 after it raw
    assert (agg.count, agg.resolutions) == (1440, ["1-minute rollup", "raw"])


def test_compare_caption_names_the_rolled_up_cards(tmp_path):
    from scorecard.compare import resolution_caption

    engine = make_engine(f"sqlite:///{tmp_path / 'cap.db'}")
    launch_id = _seed(engine)
    raw = build_scorecard(engine, launch_id=launch_id, now=NOW)
    assert resolution_caption([raw]) is None
    old = build_scorecard(engine, launch_id=launch_id, now=NOW, retention={"samples_days": 1.0})
    caption = resolution_caption([raw, old])
    assert caption is not None and caption.endswith(f"{old.title}: 1-minute rollup.")
