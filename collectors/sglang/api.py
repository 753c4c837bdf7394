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

The poll loop, the /health check and the health state machine are every engine's
(collectors/api_poll.py, collectors/health.py); this module is SGLang's endpoints and messages.
"""

from __future__ import annotations

from typing import Any

from collectors.api_poll import READ_ERRORS, SOURCE, ApiCollector
from collectors.base import (
    CollectorContext,
    CollectorError,
    EventRow,
    PollResult,
    SampleRow,
    ServerTarget,
)
from collectors.sglang.api_parse import (
    HEALTH_PATH,
    LOAD_PATHS,
    MODEL_INFO_PATHS,
    SERVER_INFO_PATHS,
    ServerInfo,
    parse_loads,
    parse_model_info,
    parse_server_info,
)


class _NotFound(CollectorError):
    pass


class SGLangApiCollector(ApiCollector):
    """Polls the HTTP endpoints of every server each `interval_s` seconds.

    /health may run a generation (0.5.1+): SGLang itself waits up to 20 s for it, hence the
    10-s timeout_s and deadline_s defaults (collectors/api_poll.py).
    """

    name = "sglang_api"
    health_path = HEALTH_PATH
    unrecorded = "its health and load are"
    replaced = "server process"

    def ready_label(self, info: ServerInfo) -> str:
        return f"SGLang {info.version or 'unknown version'}"

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

    def read_up(self, ctx: CollectorContext, server: ServerTarget, now: float, state: dict[str, Any],
                came_up: bool) -> PollResult:
        """Loads every poll; server and model info when it came up and every info_interval_s."""
        out = PollResult()
        endpoints = dict(state.get("endpoints") or {})
        try:
            path, data = self._get_json(server, LOAD_PATHS, endpoints.get("loads"))
            endpoints["loads"] = path
            for k, v in sorted(parse_loads(data).items()):
                out.samples.append(SampleRow(now, server.id, k, v, SOURCE, server.launch_id))
        except READ_ERRORS:
            pass  # loads are optional (absent before 0.4.7): health and info still count
        if came_up or self.info_due(state, now):
            try:
                out.extend(self._refresh_info(ctx, server, now, endpoints))
            except READ_ERRORS as exc:  # _NotFound is a CollectorError
                out.events.append(EventRow(
                    now, server.id, "collector_error",
                    f"Could not read server info of {server.name!r} ({exc}); server args and "
                    "version are not recorded for this launch.",
                    launch_id=server.launch_id,
                ))
            state["info_at"] = now  # after a failure too: retry on the info interval, not every poll
        state["endpoints"] = endpoints
        return out

    def _refresh_info(
        self, ctx: CollectorContext, server: ServerTarget, now: float, endpoints: dict[str, str]
    ) -> PollResult:
        path, data = self._get_json(server, SERVER_INFO_PATHS, endpoints.get("server_info"))
        endpoints["server_info"] = path
        info = parse_server_info(data)
        model: dict[str, Any] = {}
        try:
            mpath, mdata = self._get_json(server, MODEL_INFO_PATHS, endpoints.get("model_info"))
            endpoints["model_info"] = mpath
            model = parse_model_info(mdata)
        except READ_ERRORS:
            pass
        return self.record_info(ctx, server, now, info,
                                {"model_info": model, "server_info_path": path})
