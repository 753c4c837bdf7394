"""collectors/fanout.py: a server whose read hangs holds up nobody, is handed in (rows and state
together) by a later poll, and never makes a later poll wait for it; and, through the API
collector on real sockets, a server that drips its answers beside a healthy one."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hostile_http import HostileServer
from hostile_servers import FakeSGLang
from pwtest import wait_for

from collectors import api_poll
from collectors.base import CollectorContext, PollResult, SampleRow, ServerTarget
from collectors.fanout import ServerPool
from collectors.sglang.api import SGLangApiCollector

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _ctx(servers: list[ServerTarget], saved: dict[str, Any]) -> CollectorContext:
    return CollectorContext(servers=servers, load_state=saved.get, save_state=saved.__setitem__)


def test_a_hung_read_is_handed_in_later_and_never_makes_a_poll_wait() -> None:
    release = threading.Event()
    servers = [ServerTarget(id=1, name="hung", base_url="x"), ServerTarget(id=2, name="ok", base_url="y")]

    def poll_one(ctx: CollectorContext, server: ServerTarget) -> PollResult:
        if server.id == 1:
            release.wait()
        ctx.save_state(f"s{server.id}", {"n": server.id})
        return PollResult(samples=[SampleRow(0.0, server.id, "m", 1.0, "t")])

    pool = ServerPool("t")
    saved: dict[str, Any] = {}
    try:
        first = pool.poll_servers(_ctx(servers, saved), servers, poll_one, wait_s=5.0)
        assert [s.id for s in first.done] == [2] and [s.id for s in first.busy] == [1]
        assert "s1" not in saved and saved["s2"] == {"n": 2}
        # the hung read is not waited on again: with wait_s = 600 a poll that waited for it would
        # run into the test's 240 s timeout; its server is not read a second time meanwhile
        second = pool.poll_servers(_ctx(servers, saved), servers, poll_one, wait_s=600.0)
        assert [s.id for s in second.done] == [2] and [s.id for s in second.busy] == [1]
        assert "s1" not in saved
        release.set()
        later: list[Any] = []
        wait_for(lambda: later.append(pool.poll_servers(_ctx(servers, saved), servers, poll_one, wait_s=1.0))
                 or any(s.id == 1 for s in later[-1].done), 60, "the released read handed in")
    finally:
        release.set()
        pool.close()
    rows = [s.server_id for f in later for s in f.result.samples]
    assert rows.count(1) == 1  # its one read, handed in once, with its state
    assert saved["s1"] == {"n": 1}


def test_a_dripping_server_beside_a_healthy_one_through_the_api_collector(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(api_poll, "WAIT_S", 5.0)
    with HostileServer("drip", drip_s=0.5) as drip, FakeSGLang("healthy") as ok:
        servers = [ServerTarget(id=1, name="drip", base_url=drip.url),
                   ServerTarget(id=2, name="ok", base_url=ok.url)]
        col = SGLangApiCollector(timeout_s=8.0, deadline_s=8.0)
        saved: dict[str, Any] = {}
        polls: list[PollResult] = []
        try:
            def drip_in() -> bool:
                polls.append(col.poll(_ctx(servers, saved)))
                return any(s.server_id == 1 for s in polls[-1].samples)

            wait_for(drip_in, timeout=120, what="the dripping server's read handed in", poll_s=0.2)
        finally:
            col.close()
    # its read ran into its 8 s deadline: a down server is data, handed in once with its state
    drip_rows = [s.value for r in polls for s in r.samples if s.server_id == 1 and s.metric == "api.health_ok"]
    assert drip_rows == [0.0] and "sglang_api:1:health" in saved
    # the healthy server was read while the dripping one was in flight
    assert [s.value for r in polls for s in r.samples if s.server_id == 2 and s.metric == "api.health_ok"]
