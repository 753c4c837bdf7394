"""The "bound by" verdict (scorecard/gpu_wall.py) on H200 recordings stored in a real
SQLite file through the GPU collector, as the runner stores them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest
from gpu_seed import T0, store_recording
from pwtest import subprocess_env

from cli.common import parse_instant
from scorecard.gpu_wall import (
    GPU_SPECS,
    classify,
    gpu_walls,
    spec_by_short_name,
    spec_for,
    what_if,
)
from storage import repo

_store = store_recording


@pytest.mark.parametrize(("fixture", "verdict"), [
    ("nvml-h200-copy.json", "bandwidth"),
    # the matmul loop ran at 1.41-1.46 of 1.98 GHz under the software power cap (690 of 700 W):
    # the cap, not the tensor cores' count, held it (tests/scorecard/test_gpu_kernels.py)
    ("nvml-h200-matmul-gpm.json", "power"),
    ("nvml-h200-idle.json", "idle"),
])
def test_recorded_loads_get_the_right_wall(engine, fixture, verdict):
    _store(engine, fixture)
    out = gpu_walls(engine, server_id=1, since=T0, until=T0 + 60)
    assert out["available"] and out["why_not"] is None
    [gpu] = out["gpus"]
    assert gpu["verdict"] == verdict and gpu["shares"][verdict] >= 0.8
    assert gpu["name"] == "NVIDIA H200" and gpu["spec"] == "H200"
    assert gpu["achieved_bw_bytes_s"] == pytest.approx(gpu["dram_ratio"] * 4.8e12)


def test_copy_loop_achieves_most_of_the_h200_bandwidth(engine):
    _store(engine, "nvml-h200-copy.json")
    [gpu] = gpu_walls(engine, server_id=1, since=T0, until=T0 + 60)["gpus"]
    # 89 % of 4.8 TB/s: about 4.3 TB/s, what a PyTorch device copy was measured to move on this card
    assert 4.0e12 < gpu["achieved_bw_bytes_s"] < 4.6e12


def test_idle_gpu_with_requests_waiting_is_underfed_not_idle(engine):
    _store(engine, "nvml-h200-idle.json", queue=3)
    [gpu] = gpu_walls(engine, server_id=1, since=T0, until=T0 + 60)["gpus"]
    assert gpu["verdict"] == "neither" and "scheduling" in gpu["reason"]


def test_gpu_without_gpm_says_not_available_and_gives_no_verdict(engine):
    _store(engine, "nvml-h200-matmul.json")  # recorded before GPM reads: like a GPU without GPM
    out = gpu_walls(engine, server_id=1, since=T0, until=T0 + 120)
    assert not out["available"] and out["gpus"] == [] and "not available on this GPU" in out["why_not"]


def test_classify_edges():
    assert classify(0.7, 0.1, 0.9, True) == "bandwidth"
    assert classify(0.2, 0.9, 0.9, True) == "compute"
    assert classify(0.2, 0.0, 0.95, True) == "compute"  # non-tensor kernels keeping every SM busy
    assert classify(0.45, 0.45, 0.6, True) == "mixed"
    assert classify(0.02, 0.0, 0.03, False) == "idle"  # SMs under 5 %: nothing runs
    # SMs 10 % busy with no request in the server's queues: the GPU itself says it works, and waits
    assert classify(0.05, 0.0, 0.1, False) == "neither"
    assert classify(0.0, 0.0, 0.0, False, util=0.0) == "idle"
    assert classify(0.0, 0.0, 0.0, True, util=0.0) == "neither"  # requests wait, no kernel runs


def test_specs_match_nvml_names_and_the_what_if_scales_only_the_bandwidth_share():
    assert spec_for("NVIDIA H200").name == "H200"
    assert spec_for("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert spec_for("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert spec_for("NVIDIA A100-SXM4-80GB").name == "A100 SXM 80GB"
    assert spec_for("NVIDIA B200").name == "B200" and spec_for("Tesla T4") is None
    assert all(s.source for s in GPU_SPECS)
    h200, b300 = spec_by_short_name("H200"), spec_by_short_name("B300")
    assert h200 and b300
    fully, note = what_if(0.45, 1.0, h200, b300)
    assert fully == pytest.approx(0.45 * 4.8 / 8.0) and "4.8 → 8 TB/s" in note
    half, _ = what_if(0.45, 0.5, h200, b300)
    assert half == pytest.approx(0.45 * (0.5 * 0.6 + 0.5))
    assert what_if(0.45, 0.0, h200, b300)[0] == pytest.approx(0.45)


@pytest.mark.slow
def test_gpu_wall_command_reads_the_verdict_from_the_database(tmp_path):
    from storage.db import make_engine

    url = f"sqlite:///{tmp_path / 'pitwall.db'}"
    engine = make_engine(url)
    assert repo.upsert_server(engine, name="h200", base_url="http://127.0.0.1:1").id == 1
    _store(engine, "nvml-h200-copy.json", t0=time.time() - 20)
    engine.dispose()
    env = {k: v for k, v in subprocess_env().items() if k != "PITWALL_CONFIG"}  # this checkout's code
    env.update(PITWALL_DATABASE_URL=url, PITWALL_DEMO="off", PITWALL_DATA_DIR=str(tmp_path))
    cmd = [sys.executable, "-m", "cli", "gpu-wall", "--since", "5m"]  # the only server
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "GPU 0 (NVIDIA H200): bound by memory bandwidth" in done.stdout and "TB/s" in done.stdout
    done = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert json.loads(done.stdout)["gpus"][0]["verdict"] == "bandwidth"
    empty = subprocess.run(cmd[:-2] + ["--since", "1s"], env=env, capture_output=True, text=True, timeout=60,
                           cwd=tmp_path)
    assert empty.returncode == 1 and "no GPU telemetry" in empty.stderr
    unknown = subprocess.run(cmd + ["--server", "nope"], env=env, capture_output=True, text=True, timeout=60,
                             cwd=tmp_path)
    assert unknown.returncode == 2 and "configured: h200" in unknown.stderr
    # an exact window, long past: the matmul loop of T0, named in ISO 8601 (UTC) and epoch seconds
    _store(make_engine(url), "nvml-h200-matmul-gpm.json", t0=T0)
    start = datetime.fromtimestamp(T0 - 5, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    exact = subprocess.run(cmd[:-2] + ["--from", start, "--to", str(T0 + 30)], env=env, capture_output=True,
                           text=True, timeout=60, cwd=tmp_path)
    assert exact.returncode == 0, exact.stderr
    assert "bound by power: clocks held at 1.4" in exact.stdout and "of 700 W (software power cap" in exact.stdout
    backwards = subprocess.run(cmd[:-2] + ["--from", str(T0 + 30), "--to", start], env=env, capture_output=True,
                               text=True, timeout=60, cwd=tmp_path)
    assert backwards.returncode == 2 and "the window is empty" in backwards.stderr


def test_an_instant_is_epoch_seconds_or_iso_8601_in_utc_unless_it_says_otherwise():
    assert parse_instant("1796458748.5") == 1796458748.5
    assert parse_instant("2026-12-05T08:19:08") == 1796458748.0
    assert parse_instant("2026-12-05 09:19:08+01:00") == parse_instant("2026-12-05T08:19:08Z") == 1796458748.0
    with pytest.raises(ValueError, match="--to 'yesterday' is not a time; use epoch seconds or ISO 8601"):
        parse_instant("yesterday", flag="--to")
