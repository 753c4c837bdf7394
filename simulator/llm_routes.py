"""aiohttp handlers of the LLM server (shapes in llm_api, state in llm_server/scheduler)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from simulator import grammar, lifecycle, llm_api, reqlog, tokenizer
from simulator.llm_api import json_response
from simulator.scheduler import SimRequest

if TYPE_CHECKING:
    from simulator.llm_server import LlmServer

FLUSH_TEXT = ("Cache flushed.\nPlease check backend logs for more details. (When there are "
              "running or waiting requests, the operation will not be performed.)\n")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# /model_info "embedding" block of a generative (non-embedding) model, as 0.5.23 reports it.
EMBEDDING_INFO: dict[str, Any] = {
    "family": "none", "task": "none", "execution": "none", "attention": "none",
    "pooling": "model_defined", "normalize": False, "postprocessor": "none",
    "tokenizer_special_tokens": "model_default", "supports_dimensions": False,
    "supports_token_embeddings": False, "supports_multimodal": False,
    "requires_embedding_flag": False, "auto_enable_embedding": False,
    "bcg_eligibility": "disabled", "safe_disable_kv_cache": False,
    "safe_disable_radix_cache": False, "safe_disable_chunked_prefill": False, "enabled": False,
    "matryoshka_dimensions": [], "cache": {"kv_cache_disabled": False,
                                           "radix_cache_disabled": False,
                                           "chunked_prefill_disabled": False}}


async def _json_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read() or b"{}")
    except ValueError:
        raise llm_api.BadRequest("The request body is not valid JSON.") from None


async def _next(r: SimRequest) -> None:
    await r.event.wait()
    r.event.clear()


def _sse_response() -> web.StreamResponse:
    return web.StreamResponse(status=200, headers={
        "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"})


def add_routes(app: web.Application, srv: LlmServer) -> None:
    ns = srv.ns

    def abort(r: SimRequest) -> None:
        if r.finished or r.aborted:
            return
        r.aborted = True
        srv.log.log("Request is disconnected from the client side (type 1). Abort request "
                    f"obj.rid={r.rid!r}")

    export = (reqlog.MetricsExport(ns.export_metrics_to_file_dir, ns.log_requests_level if ns.log_requests else 3)
              if ns.export_metrics_to_file else None)
    logged: dict[str, dict[str, Any]] = {}  # rid -> the obj fields the request log prints

    def log_receive(r: SimRequest, it: llm_api.GenInput) -> None:
        values = {"rid": r.rid, "text": it.text, **(it.logged or {})}
        if ns.log_requests or export is not None:
            logged[r.rid] = values
        if ns.log_requests:
            srv.log.raw(reqlog.prefix() + reqlog.receive_line(values, ns.log_requests_level))

    def log_finish(r: SimRequest, _out: dict[str, Any] | None = None) -> None:
        values = logged.pop(r.rid, None)
        if values is None:
            return
        out = native_out(r)  # what the tokenizer manager holds, whichever API answered
        if ns.log_requests:
            srv.log.raw(reqlog.prefix() + reqlog.finish_line(values, out, ns.log_requests_level))
        if export is not None:
            export.write(values, out["meta_info"])

    def wall(r: SimRequest, model_t: float) -> float:
        """Epoch seconds of a model-clock instant of this request."""
        return r.arrival_wall + (model_t - r.arrival_model) / srv.speed

    def native_meta(r: SimRequest, n: int, first: bool = False) -> dict[str, Any]:
        done = r.finished and n >= len(r.output_ids)
        e2e = (r.finish_model or 0.0) - r.arrival_model if done else None
        timing = final_timing = None
        if ns.enable_metrics:
            entry = r.arrival_model + r.queue_time
            ttft = (r.first_token_model or entry) - r.arrival_model
            timing = {"forward_entry_time": wall(r, entry),
                      "prefill_finished_time": wall(r, r.first_token_model or entry),
                      "queue_time": r.queue_time}
            if done:
                fin = r.finish_model or entry
                final_timing = {
                    "request_received_ts": r.arrival_wall, "first_token_latency": ttft,
                    "api_server_dispatch_finish_ts": r.arrival_wall + 0.001}
                if r.stream:  # stamped when the first chunk went out, so it comes before the finish
                    final_timing["response_sent_to_client_ts"] = wall(r, r.first_token_model or fin)
                final_timing["request_finished_ts"] = wall(r, fin)
                final_timing["decode_throughput"] = ((n - 1) / (fin - (r.first_token_model or fin))
                                                     if n > 1 and fin > (r.first_token_model or fin) else 0.0)
                if not r.stream:  # stamped just before the answer is sent: last
                    final_timing["response_sent_to_client_ts"] = wall(r, fin)
            elif first:
                final_timing = {"response_sent_to_client_ts": time.time()}
        return llm_api.meta_info(
            rid=r.rid, prompt_tokens=len(r.input_ids), completion_tokens=n,
            cached_tokens=r.cached_tokens, finish_reason=r.finish_reason if done else None,
            num_retractions=r.num_retractions, final=done, e2e_latency=e2e, timing=timing,
            final_timing=final_timing, host_cached=r.host_cached)

    def native_out(r: SimRequest) -> dict[str, Any]:
        ids = r.output_ids
        return {"text": tokenizer.decode(ids), "output_ids": list(ids),
                "meta_info": native_meta(r, len(ids))}

    def finish_of(r: SimRequest) -> str:
        return str((r.finish_reason or {}).get("type", "length"))

    def bad(msg: str, openai: bool) -> web.Response:
        if openai:
            return json_response(llm_api.openai_error(msg), status=400)
        return json_response({"error": {"message": msg}}, status=400)

    async def compiled(key: tuple[str, str]) -> grammar.Grammar:
        """The grammar of `key`: compiled once (the cost slept on first use, concurrent first
        users share it), failures cached too; raises GrammarError with SGLang's message."""
        if ns.grammar_backend == "none":
            raise grammar.GrammarError(
                "Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not "
                "supported when the server is launched with --grammar-backend none")
        cache = srv.grammars
        got = cache.done.get(key)
        if got is None:
            if key not in cache.pending:
                cache.pending[key] = asyncio.ensure_future(compile_now(key))
            got = await asyncio.shield(cache.pending[key])
        if isinstance(got, grammar.GrammarError):
            raise got
        assert got is not None
        return got

    async def compile_now(key: tuple[str, str]) -> grammar.Grammar | grammar.GrammarError:
        await asyncio.sleep(grammar.compile_cost_s(key) / srv.speed)
        try:
            got: grammar.Grammar | grammar.GrammarError = grammar.Grammar(key)
        except grammar.GrammarError as exc:
            srv.log.log(f"Hit invalid {key[0]}: key_string={key[1]!r}, e={exc!r}", level="error")
            got = exc
        srv.grammars.done[key] = got
        srv.grammars.pending.pop(key, None)
        return got

    async def attach_grammars(items: list[llm_api.GenInput]) -> None:
        for it in items:
            if it.grammar_key is not None:
                it.grammar = await compiled(it.grammar_key)

    def abort_chunk(it: llm_api.GenInput, message: str) -> bytes:
        """SGLang's /generate stream form of a refused grammar: one chunk whose finish_reason is
        an abort carrying status_code 400 (tokenizer_manager._handle_abort_finish_reason)."""
        fin = {"type": "abort", "message": message, "status_code": 400,
               "err_type": "BadRequestError"}
        meta = llm_api.meta_info(rid=it.rid or uuid.uuid4().hex, prompt_tokens=len(it.input_ids),
                                 completion_tokens=0, cached_tokens=0, finish_reason=fin,
                                 num_retractions=0, final=True)
        return llm_api.sse({"text": "", "output_ids": [], "meta_info": meta})

    async def refuse_stream(request: web.Request, chunk: bytes) -> web.StreamResponse:
        resp = _sse_response()
        await resp.prepare(request)
        lifecycle.log_access(srv.log, request, 200)
        await resp.write(chunk)
        await resp.write(llm_api.SSE_DONE)
        return resp

    async def stream_one(resp: web.StreamResponse, r: SimRequest) -> None:
        """Hot path of a single /generate stream (the 256-stream benchmark runs here)."""
        sent, text, ids_json = 0, "", ""
        cut: tuple[int, str, str] | None = None  # (num_retractions, head, tail) of meta JSON
        interval = ns.stream_interval
        while True:
            await r.event.wait()
            r.event.clear()
            n = len(r.output_ids)
            if r.finished or n - sent >= interval:
                new_ids = r.output_ids[sent:n]
                text += tokenizer.decode(new_ids)
                if new_ids:
                    frag = ",".join(map(str, new_ids))
                    ids_json = f"{ids_json},{frag}" if ids_json else frag
                if r.finished or sent == 0:
                    meta = llm_api.compact_dumps(native_meta(r, n, first=sent == 0))
                else:
                    if cut is None or cut[0] != r.num_retractions:
                        cut = (r.num_retractions, *llm_api.split_meta_json(native_meta(r, n)))
                    meta = f"{cut[1]}{n}{cut[2]}"
                await resp.write(llm_api.native_chunk(text=text, ids_json=ids_json,
                                                      meta_json=meta, index=None))
                sent = n
            if r.finished:
                log_finish(r, native_out(r))
                return

    async def generate(request: web.Request) -> web.StreamResponse:
        try:
            items, batch, stream = llm_api.parse_generate(await _json_body(request))
            await attach_grammars(items)
            reqs = [srv.new_request(it, stream=stream)[0] for it in items]
        except llm_api.BadRequest as exc:
            return bad(str(exc), False)
        except grammar.GrammarError as exc:
            srv.log.log(f"{exc}, self.rid={items[0].rid!r}", level="error")
            if stream:
                return await refuse_stream(request, abort_chunk(items[0], str(exc)))
            return bad(str(exc), False)
        for r, it in zip(reqs, items, strict=True):
            log_receive(r, it)
        if not stream:
            for r in reqs:
                while not r.finished:
                    await _next(r)
            outs = [native_out(r) for r in reqs]
            for r, o in zip(reqs, outs, strict=True):
                log_finish(r, o)
            return json_response(outs if batch else outs[0])
        resp = _sse_response()
        await resp.prepare(request)
        lifecycle.log_access(srv.log, request, 200)
        sent = [0] * len(reqs)
        # Cumulative text/ids are kept as ready-made JSON fragments so a chunk costs O(new
        # tokens), not O(all tokens): 256 streams x 256 tokens must stay cheap on one core.
        texts = [""] * len(reqs)
        ids_json = [""] * len(reqs)
        try:
            if not batch:
                await stream_one(resp, reqs[0])
                await resp.write(llm_api.SSE_DONE)
                return resp
            pending = set(range(len(reqs)))
            while pending:
                if len(reqs) == 1:
                    await _next(reqs[0])
                else:
                    waits = {asyncio.ensure_future(_next(reqs[i])) for i in pending}
                    _, rest = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    for t in rest:
                        t.cancel()
                for i in list(pending):
                    r = reqs[i]
                    n = len(r.output_ids)
                    if r.finished or n - sent[i] >= ns.stream_interval:
                        new_ids = r.output_ids[sent[i]:n]
                        texts[i] += tokenizer.decode(new_ids)
                        if new_ids:
                            frag = ",".join(map(str, new_ids))
                            ids_json[i] = f"{ids_json[i]},{frag}" if ids_json[i] else frag
                        meta = llm_api.compact_dumps(native_meta(r, n, first=sent[i] == 0))
                        await resp.write(llm_api.native_chunk(
                            text=texts[i], ids_json=ids_json[i], meta_json=meta,
                            index=i if batch else None))
                        sent[i] = n
                    if r.finished:
                        pending.discard(i)
                        log_finish(r, native_out(r))
            await resp.write(llm_api.SSE_DONE)
        except (ConnectionError, asyncio.CancelledError):
            for r in reqs:
                abort(r)
            raise
        return resp

    async def openai(request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            inp, stream, include_usage, model = llm_api.parse_openai(await _json_body(request),
                                                                     chat=chat)
            await attach_grammars([inp])
            r = srv.new_request(inp, stream=stream)[0]
        except llm_api.BadRequest as exc:
            return bad(str(exc), True)
        except grammar.GrammarError as exc:
            srv.log.log(f"{exc}, self.rid={inp.rid!r}", level="error")
            if stream:  # serving_chat: an error chunk (type = the status name), then [DONE]
                err = llm_api.openai_error(str(exc)) | {"type": "BAD_REQUEST"}
                return await refuse_stream(request, llm_api.sse({"error": err}))
            return bad(str(exc), True)
        log_receive(r, inp)
        name = model if isinstance(model, str) and model else srv.model_name  # echoed, as SGLang
        report = ns.enable_cache_report

        def use() -> dict[str, Any]:
            return llm_api.usage(len(r.input_ids), len(r.output_ids), r.cached_tokens, report,
                                 chat=chat)

        if not stream:
            while not r.finished:
                await _next(r)
            out = llm_api.completion_obj(rid=r.rid, model=name,
                                         text=tokenizer.decode(r.output_ids), finish=finish_of(r),
                                         use=use(), chat=chat, chunk=False)
            log_finish(r, out)
            return json_response(out)
        resp = _sse_response()
        await resp.prepare(request)
        lifecycle.log_access(srv.log, request, 200)
        sent = 0
        try:
            if chat:
                await resp.write(llm_api.sse(llm_api.completion_obj(
                    rid=r.rid, model=name, text="", finish=None, use=None, chat=True,
                    chunk=True, first=True)))
            while True:
                await _next(r)
                n = len(r.output_ids)
                if n > sent and (n - sent >= ns.stream_interval or r.finished):
                    await resp.write(llm_api.sse(llm_api.completion_obj(
                        rid=r.rid, model=name, text=tokenizer.decode(r.output_ids[sent:n]),
                        finish=None, use=None, chat=chat, chunk=True)))
                    sent = n
                if r.finished:
                    break
            await resp.write(llm_api.sse(llm_api.completion_obj(
                rid=r.rid, model=name, text="", finish=finish_of(r), use=None, chat=chat,
                chunk=True)))
            if include_usage:
                await resp.write(llm_api.sse(llm_api.usage_chunk(rid=r.rid, model=name,
                                                                 use=use(), chat=chat)))
            await resp.write(llm_api.SSE_DONE)
            log_finish(r, {"usage": use()})
        except (ConnectionError, asyncio.CancelledError):
            abort(r)
            raise
        return resp

    async def completions(request: web.Request) -> web.StreamResponse:
        return await openai(request, chat=False)

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        return await openai(request, chat=True)

    async def health(request: web.Request) -> web.StreamResponse:
        if not srv.ready:
            return web.Response(status=503)
        loop = asyncio.get_running_loop()
        tic_wall = time.time()
        before = sum(s.tokens_emitted for s in srv.schedulers)
        r, _ = srv.new_request(llm_api.GenInput([0], None, 1, None,
                                                f"HEALTH_CHECK_{time.time()}"),
                               stream=False, is_health=True)
        deadline = loop.time() + srv.health_timeout / srv.speed
        while loop.time() < deadline:
            if r.finished or sum(s.tokens_emitted for s in srv.schedulers) > before:
                r.aborted = not r.finished
                return web.Response(status=200)
            await asyncio.sleep(min(0.02, srv.health_timeout / srv.speed / 50))
        r.aborted = True
        srv.log.log(
            f"Health check failed. Server couldn't get a response from detokenizer for last "
            f"{srv.health_timeout:g} seconds. tic start time: "
            f"{time.strftime('%H:%M:%S', time.localtime(tic_wall))}. last_heartbeat time: "
            f"{time.strftime('%H:%M:%S', time.localtime(tic_wall))}", level="error")
        return web.Response(status=503)

    async def server_info(request: web.Request) -> web.StreamResponse:
        return json_response(srv.server_info())

    def model_info_obj() -> dict[str, Any]:
        return {"model_path": ns.model_path, "tokenizer_path": ns.tokenizer_path or ns.model_path,
                "is_generation": True, "preferred_sampling_params": None,
                "weight_version": "default", "has_image_understanding": False,
                "has_audio_understanding": False, "model_type": "llama",
                "architectures": [srv.cost.shape.arch], "served_model_name": srv.model_name,
                "load_format": ns.load_format, "reasoning_parser": None,
                "tool_call_parser": None, "disaggregation_mode": ns.disaggregation_mode,
                "embedding": EMBEDDING_INFO}

    async def model_info(request: web.Request) -> web.StreamResponse:
        return json_response(model_info_obj())

    async def get_model_info(request: web.Request) -> web.StreamResponse:
        srv.log.log("Endpoint '/get_model_info' is deprecated and will be removed in a future "
                    "version. Please use '/model_info' instead.", level="warning")
        return json_response(model_info_obj())

    async def models(request: web.Request) -> web.StreamResponse:
        return json_response({"object": "list", "data": [{
            "id": srv.model_name, "object": "model", "created": int(srv.started_at),
            "owned_by": "sglang", "root": srv.model_name, "parent": None,
            "max_model_len": srv.context_len}]})

    async def loads(request: web.Request) -> web.StreamResponse:
        out = []
        now = time.time()
        for dp, s in enumerate(srv.schedulers):
            waiting_unc = sum(len(r.target) for r in s.waiting)
            out.append({
                "timestamp": now, "dp_rank": dp, "num_running_reqs": len(s.running),
                "num_waiting_reqs": len(s.waiting), "num_waiting_uncached_tokens": waiting_unc,
                "num_used_tokens": s.num_used(), "num_total_tokens": s.kv.used(),
                "num_active_tokens": s.num_used(), "num_prealloc_ready_tokens": 0,
                "max_total_num_tokens": s.pool, "max_running_requests": srv.max_running,
                "token_usage": round(s.token_usage(), 4),
                "gen_throughput": round(s.last_gen_throughput, 2),
                "cache_hit_rate": round(s.last_cache_hit_rate, 4),
                "utilization": 1.0 if s.running else 0.0,
                "total_prefill_uncached_tokens": s.prefill_tokens_total,
                "total_prefill_busy_us": int(s.prefill_busy_s * 1e6),
                "decode_moments": s.decode_moments(),
                "memory": {"weight_gb": round(srv.cost.weight_bytes / srv.cost.tp / 1e9, 3),
                           "kv_cache_gb": round(srv.pool_tokens * srv.cost.kv_bytes_per_token
                                                / srv.cost.tp / 1e9, 3),
                           "graph_gb": 0.45 if srv.cost.cuda_graph else 0.0,
                           "token_capacity": srv.pool_tokens},
                "disaggregation": {"mode": ns.disaggregation_mode, "prefill_bootstrap_queue_reqs": 0,
                                   "prefill_inflight_queue_reqs": 0,
                                   "decode_prealloc_queue_reqs": 0,
                                   "decode_transfer_queue_reqs": 0,
                                   "decode_retracted_queue_reqs": 0,
                                   "kv_transfer_speed_gb_s": 0.0, "kv_transfer_latency_ms": 0.0,
                                   **(srv.pd.loads() if srv.pd is not None else {})},
                "queues": {"waiting": len(s.waiting), "grammar": 0, "paused": 0,
                           "retracted": sum(1 for r in s.waiting if r.num_retractions),
                           "prealloc_ready": 0}})
        want = request.query.get("dp_rank")
        if want is not None and want.isdigit():
            out = [x for x in out if x["dp_rank"] == int(want)]
        return json_response({
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
            + f".{int(now * 1e6) % 1000000:06d}+00:00",
            "version": ns.sim_version, "accelerator": None,
            "num_accelerators": ns.tp_size * ns.dp_size, "loads": out})

    async def ping(request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    async def ready(request: web.Request) -> web.StreamResponse:
        return web.Response(status=200 if srv.ready else 503)

    async def freeze_gc(request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    async def flush_cache(request: web.Request) -> web.StreamResponse:
        ok = all(s.flush_cache() for s in srv.schedulers)
        if ok:
            srv.log.log("Cache flushed successfully!", tags=srv.tags(0))
        else:
            srv.log.log("Cache not flushed because there are pending requests. "
                        f"#queue-req: {sum(len(s.waiting) for s in srv.schedulers)}, "
                        f"#running-req: {sum(len(s.running) for s in srv.schedulers)}",
                        level="warning", tags=srv.tags(0))
        return web.Response(text=FLUSH_TEXT, status=200 if ok else 400)

    async def metrics(request: web.Request) -> web.StreamResponse:
        if srv.metrics is None:
            return json_response({"detail": "Not Found"}, status=404)
        for s in srv.schedulers:
            srv._on_stats(s)
        return web.Response(body=srv.metrics.render(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    r = app.router
    for path in ("/health", "/health_generate"):
        r.add_get(path, health)
    for path in ("/server_info", "/get_server_info"):
        r.add_get(path, server_info)
    r.add_get("/model_info", model_info)
    r.add_get("/get_model_info", get_model_info)
    r.add_get("/v1/models", models)
    r.add_get("/v1/loads", loads)
    r.add_get("/flush_cache", flush_cache)
    r.add_post("/flush_cache", flush_cache)
    r.add_get("/metrics", metrics)
    r.add_post("/generate", generate)
    r.add_put("/generate", generate)
    r.add_post("/v1/completions", completions)
    r.add_post("/v1/chat/completions", chat_completions)
    r.add_get("/ping", ping)
    r.add_get("/ready", ready)
    r.add_post("/freeze_gc", freeze_gc)
