"""vLLM HTTP API collector: /health (with latency and flaps), version and served models, /load.

Owns what a vLLM server says about itself over HTTP. Each poll, per server: `GET /health` (a
liveness check of the engine core, no generation), then, while healthy, `GET /load`. The version
(`/version`) and the served models (`/v1/models`) are read on the first healthy poll, after every
down -> up change and every `info_interval_s`; they are recorded on the current Launch
(`server_args`: model, served_model_name, max_model_len, lora_modules; `engine_version`) and kept
in this collector's state (`vllm_api:<server_id>:info`). Parsing is collectors/vllm/api_parse.py.

Restart outside Pitwall: a server whose identity (version, served models, context length) changes
while its Launch stays the same was restarted by someone else; that emits `server_exit` and
`server_ready` events saying so. vLLM shows nothing per process over HTTP, so a restart with the
same version and flags is seen only as the health_down / health_up it caused, if a poll saw it.

| key | unit | meaning | cross-check |
|---|---|---|---|
| api.health_ok | 1/0 | /health answered 200 | `curl -s -o /dev/null -w '%{http_code}' $URL/health` |
| api.health_latency_s | s | time to the /health answer (any status) | `curl -w '%{time_total}' $URL/health` |
| api.num_reqs | requests | requests the API server is handling (/load's `server_load`); only under `--enable-server-load-tracking`, recorded once it has been above 0 | `curl $URL/load` |

Running / waiting requests, KV usage and throughput come from /metrics (the `vllm:` families),
not from here. A service's router (`role = "router"`) is read for /health only.

Events: `health_down` / `health_up` on changes (a 503 says the engine core died),
`health_flap` (warning) when health flaps (`flap_threshold` changes within `flap_window_s`),
`server_exit` + `server_ready` on an outside restart, `collector_error` once per episode when the
version and models cannot be read (a /v1/models that wants a key the server target lacks) or a
read fails unexpectedly.
"""

from __future__ import annotations

import time
from typing import Any

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
from collectors.http import CappedResponse, auth_headers, capped_client, get_capped
from collectors.vllm.api_parse import (
    BODY_CAPS,
    HEALTH_PATH,
    LOAD_PATH,
    MODELS_PATH,
    VERSION_PATH,
    ServerInfo,
    health_detail,
    health_step,
    load_step,
    parse_load,
    parse_models,
    parse_version,
)
from storage import series_keys as sk

SOURCE = "api"
WAIT_S = 2.0  # a poll waits this long for its servers; a slower one is handed in by a later poll
_READ_ERRORS = (httpx.HTTPError, ValueError, CollectorError)


