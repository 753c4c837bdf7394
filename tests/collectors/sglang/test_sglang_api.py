"""Tests of collectors/sglang/api*.py: shape parsing on real 0.5.23 captures, the health state
machine, and the collector against a scripted aiohttp server on 127.0.0.1 (fallbacks, flaps,
restarts outside Pitwall)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from http_stub import MemoryState, StubServer

from collectors.base import CollectorContext, ServerTarget
from collectors.health import health_step
from collectors.sglang.api import SGLangApiCollector
from collectors.sglang.api_parse import (
    REDACTED,
    parse_loads,
    parse_model_info,
    parse_server_info,
)

# a healthy read is handed in by the poll that started it, on a loaded host too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("patient_polls")
FIX = Path(__file__).resolve().parents[2] / "fixtures"


def load(name: str) -> Any:
    return json.loads((FIX / name).read_text(encoding="utf-8"))


# -- pure shapes ---------------------------------------------------------------------------------
def test_server_info_0_5_23_real_capture():
    data = load("sglang-0.5.23-real-cpu-server_info.json")
    info = parse_server_info(data)
    assert info.version == "0.5.23"
    assert info.server_args["max_total_tokens"] == 4096  # --max-total-tokens 4096 in the capture
    assert "internal_states" not in info.server_args and "version" not in info.server_args
    assert len(info.internal_states) == 1  # one DP rank
    assert info.launch_command and "--enable-metrics" in info.launch_command
    assert info.identity == parse_server_info(data).identity
    data2 = dict(data, random_seed=data["random_seed"] + 1)  # another launch draws another seed
    assert parse_server_info(data2).identity != info.identity


def test_secrets_are_redacted_and_empty_ones_left_alone():
    info = parse_server_info({"api_key": "s3cret", "admin_api_key": None, "ssl_keyfile_password": "pw", "tp_size": 2})
    assert info.server_args == {"api_key": REDACTED, "admin_api_key": None, "ssl_keyfile_password": REDACTED, "tp_size": 2}
    assert info.version is None  # <= 0.3.6 /get_server_args carries no version


def test_model_info_and_loads_real_captures():
    model = parse_model_info(load("sglang-0.5.23-real-cpu-model_info.json"))
    assert model["is_generation"] is True and model["architectures"] == ["LlamaForCausalLM"]
    loads = parse_loads(load("sglang-0.5.23-real-cpu-v1_loads.json"))
    assert loads["api.max_total_num_tokens"] == 4096.0
    assert loads["api.num_running_reqs"] == 0.0  # idle at capture: a real 0
    assert not any(".dp" in k for k in loads)  # one DP rank: no detail


def test_loads_aggregate_over_dp_and_get_load_shape():
    v1 = {"loads": [
        {"dp_rank": 0, "num_running_reqs": 3, "token_usage": 0.2, "gen_throughput": 100.0},
        {"dp_rank": 1, "num_running_reqs": 5, "token_usage": 0.6, "gen_throughput": 50.0},
    ]}  # fmt: skip
    out = parse_loads(v1)
    assert out["api.num_running_reqs"] == 8.0  # 3 + 5
    assert out["api.token_usage"] == pytest.approx(0.4)  # mean(0.2, 0.6)
    assert out["api.gen_throughput_tok_s"] == 150.0
    assert out["api.num_running_reqs.dp1"] == 5.0
    old = [{"dp_rank": 0, "num_reqs": 4, "num_waiting_reqs": 1, "num_tokens": 900}]  # /get_load
    assert parse_loads(old) == {"api.num_reqs": 4.0, "api.num_waiting_reqs": 1.0, "api.num_used_tokens": 900.0}
    with pytest.raises(ValueError):
        parse_loads("busy")


def test_health_state_machine_transitions_and_one_flap_warning():
    state: dict[str, Any] = {}
    kinds = []
    # up, down, up, down, up within 40 s: 4 changes -> flapping (threshold 4 in 300 s)
    for t, ok in enumerate([True, False, True, False, True, False]):
        events, state = health_step(state, ok, 10.0 * t, server_name="a", detail="HTTP 503")
        kinds.append([e.kind for e in events])
    assert kinds == [
        [], ["health_down"], ["health_up"], ["health_down"],
        ["health_up", "health_flap"], ["health_down"],
    ]  # fmt: skip
    # after the window passes without changes the flap count drains
    events, state = health_step(state, False, 1000.0, server_name="a")
    assert events == [] and state["transitions"] == []


def test_first_observation_down_is_reported():
    events, state = health_step({}, False, 0.0, server_name="a", detail="ConnectError")
    assert [e.kind for e in events] == ["health_down"] and "ConnectError" in events[0].message
    assert state["up"] is False


# -- the collector over real HTTP ----------------------------------------------------------------
class Script:
    """A scripted SGLang: health answers pop from a list; old-era endpoint names only."""

    def __init__(self, health: list[int], info: dict[str, Any]) -> None:
        self.health = health
        self.info = info

    def __call__(self, path: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
        if path == "/health":
            code = self.health.pop(0) if len(self.health) > 1 else self.health[0]
            return code, "", "text/plain"
        if path == "/get_server_info":  # 0.4.x name: /server_info 404s first
            return 200, json.dumps(self.info), "application/json"
        if path == "/get_model_info":
            return 200, json.dumps({"model_path": "m", "is_generation": True}), "application/json"
        if path == "/get_load":
            return 200, json.dumps([{"dp_rank": 0, "num_reqs": 2, "num_waiting_reqs": 1}]), "application/json"
        return None


def _run(script: Script, polls: int, step_s: float = 5.0, launch_id: int | None = 7):
    mem = MemoryState()
    launches: list[tuple[int, dict[str, Any]]] = []
    clock = [1000.0]
    collector = SGLangApiCollector(flap_threshold=3, flap_window_s=600.0)
    results = []
    try:
        with StubServer(script) as srv:
            target = ServerTarget(id=2, name="srv", base_url=srv.url, launch_id=launch_id)
            ctx = CollectorContext(
                servers=[target], load_state=mem.load, save_state=mem.save, now=lambda: clock[0],
                update_launch=lambda lid, fields: launches.append((lid, fields)),
            )  # fmt: skip
            for _ in range(polls):
                results.append(collector.poll(ctx))
                clock[0] += step_s
            paths = [p for p, _ in srv.requests]
    finally:
        collector.close()
    return results, launches, mem, paths


def test_collector_fallbacks_record_the_launch_and_read_loads():
    info = {"version": "0.4.9", "tp_size": 1, "random_seed": 42, "api_key": "x"}
    results, launches, mem, paths = _run(Script([200], info), polls=3)
    samples = {s.metric: s.value for s in results[0].samples}
    assert samples["api.health_ok"] == 1.0 and samples["api.health_latency_s"] >= 0.0
    assert samples["api.num_reqs"] == 2.0 and samples["api.num_waiting_reqs"] == 1.0
    assert launches == [(7, {"server_args": {"tp_size": 1, "random_seed": 42, "api_key": REDACTED}, "engine_version": "0.4.9"})]
    # fallbacks are remembered: /server_info and /v1/loads are asked once, then skipped
    assert paths.count("/server_info") == 1 and paths.count("/v1/loads") == 1
    assert paths.count("/get_load") == 3
    assert mem.data["sglang_api:2:info"]["model_info"] == {"model_path": "m", "is_generation": True}
    assert all(not r.events for r in results)


def test_collector_flaps_and_recovers():
    info = {"version": "0.5.23", "random_seed": 1}
    results, _, _, _ = _run(Script([200, 503, 200, 503, 200], info), polls=5)
    kinds = [[e.kind for e in r.events] for r in results]
    assert kinds == [[], ["health_down"], ["health_up"], ["health_down", "health_flap"], ["health_up"]]
    # severities are storage/kinds.py EVENT_KINDS's: /health not answering is an error
    assert [[e.severity for e in r.events] for r in results][1:4] == [["error"], ["info"], ["error", "warning"]]
    ok = [next(s.value for s in r.samples if s.metric == "api.health_ok") for r in results]
    assert ok == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert not any(s.metric.startswith("api.num") for s in results[1].samples)  # no loads while down


def test_restart_outside_pitwall_is_detected():
    script = Script([200, 503, 200], {"version": "0.5.22", "random_seed": 1})
    mem = MemoryState()
    clock = [0.0]
    collector = SGLangApiCollector()
    try:
        with StubServer(script) as srv:
            target = ServerTarget(id=2, name="srv", base_url=srv.url, launch_id=7)
            ctx = CollectorContext(servers=[target], load_state=mem.load, save_state=mem.save, now=lambda: clock[0])
            collector.poll(ctx)
            script.info = {"version": "0.5.23", "random_seed": 99}  # someone relaunched it
            collector.poll(ctx)
            third = collector.poll(ctx)
    finally:
        collector.close()
    kinds = [e.kind for e in third.events]
    assert kinds == ["health_up", "server_exit", "server_ready"]
    assert "outside Pitwall" in third.events[1].message and "0.5.22 -> 0.5.23" in third.events[1].message
    # the one stated override: the replaced process already serves again, so its exit is a warning
    assert [e.severity for e in third.events] == ["info", "warning", "info"]


def test_unreachable_server_is_data_not_a_crash():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mem = MemoryState()
    collector = SGLangApiCollector(timeout_s=2.0)
    try:
        target = ServerTarget(id=1, name="gone", base_url=f"http://127.0.0.1:{port}")
        ctx = CollectorContext(servers=[target], load_state=mem.load, save_state=mem.save)
        result = collector.poll(ctx)
    finally:
        collector.close()
    assert [(s.metric, s.value) for s in result.samples] == [("api.health_ok", 0.0)]
    assert [e.kind for e in result.events] == ["health_down"]
