"""Load pacing for one level: closed-loop concurrency or open-loop Poisson rate, stop conditions,
and the client's self-check (event-loop lag ticker + process CPU).

- **Closed loop** (`concurrency=c`): c workers, each sends its next request when the previous
  one finished. Worker starts are staggered by `stagger_s` (1 ms; the whole ramp capped at
  `max_ramp_s`, 0.1 s) so c requests do not queue for the client CPU in the same tick (lock-step starts inflate TTFT by
  about c x per-request CPU).
- **Open loop** (`rate=r` req/s): start times follow a seeded Poisson process (exponential gaps,
  mean 1/r) regardless of completions; the achieved start rate is reported next to the requested
  one, and how late starts ran behind schedule (`start_lag_p99_s`).
- The first `warmup` requests of a level are sent and recorded with `warmup=True` but excluded
  from every statistic.
- Stop conditions: `max_duration_s` (no new request starts after it; in-flight ones finish or time
  out) and `abort_error_rate` (after at least `abort_min_requests` finished requests, a failure
  fraction above it stops the level and marks the sweep aborted).

The garbage collector is paused during a level (collected before and after), so a collection
pause never lands inside a measured latency; a level holds at most a few MB of records.

Self-check: a ticker task sleeps `TICK_S` and records how late it woke (event-loop lag, seconds);
CPU% is this process's user+system CPU time over the level's wall time (% of one core).
"""

from __future__ import annotations

import asyncio
import gc
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import psutil

from collectors.probe.client import RequestRecord

TICK_S = 0.01

#: sends request `seq` of the level (warmup flag set by the pacer) and returns its record
SendFn = Callable[[int, bool], Awaitable[RequestRecord]]


@dataclass(slots=True)
class LevelPlan:
    mode: str  # "concurrency" | "rate"
    value: float  # concurrency (int) or rate (req/s)
    requests: int  # measured requests (excluding warm-up)
    warmup: int
    stagger_s: float = 0.001
    max_ramp_s: float = 0.1  # the whole stagger of a level never exceeds this
    max_duration_s: float | None = None
    abort_error_rate: float | None = 0.5
    abort_min_requests: int = 10
    seed: int = 0


@dataclass(slots=True)
class LevelResult:
    plan: LevelPlan
    records: list[RequestRecord] = field(default_factory=list)
    loop_lag_s: list[float] = field(default_factory=list)
    cpu_pct: float = 0.0
    wall_s: float = 0.0
    start_lag_s: list[float] = field(default_factory=list)  # open loop: actual - scheduled start
    stopped: str | None = None  # None | "max_duration" | "error_rate"


class SelfCheck:
    """Event-loop lag ticker + process CPU over a window; start() / stop() around a level."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._proc = psutil.Process()
        self._cpu0 = 0.0
        self._t0 = 0.0

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + TICK_S
            await asyncio.sleep(TICK_S)
            self.lags.append(max(loop.time() - due, 0.0))

    def start(self) -> None:
        t = self._proc.cpu_times()
        self._cpu0, self._t0 = t.user + t.system, time.perf_counter()
        self._task = asyncio.create_task(self._tick())

    async def stop(self) -> tuple[list[float], float, float]:
        """(loop lags, CPU % of one core, wall seconds)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        t = self._proc.cpu_times()
        wall = time.perf_counter() - self._t0
        cpu = (t.user + t.system - self._cpu0) / wall * 100.0 if wall > 0 else 0.0
        return self.lags, cpu, wall


class _Stopper:
    def __init__(self, plan: LevelPlan, on_done: Callable[[RequestRecord], None] | None) -> None:
        self.plan = plan
        self.deadline = (
            time.perf_counter() + plan.max_duration_s if plan.max_duration_s else math.inf
        )
        self.finished = 0
        self.failed = 0
        self.reason: str | None = None
        self.on_done = on_done

    def done(self, rec: RequestRecord) -> None:
        self.finished += 1
        self.failed += 0 if rec.ok else 1
        p = self.plan
        if (
            p.abort_error_rate is not None
            and self.finished >= p.abort_min_requests
            and self.failed / self.finished > p.abort_error_rate
            and self.reason is None
        ):
            self.reason = "error_rate"
        if self.on_done is not None:
            self.on_done(rec)

    def may_start(self) -> bool:
        if self.reason is None and time.perf_counter() > self.deadline:
            self.reason = "max_duration"
        return self.reason is None


async def run_level(
    plan: LevelPlan,
    send: SendFn,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> LevelResult:
    """Run one level to completion (or a stop condition) and return its records."""
    result = LevelResult(plan)
    stop = _Stopper(plan, on_done)
    check = SelfCheck()
    # A full garbage collection of the heap aiohttp builds can pause the loop for several ms,
    # which would land inside some request's measured latency: collect before the level, pause
    # the collector during it, collect again after.
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    check.start()
    total = plan.requests + plan.warmup
    try:
        if plan.mode == "concurrency":
            await _closed(plan, send, total, stop, result)
        elif plan.mode == "rate":
            await _open(plan, send, total, stop, result)
        else:
            raise ValueError(f"Unknown load mode {plan.mode!r}; use 'concurrency' or 'rate'.")
    finally:
        result.loop_lag_s, result.cpu_pct, result.wall_s = await check.stop()
        if gc_was_enabled:
            gc.enable()
        gc.collect()
    result.records.sort(key=lambda r: r.seq)
    result.stopped = stop.reason
    return result


async def _closed(plan: LevelPlan, send: SendFn, total: int, stop: _Stopper, result: LevelResult) -> None:
    next_seq = 0
    workers = max(int(plan.value), 1)
    step = min(plan.stagger_s, plan.max_ramp_s / workers)

    async def worker(i: int) -> None:
        nonlocal next_seq
        if i:
            await asyncio.sleep(i * step)
        while next_seq < total and stop.may_start():
            seq = next_seq
            next_seq += 1
            rec = await send(seq, seq < plan.warmup)
            result.records.append(rec)
            stop.done(rec)

    await asyncio.gather(*(worker(i) for i in range(workers)))


async def _open(plan: LevelPlan, send: SendFn, total: int, stop: _Stopper, result: LevelResult) -> None:
    if plan.value <= 0:
        raise ValueError("A request rate must be > 0 requests/s.")
    loop = asyncio.get_running_loop()
    rng = random.Random(plan.seed)
    tasks: set[asyncio.Task[None]] = set()

    async def one(seq: int) -> None:
        rec = await send(seq, seq < plan.warmup)
        result.records.append(rec)
        stop.done(rec)

    t = loop.time()
    for seq in range(total):
        if seq:
            t += rng.expovariate(plan.value)
        delay = t - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if not stop.may_start():
            break
        result.start_lag_s.append(max(loop.time() - t, 0.0))
        task = asyncio.create_task(one(seq))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
