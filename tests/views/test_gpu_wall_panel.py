"""The GPU-wall panel's read model (dashboard/services/views/gpu_wall_panel.py) on H200 recordings
stored through the GPU collector into a real SQLite file; formats of its new units."""

from __future__ import annotations

from gpu_seed import T0, store_recording

from dashboard.services.views.gpu_wall_panel import NOT_AVAILABLE, gpu_card, wall_panel
from present.format import VERDICT_WORDS, fmt_value
from scorecard.gpu_wall import VERDICTS


def test_copy_loop_card_and_chart_series(engine):
    store_recording(engine, "nvml-h200-copy.json")
    view = wall_panel(engine, server_id=1, kind="llm", since=T0, until=T0 + 60)
    [card] = view["cards"]
    assert card["bound_by"] == "memory bandwidth" and card["title"] == "GPU 0 (NVIDIA H200)"
    evidence = {label: text for label, text, _ in card["evidence"]}
    assert evidence["Achieved bandwidth"].endswith("of 4.80 TB/s")
    assert card["shares_text"].startswith("bandwidth ") and card["shares_text"].endswith("of 12 GPM samples")
    assert set(view["series"]["label"]) == {"GPU 0 DRAM bandwidth", "GPU 0 tensor activity"}
    assert view["series"]["value"].between(0, 1).all()
    assert view["stage"] is None and view["not_available"] is None
    assert view["verdict_since"] == T0 and "DRAM ≥ 60 %" in view["rules"]


def test_a_long_window_judges_its_last_six_hours(engine):
    store_recording(engine, "nvml-h200-copy.json")
    view = wall_panel(engine, server_id=1, kind="llm", since=T0 - 7 * 86400, until=T0 + 60)
    assert view["verdict_since"] == T0 + 60 - 6 * 3600
    assert view["cards"][0]["bound_by"] == "memory bandwidth"


def test_without_gpm_the_panel_says_not_available(engine):
    store_recording(engine, "nvml-h200-matmul.json")
    view = wall_panel(engine, server_id=1, kind="image", since=T0, until=T0 + 120)
    assert view["cards"] == [] and view["series"].empty
    assert NOT_AVAILABLE in view["not_available"] and view["stage"]["available"] is False


def test_a_missing_figure_reads_not_available_never_zero():
    card = gpu_card({"index": 1, "name": "NVIDIA H200", "samples": 4, "dram_ratio": 0.7,
                     "tensor_ratio": None, "sm_ratio": None, "achieved_bw_bytes_s": None,
                     "peak_bw_bytes_s": None, "shares": {"bandwidth": 1.0}, "verdict": "bandwidth",
                     "reason": "r"})
    evidence = {label: text for label, text, _ in card["evidence"]}
    assert evidence["Tensor activity"] == NOT_AVAILABLE and evidence["SM activity"] == NOT_AVAILABLE
    assert "peak not in GPU_SPECS" in evidence["Achieved bandwidth"]


def test_verdict_and_bandwidth_units():
    assert len(VERDICT_WORDS) == len(VERDICTS)
    assert [fmt_value(i, "verdict") for i in range(len(VERDICTS))][:2] == ["memory bandwidth", "compute"]
    assert fmt_value(4.272e12, "bytes_s") == "4.27 TB/s" and fmt_value(5.5e10, "bytes_s") == "55.0 GB/s"
    assert fmt_value(None, "verdict") == "—"
