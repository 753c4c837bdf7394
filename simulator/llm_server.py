"""The LLM server: settings resolution, startup log, HTTP routes, metrics wiring.

Routes (0.5.23): /health, /health_generate, /server_info, /get_server_info, /model_info,
/get_model_info, /v1/models, /v1/loads, /flush_cache, /metrics (with --enable-metrics),
/generate, /v1/completions, /v1/chat/completions.

/health and /health_generate answer 503 until the server is ready, then run a 1-token generation
(input_ids [0]) and answer 200 once it (or any other request) makes progress within
SGLANG_HEALTH_CHECK_TIMEOUT (default 20) model seconds, else 503 and the ``Health check failed``
log line.

Resolved settings (printed in the ``max_total_num_tokens=...`` startup line): pool tokens from
costmodel (capped by --max-total-tokens); max_running_requests default min(pool/2, 4096);
chunked_prefill_size default per GPU (costmodel.GPUS); context_len default 131072; DP ranks are
independent schedulers fed round-robin. Startup takes --sim-startup-s model seconds (default
weights/tp at 5 GB/s + 2 s): 60 % weight loading, 40 % CUDA-graph capture.

Speculative decoding (`--speculative-algorithm` EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM;
`SGLANG_SIM_SPEC_ACCEPT` sets the chance a draft is accepted): simulator/speculative.py.

Not modelled: PD disaggregation, LoRA, stop strings/EOS (every request runs
to max_new_tokens, finish_reason ``length``), the --enable-metrics timing fields of meta_info,
/v1/loads ``include``/``format`` options.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import functools
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, web

from simulator import cache_metrics, dcgm, grammar, hicache, lifecycle, llm_api, logfmt, tokenizer
from simulator import disagg as pdmod
from simulator import faults as faultmod
from simulator.costmodel import GIB, CostModel, infer_params, make_cost_model, parse_params
from simulator.gpu_activity import Activity
from simulator.metrics import LlmMetrics
from simulator.scheduler import SchedConfig, Scheduler, SimRequest

CUDA_CONTEXT_GIB = 0.6  # what the startup line's "avail mem" leaves out of the card's memory
# ServerArgs field set and defaults of 0.5.23 (see the file's "_about").
SERVER_ARGS: dict[str, Any] = json.loads(
    (Path(__file__).with_name("sglang_0_5_23_server_args.json")).read_text())


class LlmServer:
    def __init__(self, ns: argparse.Namespace, log: logfmt.LogWriter) -> None:
        self.ns = ns
        self.log = log
        self.faults = faultmod.parse_faults(ns.sim_fault)
        params = (parse_params(ns.sim_model_params) if ns.sim_model_params else None) \
            or infer_params(ns.model_path)
        graph_bs = ns.cuda_graph_max_bs_decode or 256
        self.cost: CostModel = make_cost_model(
            gpu=ns.sim_gpu, params=params, tp=ns.tp_size, quantization=ns.quantization,
            kv_cache_dtype=ns.kv_cache_dtype, cuda_graph=not ns.disable_cuda_graph,
            cuda_graph_max_bs=graph_bs, torch_compile=ns.enable_torch_compile,
            torch_compile_max_bs=ns.torch_compile_max_bs)
        self.mem_fraction = ns.mem_fraction_static or (0.88 if ns.tp_size == 1 else 0.85)
        self.pool_tokens = self.cost.kv_pool_tokens(self.mem_fraction)
        if ns.max_total_tokens:
            self.pool_tokens = min(self.pool_tokens, ns.max_total_tokens)
        self.context_len = ns.context_length or 131072
        self.max_running = ns.max_running_requests or max(min(self.pool_tokens // 2, 4096), 1)
        self.chunk = ns.chunked_prefill_size or self.cost.gpu.chunked_prefill_size
        self.model_name = ns.served_model_name or ns.model_path
        self.speed = ns.sim_speed
        self.grammars = grammar.GrammarCache()
        self.ready = False
        self.started_at = time.time()
        self.metrics = LlmMetrics(model_name=self.model_name, dp_size=ns.dp_size,
                                  ttft_buckets=ns.bucket_time_to_first_token,
                                  itl_buckets=ns.bucket_inter_token_latency,
                                  e2e_buckets=ns.bucket_e2e_request_latency,
                                  version=ns.sim_version, priority=ns.enable_priority_scheduling,
                                  engine_type=pdmod.engine_type(ns.disaggregation_mode)) if ns.enable_metrics else None
        self.pd = pdmod.make_side(self)
        self.schedulers: list[Scheduler] = []
        self._rr = 0
        self.health_timeout = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
        self.load_s = 0.0
        self.graph_bs: list[int] = []
        self.after_pool_gib = 0.0
        self.fb_used_bytes = CUDA_CONTEXT_GIB * GIB  # per GPU; grows as startup loads
        self.activities = [Activity(self.cost.gpu, dcgm.CARDS[ns.sim_gpu][0], self._clock)
                           for _ in range(ns.dp_size)]

    # ------------------------------------------------------------------ helpers
    def tags(self, dp: int, tp: int = 0) -> str:
        return logfmt.rank_tags(dp_rank=dp if self.ns.dp_size > 1 else None, tp_rank=tp,
                                tp_size=self.ns.tp_size)

    def slog(self, msg: str, level: str = "info", dp: int = 0, tp: int = 0) -> None:
        self.log.log(msg, level=level, tags=self.tags(dp, tp))

    def all_ranks(self, msg: str) -> None:
        """Startup lines: every scheduler process (each DP x TP rank) prints its own."""
        for dp in range(self.ns.dp_size):
            for tp in range(self.ns.tp_size):
                self.slog(msg, dp=dp, tp=tp)

    async def msleep(self, model_s: float) -> None:
        await asyncio.sleep(model_s / self.speed)

    def _clock(self) -> float:
        """Model seconds on the wall clock (the rate every scheduler's clock runs at)."""
        return time.monotonic() * self.speed

    async def start_exporter(self) -> web.AppRunner | None:
        """The dcgm-exporter look-alike, when SGLANG_SIM_DCGM_PORT is set (simulator/dcgm.py)."""
        if self.ns.sim_dcgm_port is None:
            return None
        groups = [dcgm.GpuGroup(a, self.ns.tp_size, lambda: self.fb_used_bytes)
                  for a in self.activities]
        return await dcgm.start(self.ns.host, self.ns.sim_dcgm_port, groups,
                                sim_gpu=self.ns.sim_gpu, seed=self.ns.sim_seed)

    def fatal(self, kind: str, detail: str, dp: int = 0) -> None:
        """Scheduler crash paths; see faults.py. Runs the death asynchronously for NCCL."""
        gib = self.cost.gpu.memory_bytes / GIB
        if kind == "nccl":
            asyncio.get_running_loop().create_task(self._nccl_death())
            return
        if kind == "oom":
            exc = ("torch.OutOfMemoryError", f"CUDA out of memory. Tried to allocate 2.00 GiB. "
                   f"GPU 0 has a total capacity of {gib:.2f} GiB of which 1.06 GiB is free. "
                   f"Including non-PyTorch memory, this process has {gib - 1.06:.2f} GiB memory "
                   f"in use. Of the allocated memory {gib - 4.2:.2f} GiB is allocated by PyTorch, "
                   f"and 2.13 GiB is reserved by PyTorch but unallocated. If reserved but "
                   f"unallocated memory is large try setting "
                   f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
                   f"See documentation for Memory Management  "
                   f"(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
        elif kind == "decode_oom":
            exc = ("RuntimeError", "Decode out of memory. Try to lower your batch size.")
        elif kind == "startup_oom":
            exc = ("RuntimeError", "Not enough memory. Please try to increase "
                   f"--mem-fraction-static. Current value: mem_fraction_static={detail}")
        else:
            exc = ("RuntimeError", "CUDA error: an illegal memory access was encountered\n"
                   "CUDA kernel errors might be asynchronously reported at some other API call, "
                   "so the stacktrace below might be incorrect.\n"
                   "For debugging consider passing CUDA_LAUNCH_BLOCKING=1")
        tb = faultmod.traceback_text(exc[0], exc[1], faultmod.SCHED_FRAMES)
        self.slog(f"Scheduler hit an exception: {tb}", level="error", dp=dp)
        lifecycle.die(self.log)

    def _fatal_at(self, dp: int, kind: str, detail: str) -> None:
        self.fatal(kind, detail, dp)

    async def _nccl_death(self) -> None:
        await self.msleep(faultmod.NCCL_HANG_MODEL_S)
        ts = time.strftime("%m%d %H:%M:%S")
        for line in faultmod.nccl_watchdog_lines(seq=4000 + self.schedulers[0].decode_ct, ts=ts):
            self.log.raw(line)
        lifecycle.die(self.log)

    # ------------------------------------------------------------------ startup
    async def startup(self) -> int:
        ns, c = self.ns, self.cost
        gib_total = c.gpu.memory_bytes / GIB
        weights_gib = c.weight_bytes / c.tp / GIB
        load_s = ns.sim_startup_s if ns.sim_startup_s is not None else \
            c.weight_bytes / c.tp / 5e9 + 2.0
        self.load_s = load_s
        exporter = await self.start_exporter()
        self.log.log(f"server_args={self.server_args_dict()!r}")
        if ns.disable_cuda_graph:
            self.log.log("The command line argument '--disable-cuda-graph' is deprecated and "
                         "will be removed in a future release. Please use "
                         "'--cuda-graph-backend-decode disabled' instead.", level="warning")
        avail = gib_total - 0.6
        self.all_ranks(f"Load weight begin. avail mem={avail:.2f} GB")
        await self.msleep(load_s * 0.6)
        if self.faults.crash_at_start:
            self.fatal("crash", "")
            return 1
        self.fb_used_bytes += c.weight_bytes / c.tp
        self.all_ranks(f"Load weight end. elapsed={load_s * 0.6:.2f} s, type={c.shape.arch}, "
                       f"avail mem={avail - weights_gib:.2f} GB, mem usage={weights_gib:.2f} GB.")
        if self.pool_tokens <= 0:
            self.fatal("startup_oom", f"{self.mem_fraction}")
            return 1
        kv_gib = self.pool_tokens * c.kv_bytes_per_token / c.tp / GIB
        after_pool = avail - weights_gib - kv_gib
        self.after_pool_gib = after_pool
        self.fb_used_bytes += kv_gib * GIB
        kv_dtype = "torch.float8_e5m2" if c.kv_dtype_bytes == 1 else "torch.bfloat16"
        self.all_ranks(f"KV Cache is allocated. dtype: {kv_dtype}, #tokens: {self.pool_tokens}, "
                       f"K size: {kv_gib / 2:.2f} GB, V size: {kv_gib / 2:.2f} GB")
        self.all_ranks(f"Memory pool end. avail mem={after_pool:.2f} GB")
        if c.cuda_graph:
            bs = [b for b in (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160,
                              192, 224, 256, 320, 384, 448, 512) if b <= c.cuda_graph_max_bs]
            self.graph_bs = bs
            self.all_ranks(f"Capture target decode CUDA graph begin. backend=full, bs={bs}, "
                           f"avail mem={after_pool:.2f} GB")
            await self.msleep(load_s * 0.4)
            self.all_ranks(f"Capture target decode CUDA graph end. elapsed={load_s * 0.4:.2f} s, "
                           f"mem usage=0.45 GB, avail mem={after_pool - 0.45:.2f} GB.")
            after_pool -= 0.45
            self.fb_used_bytes += 0.45 * GIB
        else:
            await self.msleep(load_s * 0.4)
        self.all_ranks(f"max_total_num_tokens={self.pool_tokens}, chunked_prefill_size="
                       f"{self.chunk}, max_prefill_tokens={ns.max_prefill_tokens}, "
                       f"max_running_requests={self.max_running}, "
                       f"context_len={self.context_len}, available_gpu_mem={after_pool:.2f} GB")
        self._start_schedulers()
        boot = await pdmod.start_bootstrap_server(self.pd, ns.host, ns.disaggregation_bootstrap_port) \
            if isinstance(self.pd, pdmod.PrefillSide) else None
        self._set_constants(weights_gib, kv_gib, load_s)
        app = self.make_app()
        runner = await lifecycle.bind(app, ns.host, ns.port, self.log)
        if runner is None:
            return 1
        stop = lifecycle.install_signal_stop()
        warm = asyncio.get_running_loop().create_task(self._warmup())
        await stop.wait()
        warm.cancel()
        for s in self.schedulers:
            s.abort_all("The server is shutting down.")
        await lifecycle.shutdown(runner, self.log)
        for part in (exporter, boot):
            if part is not None:
                await part.cleanup()
        return 0

    def _start_schedulers(self) -> None:
        ns = self.ns
        loop = asyncio.get_running_loop()
        for dp in range(ns.dp_size):
            cfg = SchedConfig(
                max_total_tokens=self.pool_tokens, max_running_requests=self.max_running,
                chunked_prefill_size=self.chunk, max_prefill_tokens=ns.max_prefill_tokens,
                policy=ns.schedule_policy, radix=not ns.disable_radix_cache and (
                    ns.disaggregation_mode != "decode" or ns.disaggregation_decode_enable_radix_cache),
                decode_log_interval=ns.decode_log_interval, speed=self.speed,
                seed=ns.sim_seed + dp, conservativeness=ns.schedule_conservativeness,
                cost=self.cost, tags=self.tags(dp), faults=self.faults,
                spec=copy.copy(ns.sim_spec) if ns.sim_spec is not None else None,
                priority_first=(-1 if ns.schedule_low_priority_values_first else 1)
                if ns.enable_priority_scheduling else 0,
                host=hicache.host_tier(self), pd=self.pd)
            s = Scheduler(cfg, self.log, functools.partial(self._fatal_at, dp),
                          on_finish=self._on_finish, on_stats=self._on_stats)
            s.on_first = self._on_first
            s.activity = self.activities[dp]
            self.schedulers.append(s)
            loop.create_task(s.run())

    def _set_constants(self, weights_gib: float, kv_gib: float, load_s: float) -> None:
        m = self.metrics
        if not m:
            return
        graph_gb = 0.45 if self.cost.cuda_graph else 0.0
        for dp in range(self.ns.dp_size):
            for k, v in (("max_total_num_tokens", self.pool_tokens),
                         ("context_len", self.context_len), ("page_size", 1),
                         ("num_pages", self.pool_tokens), ("weight_memory_usage_gb", weights_gib),
                         ("kv_cache_memory_usage_gb", kv_gib),
                         ("startup_available_gpu_memory_gb", self.after_pool_gib),
                         ("is_cuda_graph", 1 if self.cost.cuda_graph else 0),
                         ("kv_available_tokens", self.pool_tokens)):
                m.child(f"sglang:{k}", dp).set(v)
            m.child("sglang:graph_memory_usage_gb", dp, phase="decode").set(graph_gb)
        for phase, v in (("load_weight", load_s * 0.6), ("kv_cache_allocation", 0.05),
                         ("scheduler_e2e", load_s), ("tokenizer_e2e", load_s)):
            m.child("sglang:startup_time_seconds", phase=phase).set(v)
        m.child("sglang:startup_cuda_graph_time_seconds", phase="decode").set(load_s * 0.4)

    async def _warmup(self) -> None:
        base = f"http://{'127.0.0.1' if self.ns.host in ('0.0.0.0', '') else self.ns.host}:" \
               f"{self.ns.port}"
        headers = {"Authorization": f"Bearer {self.ns.api_key}"} if self.ns.api_key else {}
        async with ClientSession(headers=headers) as s:
            async with s.get(base + "/model_info") as r:
                await r.read()
            body = {"text": "The capital city of France is",
                    "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            async with s.post(base + "/generate", json=body) as r:
                await r.read()
        self.ready = True
        self.log.log("The server is fired up and ready to roll!")

    # ------------------------------------------------------------------ callbacks
    def _on_first(self, r: SimRequest) -> None:
        if self.metrics and not r.is_health:
            self.metrics.child("sglang:time_to_first_token_seconds",
                               is_streaming=str(r.stream).lower(), **self._prio(r)).observe(
                (r.first_token_model or 0.0) - r.arrival_model)

    def _cache_metrics(self, s: Scheduler, dp: int) -> None:
        assert self.metrics is not None
        cache_metrics.record(self.metrics, s.kv, dp)

    def _prio(self, r: SimRequest) -> dict[str, str]:
        """The tokenizer's `priority` label of a request: its own priority, "" without one (only
        with --enable-priority-scheduling, which adds the label)."""
        if not self.ns.enable_priority_scheduling:
            return {}
        return {"priority": "" if r.api_priority is None else str(r.api_priority)}

    def _on_finish(self, r: SimRequest) -> None:
        m = self.metrics
        if not m or r.is_health:
            return
        st = str(r.stream).lower()
        e2e = (r.finish_model or 0.0) - r.arrival_model
        n_in, n_out = len(r.input_ids), len(r.output_ids)
        p = self._prio(r)
        m.child("sglang:prompt_tokens", is_streaming=st, **p).inc(n_in)
        m.child("sglang:generation_tokens", is_streaming=st, **p).inc(n_out)
        m.child("sglang:cached_tokens", cache_source="device", **p).inc(r.cached_tokens - r.host_cached)
        if r.host_cached:
            m.child("sglang:cached_tokens", cache_source="host", **p).inc(r.host_cached)
        m.child("sglang:num_requests", is_streaming=st, **p).inc()
        m.child("sglang:e2e_request_latency_seconds", is_streaming=st, **p).observe(e2e)
        m.child("sglang:prompt_tokens_histogram", **p).observe(n_in)
        m.child("sglang:uncached_prompt_tokens_histogram", **p).observe(n_in - r.cached_tokens)
        m.child("sglang:generation_tokens_histogram", **p).observe(n_out)
        itl = m.child("sglang:inter_token_latency_seconds", **p)
        for x in r.itls:
            itl.observe(x)
        if r.verify_ct:
            m.verify_calls(r.verify_ct, **p)
        if n_out > 1 and r.first_token_model is not None:
            m.child("sglang:request_time_per_output_token_seconds", is_streaming=st, **p).observe(
                ((r.finish_model or 0.0) - r.first_token_model) / (n_out - 1))
        dp = next((i for i, s in enumerate(self.schedulers) if r in s.running), 0)
        m.child("sglang:queue_time_seconds", dp).observe(r.queue_time)
        m.child("sglang:realtime_tokens", dp, mode="prefill_compute").inc(n_in - r.cached_tokens)
        m.child("sglang:realtime_tokens", dp, mode="prefill_cache").inc(r.cached_tokens)
        m.child("sglang:realtime_tokens", dp, mode="decode").inc(n_out)

    def _on_stats(self, s: Scheduler) -> None:
        m = self.metrics
        if not m:
            return
        dp = self.schedulers.index(s) if s in self.schedulers else 0
        used = s.num_used()
        for name, queue in (("num_running_reqs", s.running), ("num_queue_reqs", list(s.waiting))):
            m.set_queue(f"sglang:{name}", dp, len(queue), [r.sched_priority for r in queue])
        for k, v in (("gen_throughput", s.last_gen_throughput),
                     ("cache_hit_rate", s.last_cache_hit_rate),
                     ("decode_sum_seq_lens", sum(len(r.input_ids) + len(r.output_ids)
                                                 for r in s.running)),
                     ("token_usage", s.token_usage()), ("full_token_usage", s.token_usage()),
                     ("num_used_tokens", used), ("kv_used_tokens", used),
                     ("kv_available_tokens", s.pool - s.kv.used()),
                     ("kv_evictable_tokens", s.kv.tree.evictable_size),
                     ("num_retracted_reqs", s.last_retracted),
                     ("new_token_ratio", s.new_token_ratio),
                     ("utilization", 1.0 if s.running else 0.0),
                     ("is_cuda_graph", 1 if s.last_cuda_graph else 0)):
            m.child(f"sglang:{k}", dp).set(v)
        for k, v in (self.pd.gauges() if self.pd is not None else {}).items():
            m.child(f"sglang:{k}", dp).set(v)
        if s.last_spec is not None:
            m.child("sglang:spec_accept_length", dp).set(s.last_spec[0])
            m.child("sglang:spec_accept_rate", dp).set(s.last_spec[1])
        self._cache_metrics(s, dp)
        if s.cfg.spec is not None:  # the tier in use (fixed unless adaptive speculation)
            m.child("sglang:spec_num_steps", dp).set(s.cfg.spec.num_steps)
            m.child("sglang:spec_num_draft_tokens", dp).set(s.cfg.spec.num_draft_tokens)
        s.last_retracted = 0  # the gauge counts retractions since the previous update

    # ------------------------------------------------------------------ app
    def make_app(self) -> web.Application:
        hook = self._http_hook if self.metrics else None
        app = web.Application(middlewares=[lifecycle.make_middleware(self.log, self.ns.api_key,
                                                                     hook)],
                              client_max_size=64 * 1024 * 1024)
        from simulator import llm_routes
        llm_routes.add_routes(app, self)
        return app

    def _http_hook(self, path: str, method: str, status: int | None) -> None:
        m = self.metrics
        assert m is not None
        if status is None:
            m.fam["sglang:http_requests"].labels(endpoint=path, method=method).inc()
            m.fam["sglang:http_requests_active"].labels(endpoint=path, method=method).inc()
        else:
            m.fam["sglang:http_requests_active"].labels(endpoint=path, method=method).dec()
            m.fam["sglang:http_responses"].labels(endpoint=path, method=method,
                                                  status_code=str(status)).inc()

    def pick_scheduler(self) -> Scheduler:
        s = self.schedulers[self._rr % len(self.schedulers)]
        self._rr += 1
        return s

    def new_request(self, inp: llm_api.GenInput, *, stream: bool, is_health: bool = False
                    ) -> tuple[SimRequest, Scheduler]:
        limit = min(self.context_len, self.pool_tokens) - 1
        if len(inp.input_ids) > limit:
            raise llm_api.BadRequest(
                f"Input length ({len(inp.input_ids)} tokens) exceeds the maximum allowed length "
                f"({limit} tokens). Use a shorter input or enable --allow-auto-truncate.")
        # Capped so one request alone always fits the pool (else it would retract forever).
        max_new = max(min(inp.max_new_tokens, self.context_len - len(inp.input_ids),
                          self.pool_tokens - len(inp.input_ids) - 1), 1)
        rid = inp.rid or uuid.uuid4().hex
        gen: tokenizer.Generator | tokenizer.ScriptedGenerator
        gen = tokenizer.Generator(self.ns.sim_seed, inp.seed, inp.input_ids)
        if inp.grammar is not None:  # constrained: one instance of the grammar, then EOS
            gen = tokenizer.ScriptedGenerator(tokenizer.encode_output(inp.grammar.sample(gen.rng)))
        prio = inp.priority if inp.priority is not None else self.ns.default_priority_value
        # SGLang 0.5.23 orders a request with no priority after every other (the lowest value,
        # or the highest with --schedule-low-priority-values-first)
        order = prio if prio is not None else (1 << 62) * (1 if self.ns.schedule_low_priority_values_first else -1)
        r = SimRequest(rid=rid, input_ids=inp.input_ids, max_new_tokens=max_new,
                       gen=gen, priority=order, api_priority=inp.priority, sched_priority=prio,
                       stream=stream, is_health=is_health, is_warmup=not self.ready)
        s = self.pick_scheduler()
        if self.pd is None:
            s.submit(r)
        elif is_health or not self.ready:  # warm-up and health: no peer
            self.pd.fake(r, s)
        else:
            self.pd.submit(r, s, inp.bootstrap)
        return r, s

    def server_args_dict(self) -> dict[str, Any]:
        """SGLang 0.5.23's full ServerArgs field set, with this launch's flags and resolutions."""
        ns = self.ns
        d = dict(SERVER_ARGS["server_args"])
        for k, v in vars(ns).items():
            if k in d:
                d[k] = v
        d.update(grammar_backend=ns.grammar_backend or "xgrammar",
                 tokenizer_path=ns.tokenizer_path or ns.model_path,
                 served_model_name=self.model_name, mem_fraction_static=self.mem_fraction,
                 chunked_prefill_size=self.chunk, random_seed=ns.random_seed
                 if ns.random_seed is not None else ns.sim_seed)
        if ns.sim_spec is not None:  # SGLang resolves what the flags left out (a chain: top-k 1)
            d.update(speculative_algorithm=ns.sim_spec.algorithm, speculative_num_steps=ns.sim_spec.num_steps,
                     speculative_num_draft_tokens=ns.sim_spec.num_draft_tokens,
                     speculative_eagle_topk=ns.speculative_eagle_topk or 1)
        return d

    def server_info(self) -> dict[str, Any]:
        info = self.server_args_dict()
        info.update(SERVER_ARGS["top_level_only"])
        info.update(max_req_input_len=min(self.context_len, self.pool_tokens) - 1,
                    max_total_num_tokens=self.pool_tokens,
                    status="ready" if self.ready else "starting")
        args = self.server_args_dict()
        graph_gb = 0.45 if self.cost.cuda_graph else 0.0
        states = []
        for s in self.schedulers:
            st: dict[str, Any] = dict(args)
            st.update({
                "decode_cuda_graph_bs": self.graph_bs if self.cost.cuda_graph else [],
                "decode_cuda_graph_memory_gb": graph_gb,
                "effective_max_running_requests_per_dp": self.max_running,
                "last_gen_throughput": s.last_gen_throughput,
                "memory_usage": {
                    "weight": round(self.cost.weight_bytes / self.cost.tp / GIB, 3),
                    "kvcache": round(self.pool_tokens * self.cost.kv_bytes_per_token
                                     / self.cost.tp / GIB, 3),
                    "startup_available": round(self.after_pool_gib, 3),
                    "token_capacity": self.pool_tokens, "token_capacity_swa": None,
                    "graph": {"prefill": 0.0, "decode": graph_gb, "target_verify": 0.0,
                              "draft_prefill": 0.0, "draft_decode": 0.0, "draft_extend": 0.0}},
                "world_size": self.ns.tp_size,
            })
            avg = s.cfg.spec.avg_accept_length() if s.cfg.spec is not None else None
            if avg is not None:
                st["avg_spec_accept_length"] = avg
            if self.ns.sim_report_lag:
                st.update(sim_scheduling_lag_ratio=s.lag_ratio(), sim_max_scheduling_lag_s=s.max_lag_s,
                          sim_model_time_s=s.model_time)
            states.append(st)
        info["internal_states"] = states
        info["version"] = self.ns.sim_version
        info["startup_time"] = {"load_weight": self.load_s * 0.6, "kv_cache_allocation": 0.05,
                                "scheduler_e2e": self.load_s,
                                "cuda_graph": {"prefill": 0.0, "decode": self.load_s * 0.4,
                                               "target_verify": 0.0, "draft_prefill": 0.0,
                                               "draft_decode": 0.0, "draft_extend": 0.0},
                                "tokenizer_e2e": self.load_s}
        info["launch_command"] = " ".join(sys.argv[1:])
        return info
