"""Services and components behind the live pages: chart specs, series reads, sweep intents."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from pwtest import free_port

from dashboard.components.format import fmt_value, grade_badge
from dashboard.components.timeseries_charts import (
    SPARSE_POINTS,
    curves_chart,
    timeseries_spec,
    tradeoff_chart,
)
from dashboard.services.views import benchmarks as bm
from dashboard.services.views import timeseries as ts
from storage import repo


def test_fmt_value_units_and_missing():
    assert fmt_value(None, "s") == "—" and fmt_value(float("nan"), "ratio") == "—"
    assert fmt_value(0.0123, "s") == "12.3 ms" and fmt_value(2.5, "s") == "2.50 s"
    assert fmt_value(0.25, "ratio") == "25.0 %"
    assert fmt_value(1.5 * 2**30, "bytes") == "1.5 GiB"
    assert grade_badge(None) == ("no grade yet", "gray") and grade_badge("fail") == ("fail", "red")


def test_fmt_bytes_is_one_function_for_pages_and_the_cli():
    from dashboard.components import format as ui_format
    from dashboard.services.views import health

    assert ui_format.fmt_bytes is health.fmt_bytes
    assert health.fmt_bytes(None) == "—" and health.fmt_bytes(None, missing="size n/a") == "size n/a"
    # 3 MiB = 3 × 1024² bytes
    assert health.fmt_bytes(512) == "512 B" and health.fmt_bytes(3 * 2**20) == "3.0 MiB"


def _lines(n: int, label: str = "canary TTFT") -> pd.DataFrame:
    return pd.DataFrame({"ts": np.arange(1000.0, 1000.0 + n), "label": label, "value": 0.01})


def test_spec_marks_events_on_the_time_axis_and_converts_units():
    ev = pd.DataFrame({"ts": [1005.0, 5000.0], "kind": ["oom", "oom"], "severity": ["error", "error"],
                       "message": ["boom", "outside the window"]})
    spec = timeseries_spec(_lines(10), unit="s", since=1000.0, until=1100.0, events=ev,
                           points=("canary TTFT",))
    layers = [(layer["data"]["name"], layer["mark"]["type"]) for layer in spec["layer"]]
    assert layers == [("window", "rule"), ("lines", "line"), ("dots", "point"), ("events", "rule")]
    data = spec["datasets"]
    assert data["events"]["message"].tolist() == ["boom"]  # only the event inside [since, until)
    assert data["lines"]["value"].iloc[0] == pytest.approx(10.0)  # 0.01 s -> 10 ms
    assert data["window"]["time"].tolist() == [1_000_000.0, 1_100_000.0]  # the x domain, epoch ms
    assert len(data["dots"]) == 10  # 10 points are sparse -> canary dots


def test_spec_json_does_not_change_with_data_window_position_or_events():
    """Streamlit rebuilds a Vega view when the spec JSON changes and swaps datasets otherwise:
    a live refresh (new data, window moved) or the events toggle must leave the JSON alone."""

    def shape(spec):
        return json.dumps({k: v for k, v in spec.items() if k != "datasets"}, sort_keys=True)

    ev = pd.DataFrame({"ts": [1005.0], "kind": ["oom"], "severity": ["error"], "message": ["boom"]})
    dense = SPARSE_POINTS + 50
    a = timeseries_spec(_lines(dense), unit="s", since=1000.0, until=1000.0 + dense, events=ev)
    later = _lines(dense).assign(ts=lambda d: d["ts"] + 10.0, value=0.02)
    b = timeseries_spec(later, unit="s", since=1010.0, until=1010.0 + dense, events=None)
    assert shape(a) == shape(b)
    assert len(a["datasets"]["events"]) == 1 and b["datasets"]["events"].empty
    other = timeseries_spec(_lines(dense), unit="ratio", since=1000.0, until=1000.0 + dense)
    assert shape(other) != shape(a)  # a different unit is a different chart


def test_window_ends_on_a_grid_coarser_for_long_windows():
    assert ts.window(3600, now=1_000_003.0) == (1_000_010.0 - 3600, 1_000_010.0)
    assert ts.window(3600, now=1_000_013.0)[1] == 1_000_020.0  # 10-s steps up to 6 h
    week = 7 * 86400
    assert ts.window(week, now=1_000_003.0) == (1_000_020.0 - week, 1_000_020.0)
    assert ts.window(week, now=1_000_059.0)[1] == 1_000_080.0  # 60-s steps beyond


def test_dense_series_get_no_dots():
    spec = timeseries_spec(_lines(SPARSE_POINTS + 1), unit="s", since=1000.0, until=2000.0,
                           points=("canary TTFT",))
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["rule", "line", "rule"]
    assert "dots" not in spec["datasets"]


def test_curves_and_tradeoff_charts_build():
    df = pd.DataFrame({"level": [1.0, 4.0], "value": [0.02, 0.05], "series": "r", "trusted": [True, False]})
    curves_chart(df, x="level", y="value", unit="s", title="t").to_dict()
    tr = pd.DataFrame({"series": "r", "level": [1.0, 4.0], "output_tok_s": [10.0, 30.0],
                       "ttft_p99_s": [0.02, 0.05], "trusted": [True, False]})
    tradeoff_chart(tr).to_dict()


def _server(engine, name="s1", gpus=(0,)):
    return repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:1", gpu_indices=list(gpus))


def test_read_series_buckets_and_falls_back(engine):
    srv = _server(engine)
    # 600 one-second samples of log.running_req = 0..599 over [0, 600); 60 buckets of 10 s;
    # bucket 0 averages 0..9 = 4.5. No log.token_usage -> metrics.token_usage (fallback) is used.
    rows = [{"ts": float(t), "server_id": srv.id, "launch_id": None, "source": "log",
             "metric": "log.running_req", "value": float(t)} for t in range(600)]
    rows += [{"ts": float(t), "server_id": srv.id, "launch_id": None, "source": "metrics",
              "metric": "metrics.token_usage", "value": 0.5} for t in range(0, 600, 5)]
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
    out = ts.read_series(engine, server_id=srv.id, panels=list(ts.PANELS), since=0.0, until=600.0,
                         max_points=60)
    batch = out["batch"][out["batch"]["label"] == "running"]
    assert len(batch) == 60 and batch["value"].iloc[0] == pytest.approx(4.5)
    assert set(out["token_usage"]["label"]) == {"token usage"} and len(out["token_usage"]) == 60
    assert out["latency"].empty
    assert ts.has_samples(engine, server_id=srv.id, since=0.0)
    assert not ts.has_samples(engine, server_id=srv.id, since=10_000.0)


def test_parse_levels_says_what_to_type():
    assert bm.parse_levels("8, 1,4,4") == [1, 4, 8]
    for bad in ("", "1,x", "0", "2000"):
        with pytest.raises(bm.SweepRequestError):
            bm.parse_levels(bad)


def test_start_sweep_refuses_unknown_server(engine):
    with pytest.raises(bm.SweepRequestError, match="not configured"):
        bm.start_sweep(engine, bm.SweepRequest(server="nope", levels=[1], requests=1))


def test_probe_intent_runs_one_sweep_subprocess_and_settles_the_intent(tmp_path, monkeypatch):
    """A real sweep subprocess against a closed port: every request is connect_refused, the run
    is stored, the intent ends `done` with the run id and its progress reaches 1.0."""
    from config.settings import load_settings
    from storage.db import make_engine

    url = f"sqlite:///{tmp_path / 'p.db'}"
    monkeypatch.setenv("PITWALL_DATABASE_URL", url)
    monkeypatch.setenv("PITWALL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PITWALL_CONFIG", "")
    engine = make_engine(url)
    srv = repo.upsert_server(engine, name="closed", base_url=f"http://127.0.0.1:{free_port()}")
    run_id, intent_id = bm.start_sweep(engine, bm.SweepRequest(server=srv.name, levels=[1], requests=2,
                                                               max_new_tokens=4))
    intent = repo.claim_next_intent(engine, kinds=["probe"])
    assert intent is not None and intent.id == intent_id
    t0 = time.monotonic()
    from runner.sweeps import Sweeps

    Sweeps(engine, load_settings().database_url).handle(intent)
    assert time.monotonic() - t0 < 120
    it = repo.get_intent(engine, intent_id=intent_id)
    run = repo.get_probe_run(engine, run_id=run_id)
    assert run.status in ("done", "aborted", "failed")
    assert it.state in ("done", "failed") and it.result["run_id"] == run_id
    if run.status != "failed":
        assert it.progress["fraction"] == 1.0
        levels = run.report["levels"]
        assert levels[0]["ok"] == 0 and "connect_refused" in levels[0]["errors"]
        runs = bm.list_runs(engine)
        assert runs.loc[0, "success_rate"] == 0.0
