"""Which wall a diffusion stage hits (scorecard/gpu_wall_stage.py): H200 recordings stored
through the GPU collector into a real SQLite file, DenoisingStage timings laid over them, and the
what-if arithmetic by hand."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_seed import T0, store_recording

from scorecard.gpu_wall import spec_by_short_name, what_if
from scorecard.gpu_wall_stage import (
    merge_intervals,
    overlap_s,
    sample_intervals,
    stage_walls,
)
from storage import repo

MATMUL_T0 = T0 + 100  # the matmul recording, stored 100 s after the copy one


def _stage(engine, end: float, seconds: float, *, step_s: float | None = 0.4, stage: str = "DenoisingStage") -> None:
    """One request's stage line: finished at `end`, lasted `seconds` (covers [end − seconds, end])."""
    rows = [{"ts": end, "server_id": 1, "launch_id": None, "source": "log",
             "metric": f"log.diffusion.stage_s.{stage}", "value": seconds}]
    if step_s is not None:
        rows.append({"ts": end, "server_id": 1, "launch_id": None, "source": "log",
                     "metric": "log.diffusion.step_s", "value": step_s})
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)


@pytest.fixture
def copy_then_matmul(engine):
    # copy loop: GPM samples at T0+1 .. T0+12; matmul loop: MATMUL_T0+1 .. MATMUL_T0+12
    store_recording(engine, "nvml-h200-copy.json")
    store_recording(engine, "nvml-h200-matmul-gpm.json", t0=MATMUL_T0)
    return engine


def test_denoising_over_a_copy_loop_is_bandwidth_bound(copy_then_matmul):
    _stage(copy_then_matmul, T0 + 11, 8.0)  # [T0+3, T0+11]: eight copy-loop samples
    out = stage_walls(copy_then_matmul, server_id=1, since=T0, until=T0 + 60)
    assert out["available"] and out["why_not"] is None
    assert out["stage_s"] == pytest.approx(8.0) and out["covered_s"] == pytest.approx(8.0, abs=0.01)
    assert out["bandwidth_share"] >= 0.8 and out["compute_share"] <= 0.1
    assert out["spec"] == "H200" and out["step_s"] == pytest.approx(0.4)


def test_denoising_over_a_power_capped_matmul_loop_is_held_by_power_and_faster_on_a_b300(copy_then_matmul):
    # the H200's matmul loop ran at 1.41-1.46 GHz under its software power cap: bound by power,
    # which the what-if scales as compute and says so
    _stage(copy_then_matmul, MATMUL_T0 + 11, 8.0)
    out = stage_walls(copy_then_matmul, server_id=1, since=MATMUL_T0, until=MATMUL_T0 + 60)
    assert out["power_share"] >= 0.8 and out["bandwidth_share"] <= 0.1 and out["compute_share"] <= 0.1
    b300 = out["what_if"][0]
    assert b300["card"] == "B300"  # the default comparison comes first
    # close to 0.4 × 989/2250 = 0.176 s, far below 0.4 × 4.8/8 = 0.24 s
    assert b300["step_s"] < 0.22 and "dense BF16" in b300["note"] and "from H200" in b300["note"]
    assert "held by the power cap as compute too (assumes the B300, held by its own cap" in b300["note"]
    assert {r["card"] for r in out["what_if"]} >= {"B200", "H100 SXM", "A100 SXM 80GB"}
    assert "H200" not in {r["card"] for r in out["what_if"]}


def test_a_window_over_both_loops_splits_the_denoising_time(copy_then_matmul):
    _stage(copy_then_matmul, T0 + 11, 8.0)
    _stage(copy_then_matmul, MATMUL_T0 + 11, 8.0)
    out = stage_walls(copy_then_matmul, server_id=1, since=T0, until=MATMUL_T0 + 60)
    assert out["stage_s"] == pytest.approx(16.0)
    assert 0.4 <= out["bandwidth_share"] <= 0.6 and 0.4 <= out["power_share"] <= 0.6
    assert sum(out["shares"].values()) == pytest.approx(1.0)


def test_batched_requests_count_their_shared_time_once(copy_then_matmul):
    _stage(copy_then_matmul, T0 + 11, 8.0)
    _stage(copy_then_matmul, T0 + 10, 6.0)  # [T0+4, T0+10] lies inside [T0+3, T0+11]
    out = stage_walls(copy_then_matmul, server_id=1, since=T0, until=T0 + 60)
    assert out["stage_s"] == pytest.approx(8.0)


def test_gpu_without_gpm_says_not_available(engine):
    store_recording(engine, "nvml-h200-matmul.json")  # recorded before GPM reads
    _stage(engine, T0 + 30, 8.0)
    out = stage_walls(engine, server_id=1, since=T0, until=T0 + 120)
    assert not out["available"] and "not available on this GPU" in out["why_not"]
    assert out["bandwidth_share"] is None and out["what_if"] == []


def test_no_stage_timings_says_where_they_come_from(copy_then_matmul):
    out = stage_walls(copy_then_matmul, server_id=1, since=T0, until=T0 + 60)
    assert not out["available"] and "no DenoisingStage timings" in out["why_not"]


def test_interval_helpers_by_hand():
    merged = merge_intervals(np.array([3.0, 4.0, 20.0]), np.array([11.0, 10.0, 25.0]))
    assert merged.tolist() == [[3.0, 11.0], [20.0, 25.0]]
    ts = np.array([1.0, 2.0, 3.0, 10.0])  # a 7 s gap counts as two intervals (2 s)
    starts = sample_intervals(ts)
    assert starts.tolist() == [0.0, 1.0, 2.0, 8.0]
    # intervals [0,1] [1,2] [2,3] [8,10] against the stage [2.5, 9]: 0, 0, 0.5 and 1 s inside
    assert overlap_s(starts, ts, np.array([[2.5, 9.0]])).tolist() == [0.0, 0.0, 0.5, 1.0]


def test_what_if_scales_each_wall_with_its_own_figure():
    h200, b300 = spec_by_short_name("H200"), spec_by_short_name("B300")
    assert h200 and b300
    # 0.4 s × (0.25 × 4.8/8 + 0.5 × 989/2250 + 0.25) = 0.4 × (0.15 + 0.219778 + 0.25) = 0.247911 s
    seconds, note = what_if(0.4, 0.25, h200, b300, 0.5)
    assert seconds == pytest.approx(0.247911, abs=1e-6)
    assert "25 %" in note and "50 %" in note and "989 → 2250 TFLOPS" in note and "4.8 → 8 TB/s" in note
    # shares over 1 are cut: compute gets what bandwidth leaves (0.2): 0.4 × (0.8 × 0.6 + 0.2 × 0.439556)
    assert what_if(0.4, 0.8, h200, b300, 0.5)[0] == pytest.approx(0.4 * (0.48 + 0.2 * 989 / 2250))
    # all compute bound on the same card: unchanged
    assert what_if(0.4, 0.0, h200, h200, 1.0)[0] == pytest.approx(0.4)


def test_on_a_b300_the_what_if_starts_with_the_h200():
    from scorecard.gpu_wall_stage import what_ifs

    rows = what_ifs(0.2, 1.0, 0.0, "B300")
    assert rows[0]["card"] == "H200" and "B300" not in {r["card"] for r in rows}
    assert rows[0]["step_s"] == pytest.approx(0.2 * 8.0 / 4.8)  # all bandwidth bound: 8 → 4.8 TB/s
