"""Prefill/decode disaggregation (``--disaggregation-mode prefill|decode``) as SGLang 0.5.23 runs it.

A router (simulator/router.py, or SGLang's own) sends one request to a prefill and a decode server
at once with ``bootstrap_host``, ``bootstrap_port`` and ``bootstrap_room``; the client reads the
decode server's answer.

Prefill (srt/disaggregation/prefill.py): the request waits in the bootstrap queue until the decode
server of its room has handshaken, is prefilled with max_new_tokens 1, then waits in the inflight
queue while its KV cache goes to the decode server, holding its KV slots; the prefill server
answers (``finish_reason {"type": "length", "length": 0}``) once the transfer concludes.
Decode (srt/disaggregation/decode.py): the request waits in the prealloc queue for KV slots for
its prompt, handshakes with the prefill server's bootstrap server (``--disaggregation-bootstrap-port``,
default 8998, started by the prefill server), waits in the transfer queue for the KV, then joins
the running batch at the next iteration with the prefill's first token, and decodes. With
``--disaggregation-transfer-backend fake`` a decode server runs alone (SGLang's decode-only test
mode: no bootstrap fields needed, the KV "arrives" at once); a prefill server refuses that backend.

The KV moves over RDMA in SGLang; here the decode server asks the prefill's bootstrap server
over loopback HTTP (``POST /sim_pd/kv``, the simulator's own route beside SGLang's ``/route``
and ``/health``), which answers when the transfer is done. A transfer takes
``SGLANG_SIM_PD_LATENCY_MS`` (default 1 ms) + its bytes at ``SGLANG_SIM_PD_BW_GBS`` (default 25,
one RDMA NIC's share) model seconds; ``--sim-fault slow-transfer=S`` adds S model seconds
(``slow-after`` / ``slow-for`` bound it, as for ``slow-prefill``), ``transfer-fail-every=N`` fails
every Nth transfer (both sides count it in ``num_transfer_failed_reqs_total``; the client gets
SGLang's abort).

Metrics (0.5.23 names and buckets): the queue gauges ``num_prefill_{bootstrap,inflight}_queue_reqs``,
``num_decode_{prealloc,transfer}_queue_reqs``, ``prealloc_full_token_usage``; the prefill side's
per-request ``kv_transfer_{latency_ms,speed_gb_s,total_mb}`` histograms (MiB and GiB, as
req_time_stats.py computes them), both sides' ``kv_transfer_{bootstrap,alloc}_ms``;
``per_stage_req_latency_seconds{stage=...}`` for prefill_bootstrap, prefill_forward,
prefill_transfer_kv_cache, decode_prepare, decode_bootstrap, decode_transferred, decode_waiting,
fake_output;
the failure counters. Every family carries ``engine_type`` prefill or decode.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from aiohttp import ClientSession, ClientTimeout, web

from simulator.request import SimRequest

if TYPE_CHECKING:
    from simulator.llm_server import LlmServer
    from simulator.scheduler import Scheduler

KV_ROUTE = "/sim_pd/kv"
LATENCY_BUCKETS: list[float] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000]
SPEED_BUCKETS: list[float] = [0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400]
SIZE_BUCKETS: list[float] = [1, 5, 10, 50, 100, 500, 1000, 5000, 10000]
SETUP_BUCKETS: list[float] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500]
FAILED_KV = "Failed to get kvcache from prefill instance, it might be dead"
NO_ROOM = "Invalid request: Disaggregated request received without bootstrap room id. req.rid='{rid}'"
HIST: dict[str, tuple[str, list[float]]] = {"kv_transfer_latency_ms": ("Histogram of KV cache transfer latency in ms.", LATENCY_BUCKETS),
        "kv_transfer_speed_gb_s": ("Histogram of KV cache transfer speed in GB/s.", SPEED_BUCKETS),
        "kv_transfer_total_mb": ("Histogram of KV cache transfer size in MB.", SIZE_BUCKETS),
        "kv_transfer_bootstrap_ms": ("Histogram of KV transfer bootstrap time in ms.", SETUP_BUCKETS),
        "kv_transfer_alloc_ms": ("Histogram of KV transfer allocation waiting time in ms.", SETUP_BUCKETS)}
COUNTERS = {"num_bootstrap_failed_reqs_total": "The number of bootstrap failed requests.",
            "num_transfer_failed_reqs_total": "The number of transfer failed requests."}


class Side:
    """What both sides share: the server, its metrics under engine_type prefill|decode."""

    def __init__(self, srv: LlmServer) -> None:
        self.srv = srv

    def observe(self, name: str, value: float, **labels: str) -> None:
        m = self.srv.metrics
        if m is None:
            return
        full = f"sglang:{name}"
        if name == "per_stage_req_latency_seconds":
            m.child(full, **labels).observe(value)
            return
        doc, buckets = HIST[name]
        m.lazy(full, "histogram", doc, self._labels(), buckets)
        m.child(full).observe(value)

    def count_failed(self, name: str) -> None:
        if self.srv.metrics is not None:
            self.srv.metrics.lazy(f"sglang:{name}", "counter", COUNTERS[name], self._labels())
            self.srv.metrics.child(f"sglang:{name}").inc()

    def _labels(self) -> list[str]:
        return [x for x in self.srv.metrics.labels_of["sglang:queue_time_seconds"]] if self.srv.metrics else []

    def stage(self, stage: str, seconds: float) -> None:
        self.observe("per_stage_req_latency_seconds", max(seconds, 0.0), stage=stage)

    def room_of(self, r: SimRequest, room: Any) -> int:
        if room is None or isinstance(room, bool) or not isinstance(room, int):
            from simulator.llm_api import BadRequest

            raise BadRequest(NO_ROOM.format(rid=r.rid))
        return room


class PrefillSide(Side):
    def __init__(self, srv: LlmServer) -> None:
        super().__init__(srv)
        self.bootstrap: dict[int, tuple[SimRequest, Scheduler]] = {}  # rooms waiting for their decode server
        self.handshaken: dict[int, asyncio.Future[dict[str, Any]]] = {}  # decode servers waiting for the KV
        self.inflight = 0
        self.transfers = 0
        self.bw = float(os.environ.get("SGLANG_SIM_PD_BW_GBS", "25")) * 1e9
        self.base_s = float(os.environ.get("SGLANG_SIM_PD_LATENCY_MS", "1")) / 1e3

    def submit(self, r: SimRequest, s: Scheduler, bootstrap: tuple[Any, Any, Any]) -> None:
        r.room = self.room_of(r, bootstrap[2])
        r.max_new_tokens = 1
        r.pd_entry = s.now_model()
        if r.room in self.handshaken:
            self._start(r, s)
        else:
            self.bootstrap[r.room] = (r, s)

    def _start(self, r: SimRequest, s: Scheduler) -> None:
        r.pd_mark = s.now_model()
        self.stage("prefill_bootstrap", r.pd_mark - r.pd_entry)
        self.observe("kv_transfer_bootstrap_ms", (r.pd_mark - r.pd_entry) * 1e3)
        s.submit(r)

    async def handshake(self, request: web.Request) -> web.Response:
        """The decode server of a room asks for its KV; answered when the transfer concludes."""
        body = await request.json()
        room = int(body["room"])
        fut = self.handshaken.setdefault(room, asyncio.get_running_loop().create_future())
        waiting = self.bootstrap.pop(room, None)
        if waiting is not None:
            self._start(*waiting)
        try:
            return web.json_response(await fut)
        finally:
            self.handshaken.pop(room, None)

    def fake(self, r: SimRequest, s: Scheduler) -> None:
        """Warm-up and health requests (SGLang's FAKE_BOOTSTRAP_HOST): prefilled, no peer."""
        r.max_new_tokens = 1
        s.submit(r)

    def on_prefilled(self, r: SimRequest, s: Scheduler) -> None:
        """The prompt is in the KV cache: sample the first token, send the KV, answer after."""
        if r.room < 0:  # a fake-bootstrap request: nothing to send
            s.emit_first(r)
            return
        self.stage("prefill_forward", s.model_time - (r.pd_mark + r.queue_time))
        r.output_ids.append(r.gen.next_id())
        s.tokens_emitted += 1
        self.inflight += 1
        asyncio.get_running_loop().create_task(self._transfer(r, s, s.model_time))

    async def _transfer(self, r: SimRequest, s: Scheduler, start: float) -> None:
        f = self.srv.faults
        self.transfers += 1
        nbytes = len(r.input_ids) * self.srv.cost.kv_bytes_per_token / self.srv.cost.tp
        seconds = self.base_s + nbytes / self.bw + f.slow_transfer_extra_s(s.finished_count)
        await self.srv.msleep(seconds)
        self.inflight -= 1
        failed = bool(f.transfer_fail_every) and self.transfers % int(f.transfer_fail_every or 1) == 0
        fut = self.handshaken.get(r.room)
        if failed:
            self.count_failed("num_transfer_failed_reqs_total")
            why = f"KVTransferError(bootstrap_room={r.room}): {FAILED_KV}"
            self.srv.slog(f"Prefill transfer failed for request rank=0 req.rid='{r.rid}' "
                          f"req.bootstrap_room={r.room} with exception {why}", "warning")
            r.aborted = True
            r.finish_reason = {"type": "abort", "message": why, "status_code": 500, "err_type": None}
        else:
            mib = nbytes / (1024 * 1024)
            self.observe("kv_transfer_latency_ms", seconds * 1e3)
            self.observe("kv_transfer_total_mb", mib)
            self.observe("kv_transfer_speed_gb_s", mib / 1024 / seconds)
            self.observe("kv_transfer_alloc_ms", 0.0)
            self.stage("prefill_transfer_kv_cache", seconds)
            r.finish_reason = {"type": "length", "length": 0}
        s.kv.release(r)
        r.finished = True
        r.first_token_model = r.finish_model = start + seconds
        s.finished_count += 1
        if not failed:
            for hook in (s.on_first, s.on_finish):
                if hook is not None:
                    hook(r)
        r.event.set()
        if fut is not None and not fut.done():
            fut.set_result({"failed": FAILED_KV if failed else None, "token": r.output_ids[-1]})

    def log_extra(self) -> str:
        return f"#bootstrap-req: {len(self.bootstrap)}, #inflight-req: {self.inflight}, #optimistic-req: 0, "

    def gauges(self) -> dict[str, float]:
        return {"num_prefill_bootstrap_queue_reqs": len(self.bootstrap),
                "num_prefill_inflight_queue_reqs": self.inflight}

    def loads(self) -> dict[str, Any]:
        return {"prefill_bootstrap_queue_reqs": len(self.bootstrap),
                "prefill_inflight_queue_reqs": self.inflight}


class DecodeSide(Side):
    def __init__(self, srv: LlmServer) -> None:
        super().__init__(srv)
        self.prealloc: list[SimRequest] = []
        self.transfer: list[SimRequest] = []
        self.session: ClientSession | None = None

    def submit(self, r: SimRequest, s: Scheduler, bootstrap: tuple[Any, Any, Any]) -> None:
        host, port, room = bootstrap
        if self.srv.ns.disaggregation_transfer_backend == "fake":
            self.fake(r, s)  # SGLang's decode-only test mode: no prefill server, the KV "arrives" at once
            return
        r.room = self.room_of(r, room)
        r.pd_entry = s.now_model()
        r.arrival_model = r.pd_entry
        self.stage("decode_prepare", 0.0)
        self.prealloc.append(r)
        addr = f"{host or '127.0.0.1'}:{int(port or self.srv.ns.disaggregation_bootstrap_port)}"
        asyncio.get_running_loop().create_task(self._receive(r, s, addr))

    async def _receive(self, r: SimRequest, s: Scheduler, addr: str) -> None:
        while not r.aborted and not s.kv.alloc(r, len(r.input_ids)):
            await asyncio.sleep(0.005)  # the prealloc queue: KV slots for the prompt
        self.prealloc.remove(r)
        if r.aborted:
            return
        r.pd_mark = s.now_model()
        self.stage("decode_bootstrap", r.pd_mark - r.pd_entry)
        self.observe("kv_transfer_bootstrap_ms", (r.pd_mark - r.pd_entry) * 1e3)
        self.observe("kv_transfer_alloc_ms", 0.0)
        self.transfer.append(r)
        failed: str | None = None
        try:
            if self.session is None:
                self.session = ClientSession(timeout=ClientTimeout(total=float(
                    os.environ.get("SGLANG_DISAGGREGATION_WAITING_TIMEOUT", "300"))))
            async with self.session.post(f"http://{addr}{KV_ROUTE}", json={"room": r.room}) as resp:
                answer = await resp.json()
            failed = answer.get("failed")
        except Exception:  # the prefill server is gone or stalled: SGLang's decode gives up alike
            failed = FAILED_KV
        self.transfer.remove(r)
        if failed:
            self.count_failed("num_transfer_failed_reqs_total")
            why = f"KVTransferError(bootstrap_room={r.room}): {failed}"
            self.srv.slog(f"Decode transfer failed for request rank=0 decode_req.req.rid='{r.rid}' "
                          f"decode_req.req.bootstrap_room={r.room} with exception {why}", "error")
            s.kv.release(r)
            r.aborted = r.finished = True
            r.finish_model = s.now_model()
            r.finish_reason = {"type": "abort", "message": why, "status_code": 500, "err_type": None}
            r.event.set()
            return
        now = s.now_model()
        self.stage("decode_transferred", now - r.pd_mark)
        r.filled, r.admitted, r.target = len(r.input_ids), True, list(r.input_ids)
        r.queue_start_model = now
        s.prebuilt.append(r)
        s.wake()

    def fake(self, r: SimRequest, s: Scheduler) -> None:
        """Warm-up and health requests: SGLang's fake receiver has the KV "arrive" at once."""
        if not s.kv.alloc(r, len(r.input_ids)):
            s.submit(r)
            return
        r.arrival_model = r.queue_start_model = s.now_model()
        r.filled, r.admitted, r.target = len(r.input_ids), True, list(r.input_ids)
        s.prebuilt.append(r)
        s.wake()

    def on_prefilled(self, r: SimRequest, s: Scheduler) -> None:
        """A request the decode server prefills itself (one it retracted): on as usual."""
        s.emit_first(r)

    def admit(self, s: Scheduler) -> None:
        """The scheduler's iteration start: transferred requests join the running batch with the
        prefill's first token (decode_waiting: waiting queue to this forward)."""
        for r in s.prebuilt:
            r.queue_time = s.model_time - r.queue_start_model
            if r.room >= 0:
                self.stage("decode_waiting", r.queue_time)
                self.stage("fake_output", 0.0)  # the prebuilt batch hands out the prefill's token at once
            s.emit_first(r)
        s.prebuilt.clear()

    def log_extra(self) -> str:
        return (f"pre-allocated usage: {self._prealloc_usage():.2f}, #prealloc-req: {len(self.prealloc)}, "
                f"#transfer-req: {len(self.transfer)}, #retracted-req: 0, ")

    def _prealloc_usage(self) -> float:
        pool = self.srv.pool_tokens or 1
        return sum(len(r.input_ids) for r in self.transfer) / pool

    def gauges(self) -> dict[str, float]:
        return {"num_decode_prealloc_queue_reqs": len(self.prealloc),
                "num_decode_transfer_queue_reqs": len(self.transfer),
                "prealloc_full_token_usage": self._prealloc_usage()}

    def loads(self) -> dict[str, Any]:
        return {"decode_prealloc_queue_reqs": len(self.prealloc),
                "decode_transfer_queue_reqs": len(self.transfer), "decode_retracted_queue_reqs": 0}


def make_side(srv: LlmServer) -> PrefillSide | DecodeSide | None:
    mode = srv.ns.disaggregation_mode
    return PrefillSide(srv) if mode == "prefill" else DecodeSide(srv) if mode == "decode" else None


async def start_bootstrap_server(side: PrefillSide, host: str, port: int) -> web.AppRunner:
    """The prefill server's bootstrap server (CommonKVBootstrapServer): /health, and the KV route."""
    app = web.Application()

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="OK")

    app.router.add_get("/health", health)
    app.router.add_post(KV_ROUTE, side.handshake)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    side.srv.slog(f"CommonKVBootstrapServer started successfully on {host}:{port}")
    return runner


def engine_type(mode: str | None) -> str:
    return mode if mode in ("prefill", "decode") else "unified"

