"""collectors/fanout.py through the API collector: a server that drips its answers holds up
nobody, is abandoned at the poll's deadline with its state left unsaved, leaves one event per
episode, and a runner that is stopping gets what has come in at once."""

from __future__ import annotations

import threading
import time
from typing import Any

from hostile_http import HostileServer
from hostile_servers import FakeSGLang

from collectors.base import CollectorContext, ServerTarget
from collectors.sglang.api import SGLangApiCollector


def _ctx(servers: list[ServerTarget], saved: dict[str, Any], stopping: threading.Event | None = None) -> CollectorContext:
    return CollectorContext(servers=servers, load_state=saved.get, save_state=saved.__setitem__,
                            stopping=(stopping.is_set if stopping else (lambda: False)))


def test_a_dripping_server_holds_up_nobody_and_saves_no_state() -> None:
    with HostileServer("drip", drip_s=0.5) as drip, FakeSGLang("healthy") as ok:
        servers = [ServerTarget(id=1, name="drip", base_url=drip.url),
                   ServerTarget(id=2, name="ok", base_url=ok.url)]
        col = SGLangApiCollector(timeout_s=1.0, deadline_s=1.0)
        col.poll_deadline_s = 2.0
        saved: dict[str, Any] = {}
        try:
            first = col.poll(_ctx(servers, saved))
            second = col.poll(_ctx(servers, saved))
        finally:
            col.close()
    ok_health = [s for s in first.samples if s.server_id == 2 and s.metric == "api.health_ok"]
    assert [s.value for s in ok_health] == [1.0]
    assert "sglang_api:2:health" in saved
    # the dripping server's /health ran into its 1 s read deadline: a down server is data
    drip_health = [s.value for s in first.samples if s.server_id == 1 and s.metric == "api.health_ok"]
    assert drip_health == [0.0]
    # one episode, at most one collector_error for it across both polls
    errs = [e for e in first.events + second.events if e.server_id == 1 and e.kind == "collector_error"]
    assert len(errs) <= 1, errs
    assert not [e for e in first.events + second.events if e.server_id == 2 and e.severity != "info"]


def test_a_stopping_runner_gets_what_came_in_without_waiting_out_a_stall() -> None:
    with FakeSGLang("healthy") as ok, HostileServer("drip", drip_s=0.5) as drip:
        servers = [ServerTarget(id=1, name="drip", base_url=drip.url),
                   ServerTarget(id=2, name="ok", base_url=ok.url)]
        col = SGLangApiCollector(timeout_s=30.0, deadline_s=30.0)  # the stall would hold 60 s
        saved: dict[str, Any] = {}
        stopping = threading.Event()
        timer = threading.Timer(2.0, stopping.set)
        timer.start()
        t0 = time.monotonic()
        try:
            res = col.poll(_ctx(servers, saved, stopping))
        finally:
            timer.cancel()
            col.close()
        took = time.monotonic() - t0
    # the healthy server's rows and state are handed in; the stalled one's are not
    assert [s.value for s in res.samples if s.server_id == 2 and s.metric == "api.health_ok"] == [1.0]
    assert "sglang_api:2:health" in saved and "sglang_api:1:health" not in saved
    assert not [s for s in res.samples if s.server_id == 1]
    assert took < 30.0  # handed in at the stop, not after the stalled read's 30 s deadline
