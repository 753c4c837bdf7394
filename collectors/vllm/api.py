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

What every engine shares lives outside: the poll loop and the timed /health read in
collectors/api_poll.py, the up/down/flap rules in collectors/health.py.
"""

from __future__ import annotations

from typing import Any

from collectors.api_poll import READ_ERRORS, SOURCE, ApiCollector
from collectors.base import (
    CollectorContext,
    EventRow,
    PollResult,
    SampleRow,
    ServerTarget,
)
from collectors.vllm.api_parse import (
    BODY_CAPS,
    HEALTH_PATH,
    LOAD_PATH,
    MODELS_PATH,
    VERSION_PATH,
    ServerInfo,
    health_detail,
    load_step,
    parse_load,
    parse_models,
    parse_version,
)


class VLLMApiCollector(ApiCollector):
    """Polls the HTTP endpoints of every vLLM server each `interval_s` seconds.

    timeout_s: the client's per-operation timeout; deadline_s: one whole read (connect + head +
    body), seconds; info_interval_s: how often version and models are read again while up.
    """

    name = "vllm_api"
    health_path = HEALTH_PATH
    body_caps = BODY_CAPS
    unrecorded = "its health is"
    replaced = "server"
    same_version_change = " (other models)"

    def health_detail(self, status: int) -> str:
        return health_detail(status)

    def ready_label(self, info: ServerInfo) -> str:
        return f"vLLM {info.version or 'of an unknown version'}"

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

    def read_up(self, ctx: CollectorContext, server: ServerTarget, now: float, state: dict[str, Any],
                came_up: bool) -> PollResult:
        """Version and models when it came up and every info_interval_s, then /load."""
        out = PollResult()
        if came_up:  # a server back up may be another process: its load counting is unproven
            state["load_tracked"] = False
            state.pop("load_absent", None)
        if came_up or self.info_due(state, now):
            out.extend(self._info_step(ctx, server, now, state))
        out.samples.extend(self._read_load(server, now, state))
        return out

    def _read_load(self, server: ServerTarget, now: float, state: dict[str, Any]) -> list[SampleRow]:
        """/load's figure (api_parse.load_step); nothing on a release without /load (asked again
        when the server comes back up) or an answer of another shape."""
        if state.get("load_absent"):
            return []
        try:
            data = self._get_json(server, LOAD_PATH)
        except READ_ERRORS:
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
        except READ_ERRORS as exc:
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
        models = self._get_json(server, MODELS_PATH)
        if models is None:
            raise ValueError(f"{MODELS_PATH} does not exist; is this a vLLM server?")
        version_data = self._get_json(server, VERSION_PATH)  # None: a release without /version
        info = ServerInfo(version=None if version_data is None else parse_version(version_data),
                          models=parse_models(models))
        return self.record_info(ctx, server, now, info, {"server_args": info.server_args})