class VLLMApiCollector:
    """Polls the HTTP endpoints of every vLLM server each `interval_s` seconds.

    timeout_s: the client's per-operation timeout; deadline_s: one whole read (connect + head +
    body), seconds; info_interval_s: how often version and models are read again while up.
    """

    name = "vllm_api"

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
        self.deadline_s = deadline_s
        self._servers = ServerPool(self.name)
        self._last_error: dict[int, str] = {}

    # -- HTTP ---------------------------------------------------------------------------------
    def _get(self, server: ServerTarget, path: str) -> CappedResponse:
        """One capped read; raises DeadlineExceeded / CapExceeded (CollectorError) or httpx errors."""
        url = server.base_url.rstrip("/") + path
        return get_capped(self._client, url, headers=auth_headers(server.api_key),
                          deadline_s=self.deadline_s, max_bytes=BODY_CAPS.get(path))

    def _get_json(self, server: ServerTarget, path: str) -> Any:
        """The JSON `path` answers; None when the server has no such endpoint (404 / 405).
        Raises ValueError on another error status or a body that is not JSON."""
        resp = self._get(server, path)
        if resp.status_code in (404, 405):
            return None
        if resp.status_code in (401, 403):
            raise ValueError(f"{path} answered HTTP {resp.status_code}: the server wants an API key; set "
                             "this server's api_key to the one it was started with (--api-key)")
        if resp.status_code >= 400:
            raise ValueError(f"{path} answered HTTP {resp.status_code}")
        return resp.json()

    def check_health(self, server: ServerTarget) -> tuple[bool, float | None, str]:
        """(ok, latency_s of any answer, detail); never raises."""
        t0 = time.perf_counter()
        try:
            resp = self._get(server, HEALTH_PATH)
        except httpx.TimeoutException:
            return False, None, "timed out"
        except CollectorError as exc:  # a cap or the total deadline: the message names the limit
            return False, None, str(exc)
        except httpx.HTTPError as exc:
            return False, None, f"{type(exc).__name__}: {exc}"
        latency = time.perf_counter() - t0
        if resp.status_code == 200:
            return True, latency, "HTTP 200"
        return False, latency, health_detail(resp.status_code)

    # -- poll ---------------------------------------------------------------------------------
    def poll(self, ctx: CollectorContext) -> PollResult:
        # a server Pitwall is starting or stopping is not read: the supervisor reports that
        servers = [s for s in ctx.servers if s.serving]
        fan = self._servers.poll_servers(ctx, servers, self.poll_server, wait_s=WAIT_S)
        result = fan.result
        # a server that is down is data (api.health_ok 0 + health_down), not a collector failure;
        # a read that raised something unexpected is that server's event, once per distinct error
        for server, exc in fan.failed:
            msg = (f"Reading the HTTP API of {server.name!r} failed ({type(exc).__name__}: {exc}); "
                   "its health is not recorded until it answers normally.")
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
        if ok and server.role != "router":  # a router is read for /health only
            came_up = was_up is not True
            if came_up:  # a server back up may be another process: its load counting is unproven
                state["load_tracked"] = False
                state.pop("load_absent", None)
            due = now - float(state.get("info_at") or 0.0) >= self.info_interval_s
            if came_up or due:
                out.extend(self._info_step(ctx, server, now, state))
            out.samples.extend(self._read_load(server, now, state))
        ctx.save_state(key, state)
        return out

    def _read_load(self, server: ServerTarget, now: float, state: dict[str, Any]) -> list[SampleRow]:
        """/load's figure (api_parse.load_step); nothing on a release without /load (asked again
        when the server comes back up) or an answer of another shape."""
        if state.get("load_absent"):
            return []
        try:
            data = self._get_json(server, LOAD_PATH)
        except _READ_ERRORS:
            return []  # optional: health and info still count
        if data is None:
            state["load_absent"] = True
            return []
        try:
            value = parse_load(data)
        except ValueError:
            return []
        values, state["load_tracked"] = load_step(value, bool(state.get("load_tracked")))
        return [SampleRow(now, server.id, k, v, SOURCE, server.launch_id) for k, v in sorted(values.items())]

    def _info_step(self, ctx: CollectorContext, server: ServerTarget, now: float,
                   state: dict[str, Any]) -> PollResult:
        """Read version and models; a failure is one collector_error per episode (the same
        message is not repeated until a read succeeds), retried on the info interval."""
        state["info_at"] = now
        try:
            out = self._refresh_info(ctx, server, now)
        except _READ_ERRORS as exc:
            msg = (f"Could not read the version and models of {server.name!r} ({exc}); they are not "
                   "recorded for this launch until it answers.")
            if state.get("info_error") == msg:
                return PollResult()
            state["info_error"] = msg
            return PollResult(events=[EventRow(now, server.id, "collector_error", msg,
                                               launch_id=server.launch_id)])
        state.pop("info_error", None)
        return out

    def _refresh_info(self, ctx: CollectorContext, server: ServerTarget, now: float) -> PollResult:
        out = PollResult()
        models = self._get_json(server, MODELS_PATH)
        if models is None:
            raise ValueError(f"{MODELS_PATH} does not exist; is this a vLLM server?")
        version_data = self._get_json(server, VERSION_PATH)  # None: a release without /version
        info = ServerInfo(version=None if version_data is None else parse_version(version_data),
                          models=parse_models(models))
        key = f"{self.name}:{server.id}:info"
        prev = ctx.load_state(key) or {}
        out.events.extend(restart_events(prev, info, server, now))
        if (server.launch_id is not None and ctx.update_launch is not None
                and (prev.get("identity") != info.identity or prev.get("launch_id") != server.launch_id)):
            ctx.update_launch(server.launch_id, {"server_args": info.server_args, "engine_version": info.version})
        ctx.save_state(key, {
            "identity": info.identity,
            "launch_id": server.launch_id,
            "version": info.version,
            "server_args": info.server_args,
            "checked_at": now,
        })
        return out

    def close(self) -> None:
        self._servers.close()
        self._client.close()


def restart_events(prev: dict[str, Any], info: ServerInfo, server: ServerTarget, now: float) -> list[EventRow]:
    """`server_exit` + `server_ready` when the identity changed under the same launch. Pure."""
    old = prev.get("identity")
    if not old or old == info.identity or prev.get("launch_id") != server.launch_id:
        return []  # first sight, same server, or a launch Pitwall made itself
    was = prev.get("version")
    change = f" (version {was} -> {info.version})" if was != info.version else " (other models)"
    return [
        EventRow(now, server.id, "server_exit",
                 f"{server.name} was restarted outside Pitwall: a different server now answers{change}.",
                 severity="warning",
                 severity_reason="the server already serves again (the server_ready below): a replaced "
                                 "process, not an outage",
                 launch_id=server.launch_id),
        EventRow(now, server.id, "server_ready",
                 f"{server.name} is serving again (vLLM {info.version or 'of an unknown version'}).",
                 launch_id=server.launch_id),
    ]
