"""The router (SGLang Model Gateway, ``python -m sglang_router.launch_router``, sglang-router 0.3.2,
the release SGLang 0.5.23's own PD tests start): ``simulator.launch_router`` takes its flags.

Regular mode (``--worker-urls URL ...``) sends each request to one worker; PD mode
(``--pd-disaggregation --prefill URL [BOOTSTRAP_PORT] --decode URL``) adds ``bootstrap_host``
(the prefill URL's host), ``bootstrap_port`` (the number after the prefill URL, else null) and a
random ``bootstrap_room`` to the JSON body, POSTs it to a prefill and a decode worker at once,
and passes the decode worker's answer (a stream too) back; a failed leg is a 502
``decode_server_error``. Policies pick round robin here (``--policy`` is accepted).

Routes on ``--port`` (default 30000): /generate, /v1/completions, /v1/chat/completions,
/health and /liveness ("OK"), /readiness, /workers (0.3.2's JSON), /v1/models, /get_server_info.
Metrics on ``--prometheus-port`` (default 29000; any path, no ``# HELP`` lines, as 0.3.2's
exporter): smg_http_requests_total{method,path}, smg_http_responses_total{status_code,error_code},
smg_http_request_duration_seconds{method,path}, smg_router_requests_total{router_type,
backend_type,connection_mode,model,endpoint,streaming}, smg_router_request_duration_seconds (on
success), smg_router_request_errors_total{...,error_type}, smg_worker_pool_size{worker_type,
connection_mode,model}, smg_worker_requests_active{worker}, smg_worker_health{worker},
smg_worker_cb_state{worker} (0 closed, 1 open, 2 half open), smg_worker_cb_outcomes_total
{worker,outcome}, smg_worker_cb_consecutive_{failures,successes}{worker},
smg_worker_cb_transitions_total{worker,from,to}, smg_worker_selection_total{worker_type,
connection_mode,model,policy}, smg_worker_retries_total{worker_type,endpoint} (declared).
Health: every --health-check-interval-secs (default 60; the simulator checks every 5 s at
most) GET /health of each worker; --health-failure-threshold (3) failures mark it unhealthy.
The breaker opens after --cb-failure-threshold (10) failures in a row and half-opens after
--cb-timeout-duration-secs (60).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientSession, ClientTimeout, web
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from simulator import lifecycle, logfmt

disable_created_metrics()  # a Rust exporter writes no _created series
BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 45, 60, 90, 120, 180, 240]
ENDPOINTS = {"/generate": "generate", "/v1/chat/completions": "chat", "/v1/completions": "completions"}


@dataclass
class Worker:
    url: str
    kind: str  # regular | prefill | decode
    bootstrap_port: int | None = None
    healthy: bool = True
    fails: int = 0  # health-check failures in a row
    cb_fails: int = 0
    cb_successes: int = 0
    cb_state: int = 0  # 0 closed, 1 open, 2 half open
    opened_at: float = 0.0
    load: int = 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_router")
    a = p.add_argument
    a("--host", default="0.0.0.0")
    a("--port", type=int, default=30000)
    a("--worker-urls", nargs="*", default=[])
    a("--pd-disaggregation", action="store_true")
    a("--prefill", nargs="+", action="append", default=[], metavar=("URL", "BOOTSTRAP_PORT"))
    a("--decode", nargs=1, action="append", default=[])
    a("--mini-lb", action="store_true")
    a("--policy", default="cache_aware", choices=["random", "round_robin", "cache_aware", "power_of_two", "manual"])
    a("--prefill-policy", default=None)
    a("--decode-policy", default=None)
    a("--prometheus-host", default="0.0.0.0")
    a("--prometheus-port", type=int, default=29000)
    a("--request-timeout-secs", type=int, default=1800)
    a("--health-check-interval-secs", type=int, default=60)
    a("--health-failure-threshold", type=int, default=3)
    a("--cb-failure-threshold", type=int, default=10)
    a("--cb-timeout-duration-secs", type=int, default=60)
    a("--log-level", default="info")
    return p


class Router:
    def __init__(self, ns: argparse.Namespace, log: logfmt.LogWriter) -> None:
        self.ns, self.log = ns, log
        self.workers: list[Worker] = [Worker(u, "regular") for u in ns.worker_urls]
        for item in ns.prefill:
            port = item[1] if len(item) > 1 and item[1].lower() != "none" else None
            self.workers.append(Worker(item[0], "prefill", int(port) if port else None))
        self.workers += [Worker(d[0], "decode") for d in ns.decode]
        self.pd = ns.pd_disaggregation
        self.model = "default"
        self.rr = itertools.count()
        self.session: ClientSession | None = None
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.http_req = Counter("smg_http_requests", "", ["method", "path"], registry=r)
        self.http_resp = Counter("smg_http_responses", "", ["status_code", "error_code"], registry=r)
        self.http_dur = Histogram("smg_http_request_duration_seconds", "", ["method", "path"], buckets=BUCKETS, registry=r)
        route = ["router_type", "backend_type", "connection_mode", "model", "endpoint"]
        self.requests = Counter("smg_router_requests", "", [*route, "streaming"], registry=r)
        self.duration = Histogram("smg_router_request_duration_seconds", "", route, buckets=BUCKETS, registry=r)
        self.errors = Counter("smg_router_request_errors", "", [*route, "error_type"], registry=r)
        self.pool = Gauge("smg_worker_pool_size", "", ["worker_type", "connection_mode", "model"], registry=r)
        self.active = Gauge("smg_worker_requests_active", "", ["worker"], registry=r)
        self.health = Gauge("smg_worker_health", "", ["worker"], registry=r)
        self.cb_state = Gauge("smg_worker_cb_state", "", ["worker"], registry=r)
        self.cb_out = Counter("smg_worker_cb_outcomes", "", ["worker", "outcome"], registry=r)
        self.cb_fail = Gauge("smg_worker_cb_consecutive_failures", "", ["worker"], registry=r)
        self.cb_ok = Gauge("smg_worker_cb_consecutive_successes", "", ["worker"], registry=r)
        self.cb_trans = Counter("smg_worker_cb_transitions", "", ["worker", "from", "to"], registry=r)
        self.selection = Counter("smg_worker_selection", "", ["worker_type", "connection_mode", "model", "policy"], registry=r)
        Counter("smg_worker_retries", "", ["worker_type", "endpoint"], registry=r)  # declared: no retries here
        Gauge("smg_http_connections_active", "", registry=r).set(0)
        for w in self.workers:
            self._gauges(w)

    # ------------------------------------------------------------------ workers
    def _gauges(self, w: Worker) -> None:
        self.active.labels(w.url).set(w.load)
        self.health.labels(w.url).set(1 if w.healthy else 0)
        self.cb_state.labels(w.url).set(w.cb_state)
        self.cb_fail.labels(w.url).set(w.cb_fails)
        self.cb_ok.labels(w.url).set(w.cb_successes)

    def _usable(self, kind: str) -> list[Worker]:
        now = time.monotonic()
        out = []
        for w in self.workers:
            if w.kind != kind or not w.healthy:
                continue
            if w.cb_state == 1 and now - w.opened_at >= self.ns.cb_timeout_duration_secs:
                self._cb_move(w, 2)
            if w.cb_state != 1:
                out.append(w)
        return out

    def _cb_move(self, w: Worker, to: int) -> None:
        names = ("closed", "open", "half_open")
        self.cb_trans.labels(w.url, names[w.cb_state], names[to]).inc()
        w.cb_state, w.opened_at = to, time.monotonic()

    def _outcome(self, w: Worker, ok: bool) -> None:
        self.cb_out.labels(w.url, "success" if ok else "failure").inc()
        if ok:
            w.cb_fails, w.cb_successes = 0, w.cb_successes + 1
            if w.cb_state == 2:
                self._cb_move(w, 0)
        else:
            w.cb_fails, w.cb_successes = w.cb_fails + 1, 0
            if w.cb_state == 2 or (w.cb_state == 0 and w.cb_fails >= self.ns.cb_failure_threshold):
                self._cb_move(w, 1)
        self._gauges(w)

    def _pick(self, kind: str) -> Worker | None:
        usable = self._usable(kind)
        if not usable:
            return None
        w = usable[next(self.rr) % len(usable)]
        self.selection.labels(kind, "http", self.model, self.ns.policy).inc()
        return w

    async def health_loop(self) -> None:
        every = max(1.0, min(float(self.ns.health_check_interval_secs), 5.0))
        while True:
            for w in self.workers:
                ok = False
                try:
                    async with self._client().get(w.url + "/health", timeout=ClientTimeout(total=5)) as resp:
                        ok = resp.status == 200
                except Exception:
                    ok = False
                w.fails = 0 if ok else w.fails + 1
                was = w.healthy
                w.healthy = ok or w.fails < self.ns.health_failure_threshold
                if was != w.healthy:
                    self.log.log(f"Worker {w.url} is {'healthy' if w.healthy else 'unhealthy'}",
                                 level="info" if w.healthy else "warning")
                self._gauges(w)
            await asyncio.sleep(every)

    def _client(self) -> ClientSession:
        if self.session is None:
            self.session = ClientSession(timeout=ClientTimeout(total=self.ns.request_timeout_secs))
        return self.session

    async def discover(self) -> None:
        """Registration: each worker's /server_info names the model (the pool gauge's label)."""
        for w in self.workers:
            try:
                async with self._client().get(w.url + "/server_info", timeout=ClientTimeout(total=5)) as resp:
                    self.model = str((await resp.json()).get("model_path") or self.model)
            except Exception:
                continue
        for kind in ("regular", "prefill", "decode"):
            n = sum(1 for w in self.workers if w.kind == kind)
            if n:
                self.pool.labels(kind, "http", self.model).set(n)

    # ------------------------------------------------------------------ requests
    async def route(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        t0 = time.perf_counter()
        body = await request.json()
        labels = ("http", "pd" if self.pd else "regular", "http", str(body.get("model") or "default"), ENDPOINTS[path])
        stream = bool(body.get("stream"))
        self.requests.labels(*labels, str(stream).lower()).inc()
        legs = [self._pick("prefill"), self._pick("decode")] if self.pd else [self._pick("regular")]
        if any(w is None for w in legs):
            self.errors.labels(*labels, "no_workers").inc()
            return self._error(503, "server_selection_failed", "No available workers")
        workers = [w for w in legs if w is not None]
        if self.pd:
            prefill = workers[0]
            body.update(bootstrap_host=urlsplit(prefill.url).hostname, bootstrap_port=prefill.bootstrap_port,
                        bootstrap_room=random.randint(0, 2 ** 63 - 1))
        for w in workers:
            w.load += 1
            self._gauges(w)
        try:
            return await self._dispatch(request, path, body, workers, labels, t0)
        finally:
            for w in workers:
                w.load -= 1
                self._gauges(w)

    async def _dispatch(self, request: web.Request, path: str, body: dict[str, Any], workers: list[Worker],
                        labels: tuple[str, ...], t0: float) -> web.StreamResponse:
        client = self._client()
        target = workers[-1]  # the decode worker in PD: its answer goes to the client
        side = None
        if len(workers) > 1:
            side = asyncio.get_running_loop().create_task(self._side_leg(workers[0], path, body))
        try:
            async with client.post(target.url + path, json=body) as up:
                resp = web.StreamResponse(status=up.status, headers={"Content-Type": up.headers.get("Content-Type", "application/json")})
                await resp.prepare(request)
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
                ok = up.status < 400
        except Exception:
            ok = False
            resp = self._error(502, "decode_server_error", f"Decode server {target.url} failed")
        side_ok = await side if side is not None else True
        for w in workers:  # the breaker hears both legs' outcome, as 0.3.2's PD router records it
            self._outcome(w, ok and side_ok)
        if ok:
            self.duration.labels(*labels).observe(time.perf_counter() - t0)
        return resp

    async def _side_leg(self, w: Worker, path: str, body: dict[str, Any]) -> bool:
        try:
            async with self._client().post(w.url + path, json={**body, "stream": False}) as resp:
                await resp.read()
                return resp.status < 400
        except Exception:
            return False

    def _error(self, status: int, code: str, message: str) -> web.Response:
        return web.json_response({"error": {"code": code, "message": message}}, status=status)

    # ------------------------------------------------------------------ info
    def workers_json(self) -> dict[str, Any]:
        items: list[dict[str, Any]] = [{"id": f"{i:08x}-0000-4000-8000-000000000000", "url": w.url, "model_id": self.model, "priority": 50,
                  "cost": 1.0, "worker_type": w.kind, "is_healthy": w.healthy, "load": w.load,
                  "connection_mode": "HTTP", **({"bootstrap_port": w.bootstrap_port} if w.kind == "prefill" else {}),
                  "metadata": {}, "disable_health_check": False} for i, w in enumerate(self.workers)]
        stats = {f"{k}_count": sum(1 for w in self.workers if w.kind == k) for k in ("prefill", "decode", "regular")}
        return {"workers": items, "total": len(items), "stats": stats}

    def make_app(self) -> web.Application:
        @web.middleware
        async def count(request: web.Request, handler: Any) -> web.StreamResponse:
            t0 = time.perf_counter()
            self.http_req.labels(request.method, request.path).inc()
            try:
                resp = await handler(request)
            except web.HTTPException as exc:
                resp = exc
            code = ""
            self.http_resp.labels(str(resp.status), code).inc()
            self.http_dur.labels(request.method, request.path).observe(time.perf_counter() - t0)
            return resp

        app = web.Application(middlewares=[count], client_max_size=64 * 1024 * 1024)
        for path in ENDPOINTS:
            app.router.add_post(path, self.route)

        async def ok(_: web.Request) -> web.Response:
            return web.Response(text="OK")

        async def readiness(_: web.Request) -> web.Response:
            kinds = ("prefill", "decode") if self.pd else ("regular",)
            healthy = [w for w in self.workers if w.healthy]
            if all(any(w.kind == k for w in healthy) for k in kinds):
                return web.json_response({"status": "ready", "healthy_workers": len(healthy), "total_workers": len(self.workers)})
            return web.json_response({"status": "not ready", "reason": "insufficient healthy workers"}, status=503)

        async def workers(_: web.Request) -> web.Response:
            return web.json_response(self.workers_json())

        async def models(_: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "local"}]})

        async def server_info(_: web.Request) -> web.Response:
            return web.json_response({"router_manager": True, "routers_count": 1, "workers_count": len(self.workers)})

        for path, handler in (("/health", ok), ("/liveness", ok), ("/readiness", readiness), ("/workers", workers),
                              ("/v1/models", models), ("/get_server_info", server_info)):
            app.router.add_get(path, handler)
        return app

    def metrics_app(self) -> web.Application:
        async def metrics(_: web.Request) -> web.Response:
            text = generate_latest(self.registry).decode()
            # 0.3.2's exporter writes no HELP lines
            return web.Response(text="\n".join(x for x in text.splitlines() if not x.startswith("# HELP")) + "\n",
                                content_type="text/plain")

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", metrics)
        return app


async def serve(ns: argparse.Namespace, log: logfmt.LogWriter) -> int:
    router = Router(ns, log)
    metrics_runner = web.AppRunner(router.metrics_app(), access_log=None)
    await metrics_runner.setup()
    try:
        await web.TCPSite(metrics_runner, ns.prometheus_host, ns.prometheus_port).start()
    except OSError as exc:
        log.log(f"FailedToCreateHTTPListener(\"{exc.strerror}\")", level="error")
        await metrics_runner.cleanup()
        return 1
    await router.discover()
    runner = await lifecycle.bind(router.make_app(), ns.host, ns.port, log)
    if runner is None:
        await metrics_runner.cleanup()
        return 1
    health = asyncio.get_running_loop().create_task(router.health_loop())
    stop = lifecycle.install_signal_stop()
    await stop.wait()
    health.cancel()
    await lifecycle.shutdown(runner, log)
    await metrics_runner.cleanup()
    if router.session is not None:
        await router.session.close()
    return 0
