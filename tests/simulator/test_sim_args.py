"""The launch-flag parser fails and accepts like SGLang 0.5.23's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.args import SCHEDULE_POLICIES, build_parser

REPO = Path(__file__).resolve().parents[2]


def test_enable_radix_cache_is_unrecognized_exit_2() -> None:
    # --enable-radix-cache exists in no release; argparse rejects it with exit status 2.
    proc = subprocess.run(
        [sys.executable, "-m", "simulator.launch_server", "--model-path", "m",
         "--enable-radix-cache"], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("usage: sglang serve ")
    assert lines[-1] == "sglang serve: error: unrecognized arguments: --enable-radix-cache"


def test_removed_cuda_graph_max_bs_is_ambiguous(capsys: pytest.CaptureFixture[str]) -> None:
    # --cuda-graph-max-bs was removed in 0.5.20; with abbreviations it matches two flags.
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--model-path", "m", "--cuda-graph-max-bs", "64"])
    assert exc.value.code == 2
    assert "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, " \
           "--cuda-graph-max-bs-prefill" in capsys.readouterr().err


def test_schedule_policy_choices_and_defaults() -> None:
    assert SCHEDULE_POLICIES == ["lpm", "random", "fcfs", "dfs-weight", "lof", "priority",
                                 "routing-key", "hrrn", "shortest-prefill-first"]
    ns = build_parser().parse_args(["--model", "m"])
    assert (ns.model_path, ns.host, ns.port, ns.tp_size, ns.schedule_policy) == \
        ("m", "127.0.0.1", 30000, 1, "fcfs")
    assert ns.decode_log_interval == 40 and ns.disable_radix_cache is False
    assert ns.mem_fraction_static is None and ns.max_running_requests is None


def test_issue_flags_parse() -> None:
    ns = build_parser().parse_args([
        "--model-path", "m", "--tp-size", "2", "--dp-size", "1", "--mem-fraction-static", "0.8",
        "--max-running-requests", "64", "--max-total-tokens", "5000",
        "--chunked-prefill-size", "-1", "--schedule-policy", "lpm", "--disable-radix-cache",
        "--disable-cuda-graph", "--cuda-graph-max-bs-decode", "32",
        "--cuda-graph-max-bs-prefill", "8", "--enable-torch-compile", "--quantization", "fp8",
        "--kv-cache-dtype", "fp8_e5m2", "--attention-backend", "fa3", "--enable-metrics",
        "--enable-cache-report", "--log-level", "warning", "--log-requests",
        "--decode-log-interval", "5", "--served-model-name", "x", "--api-key", "k",
        "--load-format", "dummy", "--context-length", "4096", "--random-seed", "3"])
    assert ns.tp_size == 2 and ns.chunked_prefill_size == -1 and ns.quantization == "fp8"
    assert ns.cuda_graph_max_bs_decode == 32 and ns.api_key == "k"


def test_bad_choice_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--model-path", "m", "--schedule-policy", "sjf"])
    assert exc.value.code == 2
    assert "argument --schedule-policy: invalid choice: 'sjf'" in capsys.readouterr().err


def test_bad_sim_fault_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "simulator.launch_server", "--model-path", "m",
         "--sim-fault", "explode=1"], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "--sim-fault 'explode=1' is not one of" in proc.stderr


def test_sim_knobs_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from simulator.args import parse_args

    monkeypatch.setenv("SGLANG_SIM_SPEED", "50")
    monkeypatch.setenv("SGLANG_SIM_STARTUP_S", "0.5")
    monkeypatch.setenv("SGLANG_SIM_GPU", "b200")
    monkeypatch.setenv("SGLANG_SIM_FAULT", "oom-after=3, crash-at-start")
    ns = parse_args(["--model-path", "m", "--sim-fault", "hang-after=9"])
    assert (ns.sim_speed, ns.sim_startup_s, ns.sim_gpu) == (50.0, 0.5, "b200")
    assert ns.sim_fault == ["oom-after=3", "crash-at-start", "hang-after=9"]
    assert parse_args(["--model-path", "m", "--sim-speed", "2"]).sim_speed == 2.0  # flag wins


def test_bad_sim_env_value_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "simulator.launch_server", "--model-path", "m"], cwd=REPO,
        capture_output=True, text=True, timeout=30,
        env={**os.environ, "SGLANG_SIM_SPEED": "fast"})
    assert proc.returncode == 2
    assert "argument --sim-speed: invalid float value: 'fast'" in proc.stderr
