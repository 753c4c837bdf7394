"""The runner loop (`pitwall collect`): schedules collectors, isolates failures, batches writes,
dispatches intents and ticks the supervisor of managed servers.

How it works:
- One scheduler loop (the main thread) wakes every `tick_s`. Each collector polls on its own
  interval in a worker thread; its PollResult and the state it saved go to the BatchWriter
  (runner/writer.py), flushed every `flush_s` or `flush_rows` rows in one transaction.
- A collector that raises records one `collector_error` event and is retried with exponential
  backoff (its interval x 2^failures, capped at `max_backoff_s`); the others carry on.
- Intents are claimed per lane (runner/intents.py): control (launch / stop / relaunch), probe
  (sweeps), check (profile validation), tune (a search over profiles), so a long sweep never blocks a relaunch. Claims are
  fenced by the host lease's generation (runner/lease.py); pending intents older than
  `intent_expiry_s` are expired (by the `db` holder).
- A fleet (several runners, one database, runner/lease.py): this runner sees only the servers of
  its `host` (runner.host): it collects from them, supervises them and claims their intents.
  Database-wide duties run only while it holds the `db` lease, retaken or renewed every beat:
  rollups (catch-up from the stored watermark when it takes `db` over), retention, alert
  evaluation and delivery, intent expiry, host-less intents and runner_lost / runner_back events
  (runner/fleet.py). Launch-log retention (local files) runs on every runner.
- Shutdown (SIGTERM / Ctrl-C / stop()): the supervisor stops every managed server FIRST, then
  sweeps are stopped, then the poll threads are given a bounded wait (a poll stuck on a stalled
  server never holds a server process alive), then the last flush and the lease release.
- Retention (storage/repo/retention.py, settings `retention.*_days`): every `retention_every_s`
  (the first pass `RETENTION_FIRST_S` after start) at most `retention_batches` deletes of at most
  `retention_batch_rows` rows, each its own transaction, so the writer waits one batch at most;
  then SQLite's incremental vacuum. A failed pass is logged and tried again at the next one.
- Alerts (runner/alerts, settings `alerting.*`, `[[alerts]]`): the loop ticks the Alerting
  component, which evaluates the rules and sends the outbox every `alerting.eval_interval_s` in
  its own thread.
- Own metrics (runner/own_metrics.py, settings `metrics.port` / `metrics.host`): the runner serves
  Pitwall's own Prometheus `/metrics` while it holds the lease (off when the port is 0).
- The built-in `self` collector records the runner's CPU (self.cpu_pct, % of one core), scheduler
  loop lag (self.loop_lag_s) and rows written per second (self.rows_per_s), on server_id 0 with
  source `self:<runner.host>` (SELF_SOURCE), so the runners of a fleet keep their own figures
  without a Server row that pages would list.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from collectors.base import (
    Collector,
    CollectorContext,
    CollectorError,
    EventRow,
    ServerTarget,
    engine_of,
)
from collectors.engines import get_engine
from runner import fleet, launch_logs
from runner.intents import IntentHandler, IntentLanes
from runner.lease import LEASE_TTL_S, RENEW_EVERY_S, Lease, LeaseHeld
from runner.self_metrics import SELF_SERVER_ID, SelfCollector, self_source
from runner.writer import Batch, BatchWriter
from storage import repo
from storage.db import incremental_vacuum

__all__ = ["LEASE_TTL_S", "SELF_SERVER_ID", "LeaseHeld", "Runner", "Supervisor", "self_source"]

log = logging.getLogger("pitwall.runner")

FLEET_WATCH_S = 5.0  # the db holder checks the other runners' heartbeats this often
ROLLUP_LAG_S = 5.0  # a minute is rolled up this long after it ends (late polls land first)
CATCHUP_SLICE_S = 3600.0  # rollup catch-up reads at most this much raw time at once
CATCHUP_SLICES_PER_PASS = 4
CATCHUP_MAX_S = 7 * 86400.0  # never catch up further back than this (raw retention's default)
POLL_JOIN_S = 5.0  # at shutdown, how long poll threads get to finish before we move on (every
# read has its own total deadline, collectors.http.get_capped; `pitwall collect` exits past the rest)
INTENT_EXPIRY_S = 900.0
RETENTION_FIRST_S = 60.0  # the first retention pass, seconds after start (not during start-up)


class Supervisor(Protocol):
    """What the runner needs from the server supervisor (runner/supervisor.py)."""

    def handle_intent(self, intent: Any) -> None: ...

    def tick(self) -> None: ...

    def targets_info(self) -> dict[int, tuple[int | None, list[int]]]: ...

    def shutdown(self) -> None: ...

    def set_fence(self, fence: Callable[[], bool]) -> None: ...


@dataclass
class _Slot:
    collector: Collector
    next_at: float = 0.0
    failures: int = 0
    future: Future[Any] | None = None


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
        intent_expiry_s: float = INTENT_EXPIRY_S,
        retention: dict[str, Any] | None = None,
        retention_every_s: float = 600.0,
        retention_batch_rows: int = 5000,
        retention_batches: int = 20,
        logs_dir: Path | None = None,
        alerting: Any | None = None,
        exporter: Any | None = None,
        host: str | None = None,
        lease_ttl_s: float = LEASE_TTL_S,
    ) -> None:
        self.engine = engine
        self.supervisor = supervisor
        self.tick_s = tick_s
        self.flush_s = flush_s
        self.flush_rows = flush_rows
        self.max_backoff_s = max_backoff_s
        self.lease = Lease(engine, holder, lease_ttl_s, host=host)
        self.host = self.lease.host  # runner.host: the servers, intents and NVML this runner owns
        self.writer = BatchWriter(engine)
        self.intents = IntentLanes(engine, intent_handlers or {}, expiry_s=intent_expiry_s)
        self.lost_lease = False  # another runner took over: its servers are not ours to stop
        self._max_lag = 0.0
        self._lag_lock = threading.Lock()
        self._rolled_until: float | None = None  # end of the last successful compute_rollups
        self._housekeeping_since: float | None = None  # monotonic time this runner took `db`
        self._series: set[tuple[int, str]] = set()  # (server_id, metric) rolled up since start
        self.retention = retention  # {samples_days, ...}; None: the runner deletes nothing
        self.retention_every_s = retention_every_s
        self.retention_batch_rows = retention_batch_rows
        self.retention_batches = retention_batches
        self.logs_dir = logs_dir  # launch logs kept by size (retention.launch_logs_mb) live here
        self.alerting = alerting  # runner/alerts Alerting: rule passes and delivery in its own thread
        self.exporter = exporter  # runner/own_metrics MetricsServer: Pitwall's own /metrics, or None
        self._slots = [_Slot(c) for c in collectors] + [_Slot(SelfCollector(self))]
        self._unknown_engines: set[tuple[int, str]] = set()  # (server id, engine) already reported
        self._pool = ThreadPoolExecutor(max_workers=max(2, len(self._slots)), thread_name_prefix="poll")
        self._stop = threading.Event()
        if supervisor is not None:
            supervisor.set_fence(self.lease.held)

    # -- compatibility views --------------------------------------------------------------------
    @property
    def holder(self) -> str:
        return self.lease.holder

    @property
    def rows_written(self) -> int:
        return self.writer.rows_written

    @property
    def write_failures(self) -> int:
        return self.writer.write_failures

    def flush(self) -> int:
        return self.writer.flush()

    # -- lease --------------------------------------------------------------------------------
    def acquire(self) -> None:
        self.lease.acquire()
        self._fail_stale(self.lease.scope)
        self._housekeeping_since = None
        self._check_db()

    def _fail_stale(self, scope: str) -> None:
        # a launch whose server may still come up is the supervisor's to judge when it adopts it
        n = repo.fail_stale_intents(self.engine, reason="The runner that was carrying this out stopped; request it again.",
                                    scope=scope, keep_in_flight=self.supervisor is not None and scope != repo.DB_SCOPE)
        if n:
            log.warning("failed %d intents left running by a previous runner (%s)", n, scope)

    def _check_db(self) -> None:
        """After a beat: on taking `db` over, fail the host-less intents the previous holder left
        running, expire old ones and catch rollups up from the stored watermark."""
        if not self.lease.holds_db:
            self._housekeeping_since = None
            return
        if self._housekeeping_since is None:
            self._housekeeping_since = time.monotonic()
            self._rolled_until = None
            self._fail_stale(repo.DB_SCOPE)
            self.intents.expire()

    def take_max_lag(self) -> float:
        with self._lag_lock:
            lag, self._max_lag = self._max_lag, 0.0
        return lag

    def _targets(self) -> list[ServerTarget]:
        info = self.supervisor.targets_info() if self.supervisor else {}
        out = []
        for s in repo.list_servers(self.engine, host=self.host):
            assert s.id is not None
            launch_id, pids = info.get(s.id, (None, []))
            latest = repo.latest_launch(self.engine, server_id=s.id)
            if launch_id is None and latest is not None and latest.ended_at is None:
                launch_id = latest.id
            status = latest.status if latest is not None and latest.id == launch_id else None
            self._check_engine(s.id, s.name, s.engine)
            out.append(
                ServerTarget(
                    id=s.id, name=s.name, base_url=s.base_url, kind=s.kind, managed=s.managed,
                    log_path=s.log_path, gpu_indices=s.gpu_indices, api_key=s.api_key,
                    launch_id=launch_id, pids=list(pids), launch_status=status if s.managed else None,
                    host=s.host, prometheus_url=s.prometheus_url or None,
                    prometheus_selector=s.prometheus_selector, engine=s.engine,
                    service=s.service, role=s.role, metrics_url=s.metrics_url,
                )
            )
        return out

    def _check_engine(self, server_id: int, name: str, engine: str) -> None:
        """One collector_error event per server whose engine is not registered: no engine's
        collectors read it (engine_of), the engine-neutral ones (GPU, canary) still do."""
        if (server_id, engine) in self._unknown_engines:
            return
        try:
            get_engine(engine)
        except CollectorError as exc:
            self._unknown_engines.add((server_id, engine))
            msg = f"Server {name}: {exc} Until then its log, metrics and API are not read."
            log.warning(msg)
            self.writer.put(Batch(events=[EventRow(time.time(), server_id, "collector_error", msg)]))

    # -- polling ------------------------------------------------------------------------------
    def _poll_one(self, slot: _Slot, targets: list[ServerTarget]) -> None:
        staged: dict[str, dict[str, Any]] = {}

        def save_state(key: str, value: dict[str, Any]) -> None:
            # staged only: a poll that raises after saving must not move the position forward
            staged[key] = value

        def update_launch(launch_id: int, fields: dict[str, Any]) -> None:
            allowed = {k: v for k, v in fields.items() if k in ("server_args", "engine_version", "pid")}
            if allowed:
                repo.update_launch(self.engine, launch_id=launch_id, **allowed)

        engine = engine_of(slot.collector)
        if engine is not None:  # an engine's collector reads only that engine's servers
            targets = [t for t in targets if t.engine == engine]
        ctx = CollectorContext(
            servers=targets, load_state=self.writer.load_state, save_state=save_state,
            update_launch=update_launch,
        )
        result = slot.collector.poll(ctx)
        self.writer.put(Batch(list(result.samples), list(result.events), staged))

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
                    msg = f"Collector {name} failed: {exc} (retrying in {delay:.3g} s)"
                    log.warning(msg)
                    self.writer.put(
                        Batch(events=[EventRow(time.time(), None, "collector_error", msg, raw=repr(exc)[:2000])])
                    )
            if slot.future is None and now >= slot.next_at:
                if targets is None:
                    targets = self._targets()
                slot.future = self._pool.submit(self._poll_one, slot, targets)

    # -- main loop ----------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    def run(self, *, duration_s: float | None = None) -> None:
        """Run until stop() (or for duration_s); always stops servers, flushes and releases."""
        if not self.lease.acquired:
            self.acquire()
        started = time.monotonic()
        last_flush = last_beat = last_rollup = last_expiry = time.monotonic()
        last_watch = 0.0
        next_retention = started + RETENTION_FIRST_S
        expected = time.monotonic()
        if self.exporter is not None:
            self.exporter.start()  # after the lease: only the runner that holds it serves /metrics
        try:
            while not self._stop.is_set():
                now_m = time.monotonic()
                with self._lag_lock:
                    self._max_lag = max(self._max_lag, max(0.0, now_m - expected))
                if now_m - last_beat >= RENEW_EVERY_S:
                    if not self._renew():
                        break
                    last_beat = now_m
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
                    self.intents.dispatch(self.lease.generation, host=self.host,
                                          db_generation=self.lease.db_generation)
                except OperationalError as exc:
                    log.warning("could not read intents (will retry): %s", exc)
                if now_m - last_flush >= self.flush_s or self.writer.queued_rows >= self.flush_rows:
                    self.flush()
                    last_flush = now_m
                housekeeping = self.lease.holds_db
                if housekeeping and now_m - last_expiry >= 5.0:
                    self.intents.expire()
                    last_expiry = now_m
                if housekeeping and now_m - last_watch >= FLEET_WATCH_S:
                    self._watch_fleet()
                    last_watch = now_m
                if housekeeping and now_m - last_rollup >= (2.0 if self.catching_up else 60.0):
                    self._roll_up()
                    last_rollup = now_m
                if self.retention and now_m >= next_retention:
                    if housekeeping:
                        self.retain(time.time())
                    self.retain_logs(time.time())  # this host's own files: every runner
                    next_retention = time.monotonic() + self.retention_every_s
                if housekeeping and self.alerting is not None:
                    self.alerting.tick()
                if duration_s is not None and now_m - started >= duration_s:
                    break
                expected = time.monotonic() + self.tick_s
                self._stop.wait(self.tick_s)
        finally:
            self._shutdown()

    def _renew(self) -> bool:
        try:
            if self.lease.renew():
                self._check_db()
                return True
        except OperationalError as exc:  # locked: try again at the next beat
            log.warning("could not renew the runner lease: %s", exc)
            return True
        log.error("lost the runner lease to another runner; stopping and leaving its servers to it")
        self.lost_lease = True
        return False

    def _watch_fleet(self) -> None:
        """runner_lost / runner_back for the other hosts' runners (runner/fleet.py)."""
        try:
            fleet.watch_hosts(self.engine, ttl_s=self.lease.ttl_s)
        except Exception as exc:
            log.warning("could not check the fleet's runners (will retry): %s", exc)

    def _roll_up(self) -> None:
        """Minute and quarter-hour Rollups of what was stored, oldest first.

        The first call after a start catches up: from the end of the newest rolled-up minute
        (or the oldest sample, at most CATCHUP_MAX_S back) to now, in slices of
        CATCHUP_SLICE_S, at most CATCHUP_SLICES_PER_PASS slices a call, so a runner that was
        down for hours fills every minute and quarter that has raw data (samples of the
        downtime reach storage too: the log tailer reads on from its saved offset) without
        holding the loop for long. Later calls read only the samples since the last call.
        Minutes are rolled up ROLLUP_LAG_S after they end, so a poll queued at the end of a
        minute is in it. compute_rollups skips what exists, so nothing is counted twice."""
        until = time.time() - ROLLUP_LAG_S
        try:
            if self._rolled_until is None:
                self._rolled_until = self._catchup_start(until)
            for _ in range(CATCHUP_SLICES_PER_PASS):
                start = self._rolled_until
                end = min(until, start + CATCHUP_SLICE_S)
                repo.compute_rollups(self.engine, until=end, lookback_s=end - start + 120.0,
                                     known_series=self._series)
                self._rolled_until = end
                if end >= until:
                    break
        except Exception as exc:
            log.warning("could not write rollups (will retry): %s", exc)

    @property
    def catching_up(self) -> bool:
        """Rollups are behind by more than one slice (the loop then rolls up every few seconds)."""
        return self._rolled_until is not None and time.time() - ROLLUP_LAG_S - self._rolled_until > CATCHUP_SLICE_S

    def _catchup_start(self, until: float) -> float:
        floor = until - CATCHUP_MAX_S
        mark = repo.rollup_watermark(self.engine)
        if mark is None:
            mark = repo.oldest_sample_ts(self.engine)
        start = max(floor, mark if mark is not None else until - 3600.0)
        # series whose last quarter was still open when the previous runner stopped get it closed
        self._series.update(repo.rollup_series_since(self.engine, since=start - repo.QUARTER_S))
        if until - start > CATCHUP_SLICE_S:
            log.info("catching up rollups from %.0f s ago, oldest first", until - start)
        return start

    def retain(self, now: float) -> dict[str, int]:
        """One bounded retention pass (rows deleted per table); a failure is logged, and the
        next pass tries again."""
        try:
            deleted = repo.apply_retention(self.engine, policy=self.retention or {}, now=now,
                                           batch_rows=self.retention_batch_rows, max_batches=self.retention_batches)
            if any(deleted.values()):
                incremental_vacuum(self.engine)
            return deleted
        except Exception as exc:
            log.warning("retention pass failed (will retry): %s", exc)
            return {}

    def retain_logs(self, now: float) -> tuple[int, int]:
        """Launch logs by size (runner/launch_logs.py): (files removed, bytes freed); never a live
        log. A failure is logged, and the next pass tries again."""
        budget = float((self.retention or {}).get("launch_logs_mb") or 0.0)
        if self.logs_dir is not None:  # the request records beside the logs (Settings.requests_dir)
            days = float((self.retention or {}).get("request_records_days") or 0.0)
            try:
                launch_logs.retain_records(self.logs_dir.parent / "requests", days, now)
            except OSError as exc:
                log.warning("request record retention failed (will retry): %s", exc)
        if self.logs_dir is None or budget <= 0:
            return 0, 0
        try:
            files, freed = launch_logs.apply(self.logs_dir, live=repo.live_log_paths(self.engine),
                                             budget_mb=budget, now=now)
        except Exception as exc:
            log.warning("launch log retention failed (will retry): %s", exc)
            return 0, 0
        if files:
            log.info("launch logs over %.0f MB: removed %d ended launch logs (%d bytes)", budget, files, freed)
        return files, freed

    def _shutdown(self) -> None:
        # 1. servers first: nothing may keep a server process alive past the runner's own end
        if self.supervisor is not None and not self.lost_lease:
            try:
                self.supervisor.shutdown()
            except Exception:
                log.exception("supervisor shutdown failed")
        # 2. sweeps and other intent work (their handlers stop their child processes)
        self.intents.close()
        if self.alerting is not None:
            self.alerting.close()
        if self.exporter is not None:
            self.exporter.close()
        # 3. polls get a bounded wait: one stuck on a stalled server is abandoned (daemon-like)
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + POLL_JOIN_S
        for slot in self._slots:
            if slot.future is not None and not slot.future.done():
                try:
                    slot.future.result(timeout=max(0.0, deadline - time.monotonic()))
                except Exception:
                    pass
        try:
            self.flush()
        finally:
            for slot in self._slots:
                try:
                    slot.collector.close()
                except Exception:
                    log.exception("closing collector %s failed", slot.collector.name)
            try:  # each lease only while still ours (fenced by generation): with the host lease
                self.lease.release()  # lost, a `db` lease still held is given up, not left to expire
            except Exception:
                log.exception("releasing the runner lease failed")
