"""A young server's window (services/views/timeseries.py window, data_start, window_caption):
the time axis starts at the server's first sample, so a 3-minute-old demo fills the chart of a
1-hour (or 7-day) window, and the 7-day view of it has more than one point per series.

Real SQLite (the `engine` fixture); samples written as the runner writes them.
"""

from __future__ import annotations

from dashboard.services.views import timeseries as ts
from storage import repo
from storage.repo._common import QUARTER

NOW = 1_000_000.0  # on the 10-s and 60-s grids: until = NOW + step


def _young_server(engine, age_s: float):  # type: ignore[no-untyped-def]
    """A server whose running-batch and GPU samples began `age_s` seconds before NOW, one a second."""
    srv = repo.upsert_server(engine, name="demo", base_url="http://127.0.0.1:1", gpu_indices=[0])
    rows = [{"ts": NOW - age_s + t, "server_id": srv.id, "launch_id": None, "source": s, "metric": m,
             "value": float(t % 7)}
            for t in range(int(age_s)) for s, m in (("log", "log.running_req"), ("gpu", "gpu.0.util_ratio"))]
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
    return srv


def test_the_window_starts_where_a_young_servers_data_begin(engine):
    srv = _young_server(engine, 180.0)  # first sample at NOW - 180
    first = ts.data_start(engine, server_id=srv.id, gpus=[0])
    assert first == NOW - 180.0
    since, until = ts.window(3600, now=NOW, first_ts=first)
    # until is NOW's next 10-s grid line; since is the first sample on the 10-s grid
    assert (since, until) == (NOW - 180.0, NOW + 10.0)
    assert ts.window_caption(3600, since, until, "demo") == (
        "Showing the 3 minutes since demo started; window 1 h")
    # an old server (or none known) keeps the whole window, and its caption says just that
    assert ts.window(3600, now=NOW, first_ts=NOW - 86400) == (NOW + 10.0 - 3600, NOW + 10.0)
    assert ts.window(3600, now=NOW, first_ts=None) == (NOW + 10.0 - 3600, NOW + 10.0)
    assert ts.window_caption(3600, NOW + 10.0 - 3600, NOW + 10.0, "demo") == "Window: last 1 h"
    # the drawn series decide: GPU memory read while the server loaded does not start the window
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=[{"ts": NOW - 600, "server_id": srv.id, "launch_id": None, "source": "gpu",
                                         "metric": "gpu.0.mem_used_bytes", "value": 1.0}])
    assert ts.data_start(engine, server_id=srv.id, gpus=[0], panels=("batch", "gpu_util")) == NOW - 180.0
    assert ts.data_start(engine, server_id=srv.id, gpus=[0], panels=("gpu_mem",)) == NOW - 600.0
    # a server seconds old still gets a minute of axis
    assert ts.window(3600, now=NOW, first_ts=NOW - 5)[0] == NOW + 10.0 - ts.MIN_SPAN_S


def test_the_7_day_view_of_a_young_server_has_a_line_not_one_point(engine):
    srv = _young_server(engine, 180.0)
    week = 7 * 86400
    unclamped = ts.window(week, now=NOW)
    fitted = ts.window(week, now=NOW, first_ts=ts.data_start(engine, server_id=srv.id, gpus=[0]))
    panels = [p for p in ts.PANELS if p.key == "batch"]

    def points(window: tuple[float, float]) -> int:
        frames = ts.read_series(engine, server_id=srv.id, panels=panels, since=window[0], until=window[1])
        return len(frames["batch"])

    # the whole week in 30-minute buckets holds three minutes in one bucket: a single point,
    # which a line mark cannot draw (the empty 7-day view)
    assert points(unclamped) <= 2
    # fitted to the data, the week's view reads the three minutes at their own resolution
    assert points(fitted) >= 100
    assert fitted[1] - fitted[0] < 600


def test_data_start_reads_rollups_where_raw_samples_are_gone(engine):
    srv = repo.upsert_server(engine, name="old", base_url="http://127.0.0.1:1")
    with engine.begin() as conn:
        repo.insert_rollups(conn, rows=[{"ts": NOW - 5 * 86400, "server_id": srv.id, "metric": "log.running_req",
                                         "count": 60, "avg": 1.0, "min": 0.0, "max": 2.0}])
        repo.insert_samples(conn, rows=[{"ts": NOW - 60, "server_id": srv.id, "launch_id": None,
                                         "source": "log", "metric": "log.running_req", "value": 1.0}])
    # retention kept only minutes from 5 days ago: the 7-day window starts there, not a minute ago
    assert ts.data_start(engine, server_id=srv.id) == NOW - 5 * 86400


def test_a_rollup_of_the_first_minutes_does_not_move_the_start_back(engine):
    # the rollup pass writes the first quarter hour's row at the quarter's start, up to 15 minutes
    # before the first sample in it: the start stays the first sample (else the 7-day view of a
    # 3-minute-old server was mostly blank)
    srv = _young_server(engine, 180.0)
    quarter = (NOW - 180.0) // 900 * 900
    with engine.begin() as conn:
        repo.insert_rollups(conn, rows=[{"ts": (NOW - 180.0) // 60 * 60, "server_id": srv.id,
                                         "metric": "log.running_req", "count": 60, "avg": 1.0, "min": 0.0,
                                         "max": 2.0}])
        conn.execute(QUARTER.insert(), [{"ts": quarter, "server_id": srv.id, "metric": "log.running_req",
                                         "count": 180, "avg": 1.0, "min": 0.0, "max": 2.0}])
    assert quarter < NOW - 180.0 - 60
    assert ts.data_start(engine, server_id=srv.id, panels=("batch",)) == NOW - 180.0
    assert ts.data_start(engine, server_id=srv.id + 1) is None


def test_a_young_servers_chart_whose_series_start_later_starts_at_its_own_first_sample() -> None:
    from dashboard.services.views.timeseries import MIN_SPAN_S, chart_since

    until, window_s = 10_000.0, 3600.0
    since = 9_880.0  # a two-minute-old server: the window clamped to its first sample
    # a series that began with the first sweep, 100 s in: its chart starts there (10-s grid)
    assert chart_since(since, until, window_s, 9_983.0) == min(9_980.0, until - MIN_SPAN_S)
    assert chart_since(since, until, window_s, 9_880.0) == since  # began with the server
    # an old server's window is not clamped: every chart keeps it, gaps and all
    assert chart_since(until - window_s, until, window_s, 9_983.0) == until - window_s
