"""The runner (`pitwall collect`): schedules collectors, isolates failures, batches writes,
carries out intents and supervises managed servers.

How it works:
- One scheduler loop (the main thread) wakes every `tick_s`. Each collector polls on its own
  interval in a worker thread; its PollResult and the state it saved go onto one queue.
- The writer flushes the queue every `flush_s` or `flush_rows` rows in ONE transaction: samples,
  events and collector state together, so a runner killed at any instant either committed a poll's
  rows and its new offset, or neither (no loss, no double count on restart).
- A collector that raises records one `collector_error` event and is retried with exponential
  backoff (its interval x 2^failures, capped at `max_backoff_s`); the others carry on.
- Intents (desired state written by the UI/CLI) are claimed from storage and run by handlers
  injected by the entry point (the supervisor for launch/stop/relaunch, the probe for sweeps).
  Two lanes: "control" (server lifecycle) and "probe" (sweeps), so a long sweep never blocks a
  relaunch. Claiming is atomic in SQL, so two tabs or two CLIs never launch twice.
- Single instance per database: a lease row with a heartbeat. A second runner reports the
  holder and exits non-zero.
- The built-in `self` collector records the runner's CPU (self.cpu_pct, % of one core), scheduler
  loop lag (self.loop_lag_s) and rows written per second (self.rows_per_s), on server_id 0.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import psutil
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from collectors.base import (
    Collector,
    CollectorContext,
    EventRow,
    PollResult,
    SampleRow,
    ServerTarget,
)
from storage import repo
from storage.models import Intent

log = logging.getLogger("pitwall.runner")

SELF_SERVER_ID = 0  # samples about the runner itself
LEASE_TTL_S = 15.0
ROLLUP_LAG_S = 5.0  # a minute is rolled up this long after it ends (late polls land first)
CONTROL_KINDS = ("launch", "stop", "relaunch")
PROBE_KINDS = ("probe",)


class LeaseHeld(RuntimeError):
    """Another runner holds this database; the message names it."""


class Supervisor(Protocol):
    """What the runner needs from the server supervisor (collectors/supervisor.py)."""

    def handle_intent(self, intent: Intent) -> None: ...

    def tick(self) -> None: ...

    def targets_info(self) -> dict[int, tuple[int | None, list[int]]]: ...

    def shutdown(self) -> None: ...


IntentHandler = Callable[[Intent], None]


class SelfCollector:
    """Runner health: CPU of this process, scheduler loop lag, rows written per second."""

    name = "self"
    interval_s = 5.0

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._proc = psutil.Process()
        self._proc.cpu_percent(None)
        self._last_rows = 0
        self._last_t = time.monotonic()

    def poll(self, ctx: CollectorContext) -> PollResult:
        now = ctx.now()
        t = time.monotonic()
        rows = self._runner.rows_written
        rate = (rows - self._last_rows) / max(t - self._last_t, 1e-6)
        self._last_rows, self._last_t = rows, t
        lag = self._runner.take_max_lag()
        out = PollResult()
        for metric, value in (
            ("self.cpu_pct", self._proc.cpu_percent(None)),
            ("self.loop_lag_s", lag),
            ("self.rows_per_s", rate),
        ):
            out.samples.append(SampleRow(now, SELF_SERVER_ID, metric, float(value), "self"))
        return out

    def close(self) -> None:
        pass


@dataclass
class _Slot:
    collector: Collector
    next_at: float = 0.0
    failures: int = 0
    future: Future[Any] | None = None


@dataclass
class _Batch:
    samples: list[SampleRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)


class Runner:
    def __init__(
        self,
        engine: Engine,
        collectors: Sequence[Collector],
        *,
        supervisor: Supervisor | None = None,
        intent_handlers: dict[str, IntentHandler] | None = None,
        tick_s: float = 0.2,
        flush_s: float = 1.0,
        flush_rows: int = 1000,
        max_backoff_s: float = 60.0,
        holder: str | None = None,
    ) -> None:
        self.engine = engine
        self.supervisor = supervisor
        self.intent_handlers = dict(intent_handlers or {})
        self.tick_s = tick_s
        self.flush_s = flush_s
        self.flush_rows = flush_rows
        self.max_backoff_s = max_backoff_s
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        self.rows_written = 0
        self._max_lag = 0.0
        self._lag_lock = threading.Lock()
        self._queue: queue.Queue[_Batch] = queue.Queue()
        self._queued_rows = 0  # approximate; only decides when to flush early
        self._retry: _Batch | None = None  # a batch whose write failed, retried first
        self.write_failures = 0
        self.lost_lease = False  # another runner took over: its servers are not ours to stop
        self._rolled_until: float | None = None  # end of the last successful compute_rollups
        self._series: set[tuple[int, str]] = set()  # (server_id, metric) rolled up since start
        self._acquired = False
        self._pending_state: dict[str, dict[str, Any]] = {}
        self._state_lock = threading.Lock()
        self._slots = [_Slot(c) for c in collectors] + [_Slot(SelfCollector(self))]
        self._pool = ThreadPoolExecutor(max_workers=max(2, len(self._slots)), thread_name_prefix="poll")
        self._lanes: dict[str, Future[Any] | None] = {"control": None, "probe": None}
        self._lane_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="intent")
        self._stop = threading.Event()

    # -- lease --------------------------------------------------------------------------------
    def acquire(self) -> None:
        ok, lease = repo.acquire_lease(
            self.engine, holder=self.holder, pid=os.getpid(), host=socket.gethostname(), ttl_s=LEASE_TTL_S
        )
        if not ok and lease is not None and lease.host == socket.gethostname() and not psutil.pid_exists(lease.pid):
            # The holder died without releasing (SIGKILL): take over at once.
            ok, lease = repo.acquire_lease(
                self.engine, holder=self.holder, pid=os.getpid(), host=socket.gethostname(), ttl_s=0
            )
        if not ok:
            assert lease is not None
            raise LeaseHeld(
                f"Another runner ({lease.holder}) is collecting into this database "
                f"(heartbeat {time.time() - lease.heartbeat_at:.0f} s ago); stop it first or use "
                "another PITWALL_DATABASE_URL."
            )
        self._acquired = True
        n = repo.fail_stale_intents(self.engine, reason="The runner that was carrying this out stopped; request it again.")
        if n:
            log.warning("failed %d intents left running by a previous runner", n)

    # -- state access for collectors ------------------------------------------------------------
    def _load_state(self, key: str) -> dict[str, Any] | None:
        with self._state_lock:
            if key in self._pending_state:
                return self._pending_state[key]
        return repo.load_state(self.engine, key=key)

    def take_max_lag(self) -> float:
        with self._lag_lock:
            lag, self._max_lag = self._max_lag, 0.0
        return lag

    def _targets(self) -> list[ServerTarget]:
        info = self.supervisor.targets_info() if self.supervisor else {}
        out = []
        for s in repo.list_servers(self.engine):
            assert s.id is not None
            launch_id, pids = info.get(s.id, (None, []))
            latest = repo.latest_launch(self.engine, server_id=s.id)
            if launch_id is None and latest is not None and latest.ended_at is None:
                launch_id = latest.id
            status = latest.status if latest is not None and latest.id == launch_id else None
            out.append(
                ServerTarget(
                    id=s.id,
                    name=s.name,
                    base_url=s.base_url,
                    kind=s.kind,
                    managed=s.managed,
                    log_path=s.log_path,
                    gpu_indices=s.gpu_indices,
                    api_key=s.api_key,
                    launch_id=launch_id,
                    pids=list(pids),
                    launch_status=status if s.managed else None,
                )
            )
        return out

    # -- polling ------------------------------------------------------------------------------
    def _poll_one(self, slot: _Slot, targets: list[ServerTarget]) -> None:
        staged: dict[str, dict[str, Any]] = {}

        def save_state(key: str, value: dict[str, Any]) -> None:
            # staged only: a poll that raises after saving must not move the position forward
            staged[key] = value

        def update_launch(launch_id: int, fields: dict[str, Any]) -> None:
            allowed = {k: v for k, v in fields.items() if k in ("server_args", "sglang_version", "pid")}
            if allowed:
                repo.update_launch(self.engine, launch_id=launch_id, **allowed)

        ctx = CollectorContext(
            servers=targets, load_state=self._load_state, save_state=save_state, update_launch=update_launch
        )
        result = slot.collector.poll(ctx)
        with self._state_lock:
            self._pending_state.update(staged)
        self._queued_rows += len(result.samples) + len(result.events)
        self._queue.put(_Batch(list(result.samples), list(result.events), staged))

    def _schedule(self, now: float) -> None:
        targets: list[ServerTarget] | None = None
        for slot in self._slots:
            if slot.future is not None:
                if not slot.future.done():
                    continue
                exc = slot.future.exception()
                slot.future = None
                name = slot.collector.name
                if exc is None:
                    slot.failures = 0
                    slot.next_at = now + slot.collector.interval_s
                else:
                    slot.failures += 1
                    delay = min(slot.collector.interval_s * 2**slot.failures, self.max_backoff_s)
                    slot.next_at = now + delay
                    msg = f"Collector {name} failed: {exc} (retrying in {delay:.0f} s)"
                    log.warning(msg)
                    self._queue.put(
                        _Batch(events=[EventRow(time.time(), None, "collector_error", msg, "warning", raw=repr(exc)[:2000])])
                    )
            if slot.future is None and now >= slot.next_at:
                if targets is None:
                    targets = self._targets()
                slot.future = self._pool.submit(self._poll_one, slot, targets)

    # -- writing ------------------------------------------------------------------------------
    def flush(self) -> int:
        """Write everything queued in one transaction; returns rows written.

        If the write fails (a database locked past busy_timeout, a full disk), the batch is kept
        and retried first on the next flush: nothing collected is dropped, and collector state
        never gets ahead of the rows it describes.
        """
        batch = self._retry or _Batch()
        self._retry = None
        while True:
            try:
                b = self._queue.get_nowait()
            except queue.Empty:
                break
            batch.samples.extend(b.samples)
            batch.events.extend(b.events)
            batch.states.update(b.states)
        self._queued_rows = 0
        if not (batch.samples or batch.events or batch.states):
            return 0
        try:
            with self.engine.begin() as conn:
                repo.insert_sample_tuples(
                    conn,
                    rows=[(s.ts, s.server_id, s.launch_id, s.source, s.metric, s.value) for s in batch.samples],
                )
                repo.insert_events(
                    conn,
                    rows=[
                        {"ts": e.ts, "server_id": e.server_id, "launch_id": e.launch_id, "kind": e.kind,
                         "severity": e.severity, "message": e.message, "raw": e.raw}
                        for e in batch.events
                    ],
                )
                for key, value in batch.states.items():
                    repo.save_state(conn, key=key, value=value)
        except Exception as exc:
            self._retry = batch
            self.write_failures += 1
            log.error(
                "could not write %d rows (%s); keeping them and retrying — check that no other "
                "process holds the database locked and that the disk has room",
                len(batch.samples) + len(batch.events), exc,
            )
            return 0
        with self._state_lock:
            for key, value in batch.states.items():
                if self._pending_state.get(key) is value:
                    del self._pending_state[key]
        n = len(batch.samples) + len(batch.events)
        self.rows_written += n
        return n

    # -- intents ------------------------------------------------------------------------------
    def _run_intent(self, intent: Intent, handler: IntentHandler) -> None:
        try:
            handler(intent)
        except Exception as exc:  # a handler bug must not kill the runner
            log.exception("intent %s failed", intent.id)
            assert intent.id is not None
            repo.update_intent(self.engine, intent_id=intent.id, state="failed", message=f"{type(exc).__name__}: {exc}")

    def _dispatch_intents(self) -> None:
        for lane, kinds in (("control", CONTROL_KINDS), ("probe", PROBE_KINDS)):
            fut = self._lanes[lane]
            if fut is not None and not fut.done():
                continue
            handled = [k for k in kinds if k in self.intent_handlers]
            if not handled:
                continue
            intent = repo.claim_next_intent(self.engine, kinds=handled)
            if intent is not None:
                self._lanes[lane] = self._lane_pool.submit(self._run_intent, intent, self.intent_handlers[intent.kind])

    # -- main loop ----------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    def run(self, *, duration_s: float | None = None) -> None:
        """Run until stop() (or for duration_s); always flushes and releases the lease."""
        if not self._acquired:
            self.acquire()
        started = time.monotonic()
        last_flush = last_beat = last_rollup = time.monotonic()
        expected = time.monotonic()
        try:
            while not self._stop.is_set():
                now_m = time.monotonic()
                with self._lag_lock:
                    self._max_lag = max(self._max_lag, max(0.0, now_m - expected))
                try:
                    self._schedule(now_m)
                except Exception:  # e.g. the database restarting: keep the loop alive
                    log.exception("scheduling collectors failed; retrying")
                if self.supervisor is not None:
                    try:
                        self.supervisor.tick()
                    except Exception:
                        log.exception("supervisor tick failed")
                try:
                    self._dispatch_intents()
                except OperationalError as exc:
                    log.warning("could not read intents (will retry): %s", exc)
                if now_m - last_flush >= self.flush_s or self._queued_rows >= self.flush_rows:
                    self.flush()
                    last_flush = now_m
                if now_m - last_beat >= 2.0:
                    try:
                        if not repo.renew_lease(self.engine, holder=self.holder):
                            log.error("lost the runner lease to another runner; stopping and "
                                      "leaving its servers to it")
                            self.lost_lease = True
                            break
                    except OperationalError as exc:  # locked: try again at the next beat
                        log.warning("could not renew the runner lease: %s", exc)
                    last_beat = now_m
                if now_m - last_rollup >= 60.0:
                    self._roll_up()
                    last_rollup = now_m
                if duration_s is not None and now_m - started >= duration_s:
                    break
                expected = time.monotonic() + self.tick_s
                self._stop.wait(self.tick_s)
        finally:
            self._shutdown()

    def _roll_up(self) -> None:
        """Minute and quarter-hour Rollups of what was flushed. The first call looks back an hour
        (a restart catches up); later ones read only the samples since the last call, not the
        whole hour again (62 series at 1 Hz are 223k rows an hour). Minutes are rolled up
        ROLLUP_LAG_S after they end, so a poll queued at the end of a minute is in its rollup."""
        until = time.time() - ROLLUP_LAG_S
        lookback = 3600.0 if self._rolled_until is None else min(3600.0, until - self._rolled_until + 120.0)
        try:
            repo.compute_rollups(self.engine, until=until, lookback_s=lookback, known_series=self._series)
            self._rolled_until = until
        except Exception as exc:
            log.warning("could not write rollups (will retry): %s", exc)

    def _shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.supervisor is not None and not self.lost_lease:
            try:
                self.supervisor.shutdown()
            except Exception:
                log.exception("supervisor shutdown failed")
        for handler in set(self.intent_handlers.values()):
            close = getattr(handler, "close", None)  # e.g. the probe handler stops its sweeps
            if callable(close):
                try:
                    close()
                except Exception:
                    log.exception("closing an intent handler failed")
        self._lane_pool.shutdown(wait=False, cancel_futures=True)
        try:
            self.flush()
        finally:
            for slot in self._slots:
                try:
                    slot.collector.close()
                except Exception:
                    log.exception("closing collector %s failed", slot.collector.name)
            if not self.lost_lease:
                repo.release_lease(self.engine, holder=self.holder)
