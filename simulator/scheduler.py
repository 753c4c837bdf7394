"""Continuous-batching scheduler on a model clock (one asyncio task per DP rank).

Each iteration runs either one prefill batch (when requests wait and fit) or one decode step of
the running batch, like SGLang's event loop without overlap. The forward takes
``costmodel`` seconds of *model time*; the task sleeps until the wall-clock deadline
``anchor_wall + (model_time - anchor_model) / speed`` so the pace is exact on average.

Memory: a KV pool of ``max_total_num_tokens`` slots shared by the radix tree (cached prefixes,
evictable when unlocked) and requests' private slots (uncached prompt part, generated tokens).
Admission reserves ``extend + min(max_new_tokens, 4096) x new_token_ratio`` per request
(new_token_ratio starts at 0.7 x --schedule-conservativeness, decays to 0.14 of that per decode
step, and jumps up after a retraction). A decode step that cannot get one slot per request
retracts requests (fewest output tokens, longest input first) back to the queue front.

Scheduling lag = how far the task's wall clock runs behind its model clock (a fraction of busy
model time / speed; ``lag_ratio()``, in /server_info internal_states). Durations are model seconds.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simulator import logfmt
from simulator.costmodel import CostModel, Work
from simulator.faults import Faults
from simulator.gpu_activity import Activity
from simulator.hicache import HostTier
from simulator.kvpool import KvPool
from simulator.request import SimRequest
from simulator.retract import retract
from simulator.speculative import Spec
from simulator.tokenizer import EOS_TOKEN_ID

CLIP_MAX_NEW_TOKENS = 4096


@dataclass
class SchedConfig:
    max_total_tokens: int
    max_running_requests: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    policy: str
    radix: bool
    decode_log_interval: int
    speed: float
    seed: int
    conservativeness: float
    cost: CostModel
    tags: str
    faults: Faults
    spec: Spec | None = None  # --speculative-algorithm (simulator/speculative.py)
    priority_first: int = 0  # priority scheduling: 1 higher values first, -1 lower (low-first flag), 0 off
    host: HostTier | None = None  # --enable-hierarchical-cache
    pd: Any = None  # --disaggregation-mode prefill|decode: simulator/disagg.py's side


FatalHook = Callable[[str, str], None]


class Scheduler:
    def __init__(self, cfg: SchedConfig, log: logfmt.LogWriter, on_fatal: FatalHook,
                 on_finish: Callable[[SimRequest], None] | None = None,
                 on_stats: Callable[[Scheduler], None] | None = None) -> None:
        self.cfg = cfg
        self.log = log
        self.on_fatal = on_fatal
        self.on_finish = on_finish
        self.on_stats = on_stats
        self.on_first: Callable[[SimRequest], None] | None = None
        self.kv = KvPool(cfg.max_total_tokens, radix=cfg.radix, host=cfg.host)
        self.load_back_s = 0.0  # HiCache copies the next prefill waits for (model seconds)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.chunked: SimRequest | None = None
        self.prebuilt: list[SimRequest] = []  # PD decode: KV arrived, joining at the next iteration
        self.init_ratio = min(0.7 * cfg.conservativeness, 1.0)
        self.min_ratio = self.init_ratio * 0.14
        self.ratio_decay = (self.init_ratio - self.min_ratio) / 600
        self.new_token_ratio = self.init_ratio
        self.rng = random.Random(cfg.seed)
        self._wake = asyncio.Event()
        self.model_time = 0.0
        self.anchor_wall = 0.0
        self.anchor_model = 0.0
        self.busy = False
        self.hung = False
        # stats
        self.admitted_count = 0
        self.tokens_emitted = 0
        self.prefill_tokens_total = 0
        self.prefill_busy_s = 0.0
        self.finished_count = 0
        self.decode_ct = 0
        self.last_decode_log_model = 0.0
        self.decode_tokens_since_log = 0
        self.last_prefill_log_model = 0.0
        self.last_gen_throughput = 0.0
        self.last_cache_hit_rate = 0.0
        self.last_cuda_graph = True
        self.last_spec: tuple[float, float] | None = None  # (accept len, accept rate) of the last log line
        self.retracted_total = 0
        self.last_retracted = 0
        self.lag_done_s = 0.0
        self.busy_done_s = 0.0
        self.cur_lag_s = 0.0
        self.max_lag_s = 0.0
        #: the GPU activity record the dcgm-exporter look-alike reads (simulator/dcgm.py)
        self.activity: Activity | None = None
        self._work = Work(0.0, 0.0)
        self._pcie = (0.0, 0.0)

    # ----------------------------------------------------------------- memory
    @property
    def pool(self) -> int:
        return self.kv.size

    def token_usage(self) -> float:
        return self.kv.token_usage()

    def num_used(self) -> int:
        return self.kv.num_used()

    # ----------------------------------------------------------------- clock
    def now_model(self) -> float:
        t = self.anchor_model + (asyncio.get_running_loop().time() - self.anchor_wall) * \
            self.cfg.speed
        return min(t, self.model_time) if self.busy else t

    def lag_ratio(self) -> float:
        busy = self.busy_done_s + ((self.model_time - self.anchor_model) / self.cfg.speed
                                   if self.busy else 0.0)
        lag = self.lag_done_s + (self.cur_lag_s if self.busy else 0.0)
        return lag / busy if busy > 0 else 0.0

    def submit(self, req: SimRequest) -> None:
        req.arrival_model = self.now_model()
        req.arrival_wall = time.time()
        req.queue_start_model = req.arrival_model
        req.target = list(req.input_ids)
        self.waiting.append(req)
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def flush_cache(self) -> bool:
        if self.running or self.waiting or self.chunked:
            return False
        self.kv.tree.reset()
        return True

    def decode_moments(self) -> list[float]:
        """[count, Σbatch, Σbatch², ...]-style decode moments of the running batch (for /v1/loads)."""
        n = float(len(self.running))
        seq = float(sum(len(r.input_ids) + len(r.output_ids) for r in self.running))
        return [n, n, seq, n, seq, n]

    def abort_all(self, message: str) -> None:
        """End every queued and running request now (server shutdown)."""
        reqs = list(self.waiting) + self.running + ([self.chunked] if self.chunked else [])
        for r in reqs:
            if not r.finished:
                r.aborted = r.finished = True
                r.finish_model = self.model_time
                r.finish_reason = {"type": "abort", "message": message}
                r.event.set()

    def pending_tokens(self) -> int:
        n = sum(len(r.target) for r in self.waiting)
        if self.chunked is not None:
            n += len(self.chunked.target) - self.chunked.filled
        return n

    # ----------------------------------------------------------------- loop
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self.anchor_wall = loop.time()
        while True:
            if self.hung:
                await asyncio.Event().wait()
            if not (self.waiting or self.running or self.chunked or self.prebuilt):
                if self.busy:
                    self.busy = False
                    self.lag_done_s += self.cur_lag_s
                    self.busy_done_s += (self.model_time - self.anchor_model) / self.cfg.speed
                    self.cur_lag_s = 0.0
                    self.anchor_wall, self.anchor_model = loop.time(), self.model_time
                self._wake.clear()
                await self._wake.wait()
                self.model_time = self.now_model()
                self.anchor_wall, self.anchor_model = loop.time(), self.model_time
                self.busy = True
            self._drop_aborted()
            if self.prebuilt:
                self.cfg.pd.admit(self)
            if self._check_faults():
                continue
            batch = self._prefill_batch()
            if batch is not None:
                new, cached = sum(b[1] for b in batch), sum(b[3] for b in batch)
                dt, self.load_back_s = self.cfg.cost.prefill_time(new, cached) + self.load_back_s, 0.0
                dt += self.cfg.faults.slow_extra_s(self.finished_count)  # --sim-fault slow-prefill
                self._work, self._pcie = self.cfg.cost.prefill_work(new, cached), (4.0 * new, 0.0)
                self.prefill_tokens_total += sum(b[1] for b in batch)
                self.prefill_busy_s += dt
            elif self.running:
                step = self._decode_prepare()
                if step is None:
                    continue
                dt = step
            else:
                await asyncio.sleep(0.001)  # waiting requests that cannot fit: let aborts land
                continue
            self._record_activity(dt)
            self.model_time += dt
            target = self.anchor_wall + (self.model_time - self.anchor_model) / self.cfg.speed
            delay = target - loop.time()
            await asyncio.sleep(delay if delay > 0 else 0)
            if self.hung:
                continue
            if batch is not None:
                self._prefill_done(batch)
            else:
                self._decode_done()
            self.cur_lag_s = max(0.0, loop.time() - target)
            self.max_lag_s = max(self.max_lag_s, self.cur_lag_s)

    def _record_activity(self, dt: float) -> None:
        """The forward about to run, on the activity clock: it starts when the model clock
        reaches model_time (now, when the scheduler runs late)."""
        if self.activity is None:
            return
        ahead = max(0.0, self.model_time - self.now_model()) if self.busy else 0.0
        self.activity.record(self.activity.clock() + ahead, dt, self._work,
                             peak_flops=self.cfg.cost.peak_flops, pcie_rx_bytes=self._pcie[0],
                             pcie_tx_bytes=self._pcie[1])

    # ----------------------------------------------------------------- faults
    def _check_faults(self) -> bool:
        f = self.cfg.faults
        n = self.finished_count
        if f.hang_after is not None and n >= f.hang_after:
            self.hung = True
            return True
        if f.nccl_timeout_after is not None and n >= f.nccl_timeout_after:
            self.hung = True
            self.on_fatal("nccl", "")
            return True
        if f.crash_after is not None and n >= f.crash_after:
            self.hung = True
            self.on_fatal("crash", "")
            return True
        return False

    def _drop_aborted(self) -> None:
        for queue in (self.waiting,):
            if any(r.aborted for r in queue):
                keep = [r for r in queue if not r.aborted]
                queue.clear()
                queue.extend(keep)
        if any(r.aborted for r in self.running):
            for r in self.running:
                if r.aborted:
                    self.kv.release(r)
            self.running = [r for r in self.running if not r.aborted]
        if self.chunked is not None and self.chunked.aborted:
            self.kv.release(self.chunked)
            self.chunked = None

    # ----------------------------------------------------------------- prefill
    def _order_waiting(self) -> list[SimRequest]:
        reqs = list(self.waiting)
        pol = self.cfg.policy
        if pol == "lpm" and self.cfg.radix and len(reqs) <= 128:
            reqs.sort(key=lambda r: -self.kv.match(r.target)[0])
        elif pol == "random":
            self.rng.shuffle(reqs)
        elif pol == "lof":
            reqs.sort(key=lambda r: -r.max_new_tokens)
        elif pol == "priority":
            reqs.sort(key=lambda r: -r.priority)
        elif pol == "shortest-prefill-first":
            reqs.sort(key=lambda r: len(r.target))
        if self.cfg.priority_first:
            reqs.sort(key=lambda r: -self.cfg.priority_first * r.priority)  # stable: policy order within
        return reqs

    def _reserve(self, r: SimRequest) -> float:
        left = min(r.max_new_tokens - len(r.output_ids), CLIP_MAX_NEW_TOKENS)
        return max(left, 0) * self.new_token_ratio

    def _prefill_batch(self) -> list[tuple[SimRequest, int, int, int]] | None:
        if not self.waiting and self.chunked is None:
            return None
        cfg = self.cfg
        rem_total = self.kv.available() - sum(self._reserve(r) for r in self.running)
        rem_input = cfg.max_prefill_tokens
        rem_chunk = cfg.chunked_prefill_size if cfg.chunked_prefill_size > 0 else 1 << 62
        batch: list[tuple[SimRequest, int, int, int]] = []
        if self.chunked is not None:
            r = self.chunked
            take = min(len(r.target) - r.filled, rem_chunk)
            if not self.kv.alloc(r, take):
                return None
            batch.append((r, take, 0, r.filled))
            rem_chunk -= take
            rem_input -= take
            rem_total -= take
            if r.filled + take < len(r.target):
                self._log_prefill(batch, len(batch))
                return batch
            self.chunked = None
        n_running = len(self.running)
        admitted: list[SimRequest] = []
        for r in self._order_waiting() if self.waiting else []:
            if n_running + len(admitted) >= cfg.max_running_requests or rem_chunk <= 0:
                break
            prefix, node = self.kv.match(r.target)
            loaded = self.kv.load_back(r.target, prefix) if not r.admitted else None
            if loaded is not None:  # HiCache: the host's copy of the rest of the prefix, over PCIe
                self.load_back_s, r.host_loaded = self.load_back_s + loaded.seconds, r.host_loaded + loaded.tokens
                prefix, node = self.kv.match(r.target)
            ext = len(r.target) - prefix
            need = ext + self._reserve(r)
            empty = not self.running and not batch
            if need > rem_total and not (empty and ext <= self.kv.available()):
                break
            if ext > rem_input and batch:
                break
            if (cfg.faults.oom_after is not None and not (r.is_health or r.is_warmup)
                    and self.admitted_count >= cfg.faults.oom_after):
                self.on_fatal("oom", f"{ext}")
                self.hung = True
                return None
            take = min(ext, rem_chunk)
            self.kv.lock_prefix(r, node, prefix)
            if not self.kv.alloc(r, take):
                self.kv.unlock_prefix(r)
                break
            if not r.admitted:
                r.cached_tokens = prefix
                r.host_cached = min(r.host_loaded, prefix)
                r.admitted = True
                if not (r.is_health or r.is_warmup):
                    self.admitted_count += 1
            r.queue_time += self.model_time - r.queue_start_model
            batch.append((r, take, prefix, prefix))
            admitted.append(r)
            rem_total -= need
            rem_input -= take
            rem_chunk -= take
            if take < ext:
                self.chunked = r
                break
        for r in admitted:
            self.waiting.remove(r)
        if not batch:
            return None
        self._log_prefill(batch, len(batch))
        return batch

    def _log_prefill(self, batch: list[tuple[SimRequest, int, int, int]], new_seq: int) -> None:
        new_tok = sum(b[1] for b in batch)
        cached = sum(b[2] for b in batch)
        self.last_cache_hit_rate = cached / (cached + new_tok) if cached + new_tok else 0.0
        since = self.model_time - self.last_prefill_log_model
        tput = new_tok / since if since > 0 else 0.0
        self.last_prefill_log_model = self.model_time
        self.log.log(logfmt.prefill_line(
            new_seq=new_seq, new_token=new_tok, cached_token=cached,
            token_usage=self.token_usage(), running_req=len(self.running),
            queue_req=len(self.waiting), pending_token=self.pending_tokens(), cuda_graph=False,
            input_throughput=tput, pd=self.cfg.pd.log_extra() if self.cfg.pd else ""), tags=self.cfg.tags)

    def emit_first(self, r: SimRequest) -> None:
        self._emit_token(r)
        if not r.finished:
            self.running.append(r)

    def _prefill_done(self, batch: list[tuple[SimRequest, int, int, int]]) -> None:
        for r, take, _, _ in batch:
            if r.aborted:
                continue
            r.filled += take
            self.kv.cache_filled(r)
            if r.filled < len(r.target):
                continue
            if self.cfg.pd is not None:  # PD prefill: the KV goes to the decode server
                self.cfg.pd.on_prefilled(r, self)
                continue
            self.emit_first(r)
        if self.on_stats:
            self.on_stats(self)

    # ----------------------------------------------------------------- decode
    def _decode_prepare(self) -> float | None:
        f = self.cfg.faults
        if f.oom_at_usage is not None and self.token_usage() >= f.oom_at_usage:
            self.hung = True
            self.on_fatal("decode_oom", "")
            return None
        need = len(self.running)
        if self.kv.available() < need:
            retract(self, need)
            if not self.running:
                return None
        for r in self.running:
            if not self.kv.alloc(r, 1):  # cannot happen after retraction; keep the invariant
                return None
        batch = len(self.running)
        kv = sum(len(r.input_ids) + len(r.output_ids) for r in self.running)
        self.last_cuda_graph = self.cfg.cost.uses_graph(batch)
        cost, spec = self.cfg.cost, self.cfg.spec
        if spec is None:
            self._work, self._pcie = cost.decode_work(batch, kv), (0.0, 4.0 * batch)
            return cost.decode_time(batch, kv)
        # a verify forward over num_draft_tokens positions a request, after the drafting
        for r in self.running:
            r.verify_ct += 1
        positions, drafting = spec.step_scale()
        self._work, self._pcie = cost.decode_work(batch * positions, kv), (0.0, 4.0 * batch * positions)
        return cost.decode_time(batch * positions, kv) + drafting * cost.decode_time(batch, kv)

    def _decode_done(self) -> None:
        self.decode_ct += 1
        n = 0
        spec = self.cfg.spec
        for r in self.running:
            if r.aborted:
                continue
            # with speculation: the accepted drafts and the bonus token, in one go
            k = min(1 + spec.accept(self.rng), r.max_new_tokens - len(r.output_ids)) if spec is not None else 1
            share = (self.model_time - r.last_token_model) / k if r.last_token_model is not None else None
            for i in range(k):  # the first token's slot was taken in _decode_prepare
                if i and (r.finished or not self.kv.alloc(r, 1)):
                    break
                self._emit_token(r, share)
                n += 1
        self.decode_tokens_since_log += n
        self.running = [r for r in self.running if not r.finished and not r.aborted]
        self.new_token_ratio = max(self.new_token_ratio - self.ratio_decay, self.min_ratio)
        if self.decode_ct % max(self.cfg.decode_log_interval, 1) == 0:
            since = self.model_time - self.last_decode_log_model
            self.last_gen_throughput = self.decode_tokens_since_log / since if since > 0 else 0.0
            self.last_decode_log_model = self.model_time
            self.decode_tokens_since_log = 0
            self.last_spec = spec.take() if spec is not None else None
            self.log.log(logfmt.decode_line(
                running_req=len(self.running), num_token=self.num_used(),
                token_usage=self.token_usage(), cuda_graph=self.last_cuda_graph,
                gen_throughput=self.last_gen_throughput, queue_req=len(self.waiting),
                spec=self.last_spec, pd=self.cfg.pd.log_extra() if self.cfg.pd else ""), tags=self.cfg.tags)
            if self.on_stats:
                self.on_stats(self)

    def _emit_token(self, r: SimRequest, itl: float | None = None) -> None:
        """One token of `r` at the model clock; `itl`: its share of the step when one step
        emits several (SGLang's ITL histogram divides a chunk's interval by its tokens)."""
        now = self.model_time
        self.tokens_emitted += 1
        tid = r.gen.next_id()
        r.output_ids.append(tid)
        if r.first_token_model is None:
            r.first_token_model = now
            if self.on_first:
                self.on_first(r)
        elif r.last_token_model is not None:
            r.itls.append(now - r.last_token_model if itl is None else itl)
        r.last_token_model = now
        if tid == EOS_TOKEN_ID or len(r.output_ids) >= r.max_new_tokens:
            r.finished = True
            r.finish_model = now
            r.finish_reason = ({"type": "stop", "matched": EOS_TOKEN_ID} if tid == EOS_TOKEN_ID
                               else {"type": "length", "length": r.max_new_tokens})
            self.kv.release(r)
            if not (r.is_health or r.is_warmup):
                self.finished_count += 1
            if self.on_finish:
                self.on_finish(r)
        r.event.set()
