"""Injected faults print SGLang's/PyTorch's lines and end the way they would."""

from __future__ import annotations

import json
import signal
import socket
import threading

import httpx
import pytest
from conftest import FAST, WAIT_S, StartSim
from pwtest import wait_for
from sim_forms import BIND_ERROR, CRASH, HEALTH_FAILED, PREFIX, SIGQUIT, STARTUP_OOM, check_log


def gen(base: str, n: int = 4, timeout: float = WAIT_S) -> httpx.Response:
    return httpx.post(base + "/generate", timeout=timeout,
                      json={"text": "hi", "sampling_params": {"max_new_tokens": n}})


def messages(log: str) -> list[str]:
    return [m.group("msg") for m in map(PREFIX.match, log.splitlines()) if m]


def test_crash_after_prints_traceback_and_dies(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--sim-fault", "crash-after=1")
    gen(sim.base)
    with pytest.raises(httpx.HTTPError):
        gen(sim.base)  # the server dies under this request
    assert sim.wait_exit() == -signal.SIGKILL
    log = sim.log()
    msgs = messages(log)
    assert any(CRASH.match(m) for m in msgs) and any(SIGQUIT.match(m) for m in msgs)
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in log
    assert check_log(log)[0] == []


def test_oom_after_raises_cuda_oom(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--sim-fault", "oom-after=1")
    gen(sim.base)
    with pytest.raises(httpx.HTTPError):
        gen(sim.base)
    assert sim.wait_exit() == -signal.SIGKILL
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in sim.log()


def test_oom_at_usage_raises_decode_oom(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--max-total-tokens", "400", "--sim-fault", "oom-at-usage=0.5")
    with pytest.raises(httpx.HTTPError):
        gen(sim.base, n=300)  # 2 prompt + 300 output tokens > 0.5 x 400
    assert sim.wait_exit() == -signal.SIGKILL
    assert "RuntimeError: Decode out of memory. Try to lower your batch size." in sim.log()


def test_nccl_timeout_prints_watchdog_lines_and_dies(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--tp-size", "2", "--sim-fault", "nccl-timeout-after=1")
    gen(sim.base)
    with pytest.raises(httpx.HTTPError):
        gen(sim.base)
    assert sim.wait_exit() == -signal.SIGKILL
    log = sim.log()
    assert "Watchdog caught collective operation timeout: WorkNCCL(" in log
    assert "terminate called after throwing an instance of 'c10::DistBackendError'" in log


def test_hang_stops_answering_but_stays_alive(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--sim-fault", "hang-after=1",
                    env={"SGLANG_HEALTH_CHECK_TIMEOUT": "10"})  # 10 model s = 0.2 s wall
    gen(sim.base)
    with pytest.raises(httpx.ReadTimeout):
        gen(sim.base, timeout=1.0)
    assert httpx.get(sim.base + "/health", timeout=10).status_code == 503
    assert sim.proc.poll() is None
    assert any(HEALTH_FAILED.match(m) for m in messages(sim.log()))
    sim.proc.kill()  # a hung server keeps its open requests through SIGTERM, as uvicorn does


def test_not_ready_health_is_503(start_sim: StartSim) -> None:
    # hang-after=0: the warm-up request never finishes, so the server never becomes ready.
    sim = start_sim(*FAST, "--sim-fault", "hang-after=0", wait_ready=False)
    sim.wait_for("Uvicorn running on")
    assert httpx.get(sim.base + "/health", timeout=5).status_code == 503
    assert "The server is fired up" not in sim.log()
    sim.proc.kill()


def test_port_in_use_is_a_bind_error_exit_1(start_sim: StartSim) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        sim = start_sim(*FAST, port=port, wait_ready=False)
        assert sim.wait_exit() == 1
    msgs = messages(sim.log())
    assert any(BIND_ERROR.match(m) for m in msgs), msgs[-5:]


def test_weights_do_not_fit_is_startup_oom(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--mem-fraction-static", "0.3", wait_ready=False,
                    model="meta-llama/Llama-3.1-70B-Instruct")
    assert sim.wait_exit() == -signal.SIGKILL
    log = sim.log()
    assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. " \
           "Current value: mem_fraction_static=0.3" in log
    assert STARTUP_OOM.match("Not enough memory. Please try to increase --mem-fraction-static.")


def test_log_level_warning_hides_batch_lines(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--log-level", "warning", wait_ready=False)  # no ready line to wait for

    def healthy() -> bool:
        try:
            return httpx.get(sim.base + "/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, WAIT_S, "the simulator's /health to answer 200")
    gen(sim.base, n=50)
    log = sim.log()
    assert "Prefill batch" not in log and "Decode batch" not in log
    assert '"POST /generate HTTP/1.1"' not in log


def test_sigterm_ends_open_streams_and_exits_0(start_sim: StartSim) -> None:
    sim = start_sim("--sim-speed", "1", "--sim-startup-s", "0.2")
    chunks: list[str] = []

    def read() -> None:
        body = {"text": "x", "stream": True, "sampling_params": {"max_new_tokens": 100000}}
        with httpx.stream("POST", sim.base + "/generate", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    chunks.append(line[6:])

    t = threading.Thread(target=read)
    t.start()
    wait_for(lambda: len(chunks) >= 3, WAIT_S, "three chunks of the open stream")  # it is open
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit() == 0
    t.join(timeout=WAIT_S)
    assert not t.is_alive(), "the stream did not end with the server"
    assert chunks[-1] == "[DONE]"
    assert json.loads(chunks[-2])["meta_info"]["finish_reason"]["type"] == "abort", chunks[-3:]
    assert "INFO:     Finished server process [" in sim.log()


def test_crash_at_start_never_becomes_ready(start_sim: StartSim) -> None:
    sim = start_sim(wait_ready=False, env={"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "1",
                                           "SGLANG_SIM_FAULT": "crash-at-start"})
    assert sim.wait_exit() == -signal.SIGKILL
    log = sim.log()
    assert "Load weight begin" in log and "The server is fired up" not in log
    assert any(CRASH.match(m) for m in messages(log))


def test_slow_prefill_window_by_finished_requests():
    from simulator.faults import parse_faults

    f = parse_faults(["slow-prefill=2.5", "slow-after=3", "slow-for=2"])
    assert [f.slow_extra_s(n) for n in range(7)] == [0, 0, 0, 2.5, 2.5, 0, 0]
    assert parse_faults(["slow-prefill=1"]).slow_extra_s(10_000) == 1.0  # no end: for ever
    with pytest.raises(ValueError, match="need slow-prefill"):
        parse_faults(["slow-for=4"])
