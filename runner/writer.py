"""The runner's batched writer: one queue, one transaction per flush.

Collectors' rows (samples, events) and the state they saved (log offsets, last counter values)
go onto one queue; `flush()` writes everything queued in ONE transaction, so a runner killed at
any instant either committed a poll's rows and its new offset, or neither (no loss, no double
count on restart). A flush that fails (a database locked past busy_timeout, a full disk) keeps
its batch and retries it first next time, up to MAX_RETRY_ROWS samples: past that the oldest
samples are dropped (memory stays bounded while the database is down for hours), and the first
write that succeeds again carries ONE `collector_error` event saying how many were dropped and why.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from collectors.base import EventRow, SampleRow
from storage import repo

log = logging.getLogger("pitwall.runner")

MAX_RETRY_ROWS = 200_000  # samples kept for retry while writes fail (~100 bytes each: ~20 MB)


@dataclass
class Batch:
    samples: list[SampleRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)


class BatchWriter:
    def __init__(self, engine: Engine, max_retry_rows: int = MAX_RETRY_ROWS) -> None:
        self.engine = engine
        self.max_retry_rows = max_retry_rows
        self.dropped_rows = 0  # samples dropped since the last successful write
        self.rows_written = 0
        self.write_failures = 0
        self.queued_rows = 0  # approximate; only decides when to flush early
        self._queue: queue.Queue[Batch] = queue.Queue()
        self._retry: Batch | None = None
        self._pending_state: dict[str, dict[str, Any]] = {}
        self._state_lock = threading.Lock()

    def put(self, batch: Batch) -> None:
        if batch.states:
            with self._state_lock:
                self._pending_state.update(batch.states)
        self.queued_rows += len(batch.samples) + len(batch.events)
        self._queue.put(batch)

    def load_state(self, key: str) -> dict[str, Any] | None:
        """A collector's saved state: the newest queued value, else the stored one."""
        with self._state_lock:
            if key in self._pending_state:
                return self._pending_state[key]
        return repo.load_state(self.engine, key=key)

    def flush(self) -> int:
        """Write everything queued in one transaction; returns rows written."""
        batch = self._retry or Batch()
        self._retry = None
        while True:
            try:
                b = self._queue.get_nowait()
            except queue.Empty:
                break
            batch.samples.extend(b.samples)
            batch.events.extend(b.events)
            batch.states.update(b.states)
        self.queued_rows = 0
        if len(batch.samples) > self.max_retry_rows:
            over = len(batch.samples) - self.max_retry_rows
            del batch.samples[:over]  # the oldest: the newest say more about now
            self.dropped_rows += over
        if not (batch.samples or batch.events or batch.states):
            return 0
        events = list(batch.events)
        if self.dropped_rows:
            events.append(EventRow(
                time.time(), None, "collector_error",
                f"Dropped the {self.dropped_rows} oldest samples: the database refused writes and "
                f"the runner keeps at most {self.max_retry_rows} samples for retry (limit); check "
                "that no other process holds the database locked and that the disk has room.",
                "warning",
            ))
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
                        for e in events
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
        self.dropped_rows = 0
        n = len(batch.samples) + len(events)
        self.rows_written += n
        return n
