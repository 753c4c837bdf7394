"""Following every server's log file, for any engine: the poll loop an engine's log collector
stands on. Engine-neutral; the engine's subclass turns lines into rows.

Each poll reads every server's log in a daemon thread of its own (log_tail.read_off_thread), all
at once, and waits at most `read_deadline_s` for them: a read stuck in a hung mount holds only its
server, whose lines come in a later poll. A failure, a refused path (log_tail.py says what is
refused) or a stuck read of one server is ONE `collector_error` per server per episode (again only
after a clean read, or when the problem changes); the other servers' rows come back in the same
poll. A server seen for the first time is read from the start of its log (`start_at_end=True`
reads only new lines), at most `max_bytes_per_poll` a poll. The tail is rewound when the runner
did not commit the state the subclass last saved (`FollowedLog.last_saved`), or the path changed.

A subclass sets `name` and implements `_follow(path, tailer, saved)` (its per-server state, a
FollowedLog, `saved` the committed state it resumes from, None for a fresh start) and
`_rows(ctx, server, followed, lines)` (the rows of the lines read; it saves the state under
`state_key(server.id)` and sets `followed.last_saved`).
"""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from typing import Any

from collectors.base import CollectorContext, EventRow, PollResult, ServerTarget
from collectors.log_tail import Line, LogTailer, TailState, read_off_thread

#: How long one poll waits for the servers' log reads before it returns without the slow ones.
READ_DEADLINE_S = 2.0


@dataclass
class FollowedLog:
    """One server's log as followed: its path, tailer, the state last saved, a read in flight."""

    path: str
    tailer: LogTailer
    last_saved: dict[str, Any] | None = None
    reading: Future[list[Line]] | None = None  # a read not collected yet (a slow filesystem)


class LogFollowCollector:
    """Collector protocol (collectors/base.py) over every ServerTarget with a `log_path`."""

    name: str
    interval_s = 1.0

    def __init__(self, *, max_bytes_per_poll: int = 4 << 20, start_at_end: bool = False,
                 read_deadline_s: float = READ_DEADLINE_S) -> None:
        self.max_bytes_per_poll = max_bytes_per_poll
        self.start_at_end = start_at_end
        self.read_deadline_s = read_deadline_s
        self._servers: dict[int, FollowedLog] = {}
        self._episode: dict[int, str] = {}  # server id -> the problem last reported (one event)

    def state_key(self, server_id: int) -> str:
        return f"{self.name}:{server_id}:tail"

    # -- the engine's part ----------------------------------------------------------------------

    def _follow(self, path: str, tailer: LogTailer, saved: dict[str, Any] | None) -> FollowedLog:
        raise NotImplementedError

    def _rows(self, ctx: CollectorContext, server: ServerTarget, followed: Any, lines: list[Line]) -> PollResult:
        raise NotImplementedError

    # -- the loop -------------------------------------------------------------------------------

    def poll(self, ctx: CollectorContext) -> PollResult:
        result = PollResult()
        jobs: list[tuple[ServerTarget, FollowedLog]] = []
        started: list[Future[list[Line]]] = []  # a read still stuck from a past poll: not waited
        for server in ctx.servers:
            if not server.log_path:
                continue
            try:
                f = self._followed(ctx, server)
                if f.reading is None:
                    f.reading = read_off_thread(f.tailer, f"log-read-{server.id}")
                    started.append(f.reading)
                jobs.append((server, f))
            except Exception as exc:  # noqa: BLE001 - one server's failure must not end the poll
                self._report(ctx, result, server, self._failure(server, exc))
        futures_wait(started, timeout=self.read_deadline_s)
        for server, f in jobs:
            fut = f.reading
            if fut is None or not fut.done():
                self._report(ctx, result, server, (
                    f"reading the log of server {server.name!r} at {server.log_path!r} took "
                    f"longer than {self.read_deadline_s:g} s (a hung network or FUSE mount?); "
                    "the other servers are read without waiting for it and its lines are read "
                    "when the read returns: check that filesystem"))
                continue
            f.reading = None
            try:
                lines = fut.result()
                refused = f.tailer.refused
                res = self._rows(ctx, server, f, lines)
            except Exception as exc:  # noqa: BLE001 - see above
                self._report(ctx, result, server, self._failure(server, exc))
                continue
            result.extend(res)
            if refused is not None:
                self._report(ctx, result, server, (
                    f"refusing the log of server {server.name!r} at {server.log_path!r}: it "
                    f"{refused.why}; Pitwall reads a log only from a regular file, never through "
                    "a symlink, a FIFO, a device or a folder: set log_path to the log file itself"))
            else:
                self._episode.pop(server.id, None)  # read cleanly: the next problem is news
        seen = {server.id for server, _ in jobs}
        for sid in [s for s in self._servers if s not in seen]:
            self._drop(self._servers.pop(sid))
            self._episode.pop(sid, None)
        return result

    def close(self) -> None:
        for f in self._servers.values():
            self._drop(f)
        self._servers.clear()

    @staticmethod
    def _drop(f: FollowedLog) -> None:
        if f.reading is None or f.reading.done():
            f.tailer.close()
        # else: a read is stuck in that file; closing under it could block this thread too.
        # The reader thread ends with the read and the file is closed when it is collected.

    def _followed(self, ctx: CollectorContext, server: ServerTarget) -> FollowedLog:
        """This server's followed log, rewound when the runner did not commit what was last
        handed over, or the log moved."""
        saved = ctx.load_state(self.state_key(server.id))
        f = self._servers.get(server.id)
        if f is not None and f.reading is None and (f.path != server.log_path or (
                saved is not None and f.last_saved is not None and saved != f.last_saved)):
            f.tailer.close()
            f = None
        if f is None:
            path = server.log_path or ""
            st = TailState.from_dict(saved) if saved and saved.get("path") == path else None
            tailer = LogTailer(path, st, max_bytes=self.max_bytes_per_poll, start_at_end=self.start_at_end)
            f = self._servers[server.id] = self._follow(path, tailer, saved if st is not None else None)
            f.last_saved = saved if st is not None else None
        return f

    def _report(self, ctx: CollectorContext, result: PollResult, server: ServerTarget, msg: str) -> None:
        """One collector_error per server per episode: again only when the problem changes or
        comes back after a clean read."""
        if self._episode.get(server.id) == msg:
            return
        self._episode[server.id] = msg
        result.events.append(EventRow(ctx.now(), server.id, "collector_error", msg, launch_id=server.launch_id))

    @staticmethod
    def _failure(server: ServerTarget, exc: Exception) -> str:
        where = f"the log of server {server.name!r} at {server.log_path!r}"
        if isinstance(exc, OSError):
            return f"cannot read {where} ({exc.strerror or exc}); check the path and its permissions"
        return (f"reading {where} failed ({type(exc).__name__}: {str(exc)[:200]}); the other "
                "servers are read as usual; report this with the log's last lines")
