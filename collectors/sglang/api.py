"""SGLang HTTP API collector: /health (with latency and flaps), server/model info, loads.

Owns what a server says about itself over HTTP. Each poll, per server: `GET /health` (0.5.1+ runs
a one-token generation, so its latency is a cheap end-to-end liveness probe), then, while healthy,
`/v1/loads` (falling back to `/get_load`). Server and model info (`/server_info` ->
`/get_server_info` -> `/get_server_args`; `/model_info` -> `/get_model_info`) are read on the
first healthy poll, after every down -> up change and every `info_interval_s`; they are recorded on
the current Launch (`server_args`, `engine_version`) and kept in this collector's state
(`sglang_api:<server_id>:info`). Parsing is collectors/sglang/api_parse.py.

Restart outside Pitwall: a server whose identity (version, launch command, startup timings,
random seed, port, model) changes while its Launch stays the same was restarted by someone else;
that emits `server_exit` and `server_ready` events saying so.

| key | unit | meaning | cross-check |
|---|---|---|---|
| api.health_ok | 1/0 | /health answered 200 | `curl -s -o /dev/null -w '%{http_code}' $URL/health` |
| api.health_latency_s | s | time to the /health answer (any status) | `curl -w '%{time_total}' $URL/health` |
| api.num_running_reqs, num_waiting_reqs | requests | running / waiting (sum over DP) | `curl $URL/v1/loads` |
| api.num_used_tokens, max_total_num_tokens | tokens | KV tokens in use / capacity | same |
| api.token_usage, cache_hit_rate, utilization | 0-1 | mean over DP ranks | same |
| api.gen_throughput_tok_s | tok/s | decode throughput (sum over DP) | same |
| api.num_reqs, num_pending_tokens | requests, tokens | /get_load fields (0.4.7-0.5.20) | `curl $URL/get_load` |
| api.<key>.dp<i> | as above | per-DP value when DP > 1 | `?dp_rank=i` |

A service's router (`role = "router"`) is read for /health only: its figures come from its own
metrics port (collectors/sglang/metrics.py).

Events: `health_down` / `health_up` on changes, `health_check_failed` (warning) when health flaps
(`flap_threshold` changes within `flap_window_s`), `server_exit` + `server_ready` on an outside
restart.
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
from collectors.sglang.api_parse import (
    HEALTH_PATH,
    LOAD_PATHS,
    MODEL_INFO_PATHS,
    SERVER_INFO_PATHS,
    ServerInfo,
    health_step,
    parse_loads,
    parse_model_info,
    parse_server_info,
)
from storage import series_keys as sk

SOURCE = "api"
WAIT_S = 2.0  # a poll waits this long for its servers; a slower one is handed in by a later poll


class _NotFound(CollectorError):
    pass


class SGLangApiCollector:
    """Polls the HTTP endpoints of every server each `interval_s` seconds."""

    name = "sglang_api"

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
        # /health may run a generation (0.5.1+): SGLang itself waits up to 20 s for it
        self._client = capped_client(timeout_s)
        self.deadline_s = deadline_s  # one whole read (connect + head + body), seconds
        self._servers = ServerPool(self.name)
        self._last_error: dict[int, str] = {}

    # -- HTTP ---------------------------------------------------------------------------------
    def _get(self, server: ServerTarget, path: str) -> CappedResponse:
        """One capped read; raises DeadlineExceeded / CapExceeded (CollectorError) or httpx errors."""
        headers = auth_headers(server.api_key)
        url = server.base_url.rstrip("/") + path
        return get_capped(self._client, url, headers=headers, deadline_s=self.deadline_s)

    def _get_json(
        self, server: ServerTarget, paths: tuple[str, ...], preferred: str | None
    ) -> tuple[str, Any]:
        """JSON from the first path that exists (the one that worked last time first)."""
        order = ([preferred] if preferred in paths else []) + [p for p in paths if p != preferred]
        for path in order:
            resp = self._get(server, path)
            if resp.status_code in (404, 405):
                continue
            if resp.status_code >= 400:
                raise ValueError(f"{path} returned HTTP {resp.status_code}")
            return path, resp.json()
        raise _NotFound(f"none of {', '.join(paths)} exists on {server.base_url}")

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
        return False, latency, f"HTTP {resp.status_code}"

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
                   "its health and load are not recorded until it answers normally.")
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
        out.samples.append(
            SampleRow(now, server.id, sk.API_HEALTH_OK, 1.0 if ok else 0.0, SOURCE, server.launch_id)
        )
        if latency is not None:
            out.samples.append(
                SampleRow(now, server.id, sk.API_HEALTH_LATENCY_S, latency, SOURCE, server.launch_id)
            )
        was_up = state.get("up")
        events, state = health_step(
            state,
            ok,
            now,
            server_name=server.name,
            detail=detail,
            flap_threshold=self.flap_threshold,
            flap_window_s=self.flap_window_s,
        )
        for ev in events:
            out.events.append(
                EventRow(now, server.id, ev.kind, ev.message, launch_id=server.launch_id)
            )
        if ok and server.role != "router":  # a router has no loads or server info of its own (/metrics has its figures)
            endpoints = dict(state.get("endpoints") or {})
            try:
                path, data = self._get_json(server, LOAD_PATHS, endpoints.get("loads"))
                endpoints["loads"] = path
                for k, v in sorted(parse_loads(data).items()):
                    out.samples.append(SampleRow(now, server.id, k, v, SOURCE, server.launch_id))
            except (httpx.HTTPError, ValueError, _NotFound, CollectorError):
                pass  # loads are optional (absent before 0.4.7): health and info still count
            due = now - float(state.get("info_at") or 0.0) >= self.info_interval_s
            if was_up is not True or due:
                try:
                    out.extend(self._refresh_info(ctx, server, now, endpoints))
                    state["info_at"] = now
                except (httpx.HTTPError, ValueError, _NotFound, CollectorError) as exc:
                    out.events.append(
                        EventRow(
                            now,
                            server.id,
                            "collector_error",
                            f"Could not read server info of {server.name!r} ({exc}); server args and "
                            "version are not recorded for this launch.",
                            launch_id=server.launch_id,
                        )
                    )
                    state["info_at"] = now  # retry on the info interval, not every poll
            state["endpoints"] = endpoints
        ctx.save_state(key, state)
        return out

    def _refresh_info(
        self, ctx: CollectorContext, server: ServerTarget, now: float, endpoints: dict[str, str]
    ) -> PollResult:
        out = PollResult()
        path, data = self._get_json(server, SERVER_INFO_PATHS, endpoints.get("server_info"))
        endpoints["server_info"] = path
        info = parse_server_info(data)
        model: dict[str, Any] = {}
        try:
            mpath, mdata = self._get_json(server, MODEL_INFO_PATHS, endpoints.get("model_info"))
            endpoints["model_info"] = mpath
            model = parse_model_info(mdata)
        except (httpx.HTTPError, ValueError, _NotFound, CollectorError):
            pass
        key = f"{self.name}:{server.id}:info"
        prev = ctx.load_state(key) or {}
        out.events.extend(restart_events(prev, info, server, now))
        if (
            server.launch_id is not None
            and ctx.update_launch is not None
            and (prev.get("identity") != info.identity or prev.get("launch_id") != server.launch_id)
        ):
            ctx.update_launch(
                server.launch_id, {"server_args": info.server_args, "engine_version": info.version}
            )
        ctx.save_state(
            key,
            {
                "identity": info.identity,
                "launch_id": server.launch_id,
                "version": info.version,
                "model_info": model,
                "server_info_path": path,
                "checked_at": now,
            },
        )
        return out

    def close(self) -> None:
        self._servers.close()
        self._client.close()


def restart_events(
    prev: dict[str, Any], info: ServerInfo, server: ServerTarget, now: float
) -> list[EventRow]:
    """`server_exit` + `server_ready` when the identity changed under the same launch. Pure."""
    old = prev.get("identity")
    if not old or old == info.identity or prev.get("launch_id") != server.launch_id:
        return []  # first sight, same process, or a launch Pitwall made itself
    was = prev.get("version")
    change = f" (version {was} -> {info.version})" if was != info.version else ""
    return [
        EventRow(
            now,
            server.id,
            "server_exit",
            f"{server.name} was restarted outside Pitwall: a different server process now answers{change}.",
            severity="warning",
            severity_reason="the server already serves again (the server_ready below): a replaced "
                            "process, not an outage",
            launch_id=server.launch_id,
        ),
        EventRow(
            now,
            server.id,
            "server_ready",
            f"{server.name} is serving again (SGLang {info.version or 'unknown version'}).",
            launch_id=server.launch_id,
        ),
    ]
