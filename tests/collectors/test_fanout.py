"""collectors/fanout.py through the API collector: a server that drips its answers holds up
nobody, its read stays in flight (state unsaved) and is handed in by a later poll, and a runner
that is stopping gets what has come in at once."""

from __future__ import annotations

import threading
from typing import Any

from hostile_http import HostileServer
from hostile_servers import FakeSGLang
from pwtest import wait_for

from collectors.base import CollectorContext, PollResult, ServerTarget
from collectors.sglang import api
from collectors.sglang.api import SGLangApiCollector


def _ctx(servers: list[ServerTarget], saved: dict[str, Any],
         stopping: threading.Event | None = None) -> CollectorContext:
    return CollectorContext(servers=servers, load_state=saved.get, save_state=saved.__setitem__,
                            stopping=(stopping.is_set if stopping else (lambda: False)))


def test_a_dripping_server_holds_up_nobody_and_is_handed_in_later(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(api, "WAIT_S", 0.5)  # the poll waits 0.5 s; the drip's read takes 3 s
    with HostileServer("drip", drip_s=0.5) as drip, FakeSGLang("healthy") as ok:
        servers = [ServerTarget(id=1, name="drip", base_url=drip.url),
                   ServerTarget(id=2, name="ok", base_url=ok.url)]
        col = SGLangApiCollector(timeout_s=3.0, deadline_s=3.0)
        saved: dict[str, Any] = {}
        try:
            first = col.poll(_ctx(servers, saved))
            # the healthy server is in; the dripping one is still being read: no rows, no state
            assert [s.value for s in first.samples if s.server_id == 2 and s.metric == "api.health_ok"] == [1.0]
            assert "sglang_api:2:health" in saved and "sglang_api:1:health" not in saved
            assert not [s for s in first.samples if s.server_id == 1]
            later: list[PollResult] = []

            def drip_in() -> bool:
                later.append(col.poll(_ctx(servers, saved)))
                return any(s.server_id == 1 for s in later[-1].samples)

            wait_for(drip_in, timeout=60, what="the dripping server's read handed in", poll_s=0.2)
        finally:
            col.close()
    # its read ran into its 3 s deadline: a down server is data, handed in with its state
    drip_rows = [s.value for r in later for s in r.samples if s.server_id == 1 and s.metric == "api.health_ok"]
    assert drip_rows == [0.0]
    assert "sglang_api:1:health" in saved
    # the healthy server went on being read while the dripping one was in flight
    ok_rows = [s for r in later for s in r.samples if s.server_id == 2 and s.metric == "api.health_ok"]
    assert len(ok_rows) == len(later)


def test_a_stopping_runner_gets_what_came_in_without_waiting_out_a_stall() -> None:
    with FakeSGLang("healthy") as ok, HostileServer("drip", drip_s=0.5) as drip:
        servers = [ServerTarget(id=1, name="drip", base_url=drip.url),
                   ServerTarget(id=2, name="ok", base_url=ok.url)]
        col = SGLangApiCollector(timeout_s=120.0, deadline_s=120.0)  # the drip holds its read 120 s
        saved: dict[str, Any] = {}
        stopping = threading.Event()
        stopping.set()
        polls: list[PollResult] = []

        def healthy_in() -> bool:
            polls.append(col.poll(_ctx(servers, saved, stopping)))
            return any(s.server_id == 2 for s in polls[-1].samples)

        try:
            # each stopping poll returns at once; had one waited for the drip, this would time out
            wait_for(healthy_in, timeout=60, what="the healthy server's read", poll_s=0.1)
        finally:
            col.close()
        res = polls[-1]
    # the stalled read never held the stopping poll: the healthy server is in, the other is not
    assert [s.value for s in res.samples if s.server_id == 2 and s.metric == "api.health_ok"] == [1.0]
    assert "sglang_api:1:health" not in saved
    assert not [s for s in res.samples if s.server_id == 1]
