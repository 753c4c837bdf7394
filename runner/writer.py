"""The runner's batched writer: one queue, one transaction per flush.

Collectors' rows (samples, events) and the state they saved (log offsets, last counter values)
go onto one queue; `flush()` writes everything queued in ONE transaction, so a runner killed at
any instant either committed a poll's rows and its new offset, or neither (no loss, no double
count on restart).

No row can blind the writer. Before a batch is written every row is checked
(runner/writer_rows.py: a NaN or infinite value, a value that is not a number, an empty required
field, over-long or unstorable text, an unknown event kind, a state that is not JSON without
NaN); a row that fails is set aside and the rest of the batch is written. Should the database
still refuse the batch for a row of its own (an IntegrityError or DataError, a value the driver
cannot bind), the batch is written again in the same transaction through savepoints, halving
the part that fails until the refused rows are found (at most MAX_ISOLATION_STEPS savepoints a
flush; a part still refused past that is set aside whole), so good rows land in that flush.
Rows set aside are reported by ONE `collector_error` event per (server, reason) episode, naming
the server, the metrics (or kinds, or state keys) and the reason; an episode ends when that
server has sent no such row for EPISODE_GAP_S. That event is written in a transaction of its
own, never in the batch it reports on.

A flush that fails for the database's own reason (locked past busy_timeout, a full disk, the
server down) keeps its batch and retries it first next time, up to MAX_RETRY_ROWS samples: past
that the oldest samples are dropped (memory stays bounded while the database is down for hours),
and once writes succeed again ONE `collector_error` event, in its own transaction, says how many
were dropped and why.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from collectors.base import EventRow, SampleRow
from runner.writer_rows import (
    REFUSED,
    Aside,
    check_event,
    check_sample,
    check_state,
    shown,
    state_owner,
)
from storage import repo

log = logging.getLogger("pitwall.runner")

MAX_RETRY_ROWS = 200_000  # samples kept for retry while writes fail (~100 bytes each: ~20 MB)
MAX_ISOLATION_STEPS = 256  # savepoints one flush may spend finding rows the database refuses
EPISODE_GAP_S = 600.0  # a (server, reason) with no row set aside for this long ends its episode
MAX_NOTICES = 100  # set-aside / dropped events kept while the database refuses writes
NAMES_SHOWN = 5  # metrics (kinds, keys) named in one set-aside event


@dataclass
class Batch:
    samples: list[SampleRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)


def row_problem(exc: BaseException) -> bool:
    """True when the database refused a write for a row's content (worth isolating the row),
    False when the database itself failed (locked, down, full: keep the batch and retry)."""
    if isinstance(exc, (sa_exc.IntegrityError, sa_exc.DataError)):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        text = str(exc.orig)
        return "binding parameter" in text or "cannot adapt" in text  # sqlite3 / psycopg: a value's type
    if isinstance(exc, sa_exc.StatementError):
        return True  # raised in Python while preparing a parameter, before the database saw it
    return isinstance(exc, (ValueError, TypeError, OverflowError, UnicodeError))


def _save_states(conn: Connection, rows: list[tuple[str, dict[str, Any]]]) -> None:
    for key, value in rows:
        repo.save_state(conn, key=key, value=value)


class _Budget:
    def __init__(self, steps: int) -> None:
        self.left = steps


class BatchWriter:
    def __init__(self, engine: Engine, max_retry_rows: int = MAX_RETRY_ROWS) -> None:
        self.engine = engine
        self.max_retry_rows = max_retry_rows
        self.dropped_rows = 0  # samples dropped since the last successful write
        self.rows_written = 0
        self.write_failures = 0
        self.rows_set_aside = 0  # rows never written because they cannot be stored (since start)
        self.queued_rows = 0  # approximate; only decides when to flush early
        self._queue: queue.Queue[Batch] = queue.Queue()
        self._retry: Batch | None = None
        self._pending_state: dict[str, dict[str, Any]] = {}
        self._state_lock = threading.Lock()
        self._episodes: dict[tuple[int | None, str], float] = {}  # (server, reason) -> last seen (monotonic)
        self._notices: list[EventRow] = []  # events about the writer itself, each written on its own

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
        """Write everything queued in one transaction; returns rows written (with the writer's
        own events)."""
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
        batch, aside = self._screen(batch)
        n = 0
        if batch.samples or batch.events or batch.states:
            try:
                n, refused = self._write(batch)
            except Exception as exc:
                self._retry = batch
                self.write_failures += 1
                log.error(
                    "could not write %d rows (%s); keeping them and retrying — check that no other "
                    "process holds the database locked and that the disk has room",
                    len(batch.samples) + len(batch.events), exc,
                )
                self._note_aside(aside)  # reported once the database takes writes again
                return 0
            aside += refused
            with self._state_lock:
                for key, value in batch.states.items():
                    if self._pending_state.get(key) is value:
                        del self._pending_state[key]
        if self.dropped_rows:
            self._notices.append(EventRow(
                time.time(), None, "collector_error",
                f"Dropped the {self.dropped_rows} oldest samples: the database refused writes and "
                f"the runner keeps at most {self.max_retry_rows} samples for retry (limit); check "
                "that no other process holds the database locked and that the disk has room.",
            ))
            self.dropped_rows = 0
        self._note_aside(aside)
        n += self._write_notices()
        self.rows_written += n
        return n

    # -- checks before the write ------------------------------------------------------------------
    def _screen(self, batch: Batch) -> tuple[Batch, list[Aside]]:
        """The batch without the rows no database can store, and those rows."""
        aside: list[Aside] = []
        good = Batch()
        for s in batch.samples:
            row, why = check_sample(s)
            if why is None and row is not None:
                good.samples.append(SampleRow(row[0], row[1], row[4], row[5], row[3], row[2]))
            elif why is not None:
                aside.append(why)
        for e in batch.events:
            ev, why = check_event(e)
            if why is None and ev is not None:
                good.events.append(EventRow(ev["ts"], ev["server_id"], ev["kind"], ev["message"],
                                            ev["severity"], ev["raw"], ev["launch_id"]))
            elif why is not None:
                aside.append(why)
        for key, value in batch.states.items():
            why = check_state(key, value)
            if why is None:
                good.states[key] = value
            else:
                aside.append(why)
        return good, aside

    # -- the write ----------------------------------------------------------------------------------
    def _write(self, batch: Batch) -> tuple[int, list[Aside]]:
        """Write the batch in one transaction; (rows written, rows the database refused).
        Raises when the database itself fails (the caller keeps the batch for retry)."""
        samples = [(s.ts, s.server_id, s.launch_id, s.source, s.metric, s.value) for s in batch.samples]
        events = [{"ts": e.ts, "server_id": e.server_id, "launch_id": e.launch_id, "kind": e.kind,
                   "severity": e.severity, "message": e.message, "raw": e.raw} for e in batch.events]
        try:
            with self.engine.begin() as conn:
                repo.insert_sample_tuples(conn, rows=samples)
                repo.insert_events(conn, rows=events)
                for key, value in batch.states.items():
                    repo.save_state(conn, key=key, value=value)
            return len(samples) + len(events), []
        except Exception as exc:
            if not row_problem(exc):
                raise
            log.warning("the database refused a row of a batch (%s); finding it and writing the rest",
                        shown(str(exc), 300))
        refused: list[Aside] = []
        budget = _Budget(MAX_ISOLATION_STEPS)
        with self.engine.begin() as conn:
            ok_samples = self._isolate(conn, samples, lambda c, rows: repo.insert_sample_tuples(c, rows=rows),
                                       lambda r: Aside(r[1], REFUSED, r[4], shown(r[5])), budget, refused)
            ok_events = self._isolate(conn, events, lambda c, rows: repo.insert_events(c, rows=rows),
                                      lambda r: Aside(r["server_id"], REFUSED, f"event {r['kind']}"),
                                      budget, refused)
            for key, value in batch.states.items():
                self._isolate(conn, [(key, value)], _save_states,
                              lambda r: Aside(state_owner(r[0]), REFUSED, f"state {r[0]}"), budget, refused)
        return ok_samples + ok_events, refused

    def _isolate(self, conn: Connection, rows: Sequence[Any], insert: Callable[[Connection, list[Any]], Any],
                 describe: Callable[[Any], Aside], budget: _Budget, refused: list[Aside]) -> int:
        """Insert `rows` under savepoints, halving a part the database refuses for a row's
        content; returns the rows written. A database failure propagates (batch retried)."""
        written = 0
        parts = [list(rows)] if rows else []
        while parts:
            part = parts.pop()
            if budget.left <= 0:
                refused.extend(describe(r) for r in part)
                continue
            budget.left -= 1
            try:
                with conn.begin_nested():
                    insert(conn, part)
                written += len(part)
            except Exception as exc:
                if not row_problem(exc):
                    raise
                if len(part) == 1:
                    refused.append(describe(part[0]))
                else:
                    mid = len(part) // 2
                    parts += [part[mid:], part[:mid]]
        return written

    # -- the writer's own events ------------------------------------------------------------------
    def _note_aside(self, aside: list[Aside]) -> None:
        """One event per new (server, reason) episode among `aside`."""
        now = time.monotonic()
        for key in [k for k, seen in self._episodes.items() if now - seen > EPISODE_GAP_S]:
            del self._episodes[key]
        if not aside:
            return
        self.rows_set_aside += len(aside)
        groups: dict[tuple[int | None, str], list[Aside]] = {}
        for a in aside:
            groups.setdefault((a.server_id, a.reason), []).append(a)
        for key, rows in groups.items():
            new = key not in self._episodes
            self._episodes[key] = now
            if new and len(self._notices) < MAX_NOTICES:
                self._notices.append(self._aside_event(key[0], key[1], rows))

    def _aside_event(self, server_id: int | None, reason: str, rows: list[Aside]) -> EventRow:
        whats = list(dict.fromkeys(a.what for a in rows))
        named = ", ".join(whats[:NAMES_SHOWN]) + (f" and {len(whats) - NAMES_SHOWN} more" if len(whats) > NAMES_SHOWN else "")
        who = "with no server" if server_id is None else f"of server {self._server_name(server_id)}"
        msg = (f"Set aside {len(rows)} row{'s' if len(rows) != 1 else ''} {who} that the database cannot "
               f"store: {reason} ({named}); every other row was written. Later rows like these are set "
               f"aside without another event until none arrives for {EPISODE_GAP_S / 60:.0f} min; check "
               "what that server sends (its /metrics, log or API answer).")
        raw = "; ".join(f"{a.what}={a.shown}" if a.shown else a.what for a in rows[:20])
        return EventRow(time.time(), server_id, "collector_error", msg, raw=raw)

    def _server_name(self, server_id: int) -> str:
        try:
            server = repo.get_server(self.engine, id=server_id)
        except Exception:
            server = None
        return f"{server.name!r} (id {server_id})" if server is not None else f"id {server_id}"

    def _write_notices(self) -> int:
        """The writer's own events, in a transaction of their own; kept for later on failure."""
        if not self._notices:
            return 0
        notices, self._notices = self._notices, []
        rows = []
        for e in notices:
            ev, _ = check_event(e)  # our own text, cut and cleaned like any other event
            if ev is not None:
                rows.append(ev)
        try:
            with self.engine.begin() as conn:
                repo.insert_events(conn, rows=rows)
        except Exception as exc:
            self._notices = notices + self._notices
            log.error("could not write the writer's own %d events (%s); retrying", len(rows), exc)
            return 0
        return len(rows)
