"""The canary collector against the stamping stub server (tests/probe/probe_stub_server.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from probe_stub_server import spawn

from collectors.base import CollectorContext, ServerTarget
from collectors.canary import CanaryCollector

#: each request's total deadline: the stub answers in milliseconds, a loaded host needs more
REQUEST_S = 20.0
# a healthy read is handed in by the poll that started it, on a loaded host too (tests/conftest.py)
pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("patient_polls")]


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    proc, port = spawn(delay_ms=2.0, first_delay_ms=5.0)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_canary(stub: str) -> None:
    canary = CanaryCollector(interval_s=30, timeout_s=REQUEST_S)
    servers = [ServerTarget(1, "up", stub), ServerTarget(2, "down", f"http://127.0.0.1:{_closed_port()}"),
               ServerTarget(3, "img", stub, kind="image")]
    ctx = CollectorContext(servers=servers, load_state=lambda _k: None, save_state=lambda _k, _v: None)
    try:
        res = canary.poll(ctx)
    finally:
        canary.close()
    got = {(s.server_id, s.metric): s.value for s in res.samples}
    assert got[(1, "canary.ok")] == 1.0 and got[(1, "canary.ttft_s")] > 0 and (1, "canary.e2e_s") in got
    assert got[(2, "canary.ok")] == 0.0 and (2, "canary.ttft_s") not in got
    assert got[(3, "canary.ok")] == 1.0 and (3, "canary.ttft_s") not in got
    assert all(s.source == "probe" for s in res.samples)
    assert [(e.server_id, e.kind) for e in res.events] == [(2, "probe_error")]
    assert "connect_refused" in res.events[0].message


def test_canary_http_error_and_broken_stream(stub: str) -> None:
    canary = CanaryCollector(interval_s=5, timeout_s=REQUEST_S)
    servers = [ServerTarget(1, "503", stub + "/mode/status503"), ServerTarget(2, "nodone", stub + "/mode/nodone")]
    ctx = CollectorContext(servers=servers, load_state=lambda _k: None, save_state=lambda _k, _v: None)
    try:
        res = canary.poll(ctx)
    finally:
        canary.close()
    assert [e.message for e in res.events] == [
        "Canary request to 503 failed: http_503.", "Canary request to nodone failed: stream_broken."]
    assert {(s.server_id, s.metric) for s in res.samples} == {(1, "canary.ok"), (2, "canary.ok"), (2, "canary.ttft_s")}
