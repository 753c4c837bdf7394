"""The HTTP API poll every engine's API collector shares: one capped read per endpoint, the timed
/health check, the per-server fan-out with its errors reported once per episode, the health
samples and events, and the recording of what a server says it is (its version and args on the
current Launch, a restart outside Pitwall as `server_exit` + `server_ready`).

An engine's collector (collectors/<engine>/api.py) subclasses `ApiCollector` and brings its own
endpoints, parsing and messages: `read_up` (what it reads while a server is healthy),
`health_detail` (what a /health status means), `ready_label` and the class attributes below.
The health state machine itself is collectors/health.py.

| key | unit | meaning | cross-check |
|---|---|---|---|
| api.health_ok | 1/0 | /health answered 200 | `curl -s -o /dev/null -w '%{http_code}' $URL/health` |
| api.health_latency_s | s | time to the /health answer (any status) | `curl -w '%{time_total}' $URL/health` |
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import httpx

from collectors.base import (
    CollectorContext,
    CollectorError,
    EventRow,
    PollResult,
    SampleRow,
    ServerTarget,
)
from collectors.fanout import ServerPool
from collectors.health import health_step
from collectors.http import CappedResponse, auth_headers, capped_client, get_capped
from storage import series_keys as sk

SOURCE = "api"
WAIT_S = 2.0  # a poll waits this long for its servers; a slower one is handed in by a later poll
#: what an optional read may raise (an endpoint's error status and a body of another shape are
#: ValueError; caps and deadlines CollectorError)
READ_ERRORS = (httpx.HTTPError, ValueError, CollectorError)


class ServerIdentity(Protocol):
    """What an engine's parsed server info offers the recording: its version, the launch args it
    reveals and a digest that changes when another server answers."""

    @property
    def version(self) -> str | None: ...

    @property
    def server_args(self) -> dict[str, Any]: ...

    @property
    def identity(self) -> str: ...


class ApiCollector:
    """Polls the HTTP endpoints of every server each `interval_s` seconds.

    timeout_s: the client's per-operation timeout; deadline_s: one whole read (connect + head +
    body), seconds; info_interval_s: how often the server info is read again while up;
    flap_threshold changes of health within flap_window_s seconds are a flap.
    """

    name = "api"
    health_path = "/health"
    #: bytes read at most (decoded) per path; a path not named keeps collectors/http.py's cap
    body_caps: dict[str, int] = {}
    #: what a failed read leaves out, in the collector_error it raises ("its health is")
    unrecorded = "its health is"
    #: who answers after an outside restart, in `server_exit` ("a different {…} now answers")
    replaced = "server"
    #: the change named when the version stayed the same (" (other models)"; "" names none)
    same_version_change = ""

    def __init__(
        self,
        interval_s: float = 5.0,
        timeout_s: float = 10.0,
        deadline_s: float = 10.0,
        info_interval_s: float = 60.0,
        flap_threshold: int = 4,
        flap_window_s: float = 300.0,
    ) -> None:
        self.interval_s = interval_s
        self.info_interval_s = info_interval_s
        self.flap_threshold = flap_threshold
        self.flap_window_s = flap_window_s
        self._client = capped_client(timeout_s)
        self.deadline_s = deadline_s  # one whole read (connect + head + body), seconds
        self._servers = ServerPool(self.name)
        self._last_error: dict[int, str] = {}

    # -- what an engine brings ----------------------------------------------------------------
    def read_up(self, ctx: CollectorContext, server: ServerTarget, now: float, state: dict[str, Any],
                came_up: bool) -> PollResult:
        """What is read from a healthy server besides /health (`state` is its saved health state,
        `came_up` true on the first healthy poll and after a down -> up change)."""
        raise NotImplementedError

    def health_detail(self, status: int) -> str:
        """What a /health status other than 200 means, for the health_down message."""
        return f"HTTP {status}"

    def ready_label(self, info: Any) -> str:
        """The server named in `server_ready` ("<engine> <version>")."""
        return str(info.version or "unknown version")

    # -- HTTP ---------------------------------------------------------------------------------
    def _get(self, server: ServerTarget, path: str) -> CappedResponse:
        """One capped read; raises DeadlineExceeded / CapExceeded (CollectorError) or httpx errors."""
        url = server.base_url.rstrip("/") + path
        return get_capped(self._client, url, headers=auth_headers(server.api_key),
                          deadline_s=self.deadline_s, max_bytes=self.body_caps.get(path))

    def check_health(self, server: ServerTarget) -> tuple[bool, float | None, str]:
        """(ok, latency_s of any answer, detail); never raises."""
        t0 = time.perf_counter()
        try:
            resp = self._get(server, self.health_path)
        except httpx.TimeoutException:
            return False, None, "timed out"
        except CollectorError as exc:  # a cap or the total deadline: the message names the limit
            return False, None, str(exc)
        except httpx.HTTPError as exc:
            return False, None, f"{type(exc).__name__}: {exc}"
        latency = time.perf_counter() - t0
        if resp.status_code == 200:
            return True, latency, "HTTP 200"
        return False, latency, self.health_detail(resp.status_code)

    # -- poll ---------------------------------------------------------------------------------
    def poll(self, ctx: CollectorContext) -> PollResult:
        # a server Pitwall is starting or stopping is not read: the supervisor reports that
        servers = [s for s in ctx.servers if s.serving]
        # a server still being read after WAIT_S is handed in by a later poll (collectors/fanout.py)
        fan = self._servers.poll_servers(ctx, servers, self.poll_server, wait_s=WAIT_S)
        result = fan.result
        # a server that is down is data (api.health_ok 0 + health_down), not a collector failure;
        # a read that raised something unexpected is that server's event, once per distinct error
        for server, exc in fan.failed:
            msg = (f"Reading the HTTP API of {server.name!r} failed ({type(exc).__name__}: {exc}); "
                   f"{self.unrecorded} not recorded until it answers normally.")
            if self._last_error.get(server.id) != msg:
                self._last_error[server.id] = msg
                result.events.append(EventRow(ctx.now(), server.id, "collector_error", msg,
                                              launch_id=server.launch_id))
        for server in fan.done:
            self._last_error.pop(server.id, None)
        return result

    def poll_server(self, ctx: CollectorContext, server: ServerTarget) -> PollResult:
        out = PollResult()
        now = ctx.now()
        key = f"{self.name}:{server.id}:health"
        state = ctx.load_state(key) or {}
        ok, latency, detail = self.check_health(server)
        out.samples.append(SampleRow(now, server.id, sk.API_HEALTH_OK, 1.0 if ok else 0.0, SOURCE,
                                     server.launch_id))
        if latency is not None:
            out.samples.append(SampleRow(now, server.id, sk.API_HEALTH_LATENCY_S, latency, SOURCE,
                                         server.launch_id))
        was_up = state.get("up")
        events, state = health_step(state, ok, now, server_name=server.name, detail=detail,
                                    flap_threshold=self.flap_threshold, flap_window_s=self.flap_window_s)
        out.events.extend(EventRow(now, server.id, ev.kind, ev.message, launch_id=server.launch_id)
                          for ev in events)
        # a router is read for /health only: its figures come from its own metrics port
        if ok and server.role != "router":
            out.extend(self.read_up(ctx, server, now, state, was_up is not True))
        ctx.save_state(key, state)
        return out

    def info_due(self, state: dict[str, Any], now: float) -> bool:
        """Whether the server info is read again: `info_interval_s` since the last read."""
        return now - float(state.get("info_at") or 0.0) >= self.info_interval_s

    def record_info(self, ctx: CollectorContext, server: ServerTarget, now: float, info: ServerIdentity,
                    extra: dict[str, Any]) -> PollResult:
        """Record what `info` says: restart events, the Launch's server args and version (when the
        identity or the launch changed) and this collector's `<name>:<server_id>:info` state
        (`extra`: the engine's own fields in it)."""
        key = f"{self.name}:{server.id}:info"
        prev = ctx.load_state(key) or {}
        out = PollResult(events=self.restart_events(prev, info, server, now))
        if (server.launch_id is not None and ctx.update_launch is not None
                and (prev.get("identity") != info.identity or prev.get("launch_id") != server.launch_id)):
            ctx.update_launch(server.launch_id, {"server_args": info.server_args, "engine_version": info.version})
        ctx.save_state(key, {
            "identity": info.identity,
            "launch_id": server.launch_id,
            "version": info.version,
            **extra,
            "checked_at": now,
        })
        return out

    def restart_events(self, prev: dict[str, Any], info: ServerIdentity, server: ServerTarget,
                       now: float) -> list[EventRow]:
        """`server_exit` + `server_ready` when the identity changed under the same launch. Pure."""
        old = prev.get("identity")
        if not old or old == info.identity or prev.get("launch_id") != server.launch_id:
            return []  # first sight, same server, or a launch Pitwall made itself
        was = prev.get("version")
        change = f" (version {was} -> {info.version})" if was != info.version else self.same_version_change
        return [
            EventRow(now, server.id, "server_exit",
                     f"{server.name} was restarted outside Pitwall: a different {self.replaced} now "
                     f"answers{change}.",
                     severity="warning",
                     severity_reason="the server already serves again (the server_ready below): a "
                                     "replaced process, not an outage",
                     launch_id=server.launch_id),
            EventRow(now, server.id, "server_ready",
                     f"{server.name} is serving again ({self.ready_label(info)}).",
                     launch_id=server.launch_id),
        ]

    def close(self) -> None:
        self._servers.close()
        self._client.close()
