"""One poll, many servers, no server waiting on another: the per-server fan-out of the collectors
that read each server over HTTP (the /metrics scrape, the HTTP API, the canary).

A collector hands `ServerPool.poll_servers` a `poll_one(ctx, server) -> PollResult`. Each server
is read in its own worker thread (at most `max_workers`, 32, at once), and the poll waits at most
`wait_s` seconds for them, so a server that stalls, drips or sends a payload that is slow to parse
holds up nobody, and its cadence is its own:

- a read that finishes hands in its rows AND the state it saved together; each server's
  `save_state` is staged apart and passed on only with that server's rows, so nothing moves an
  offset or a counter memory forward without the rows it belongs to;
- a read still running when the poll stops waiting (after `wait_s`, counted for the reads it
  started: an older read still running never makes a poll wait) is not abandoned: it stays in
  flight, the server is not read again meanwhile (`busy`), and the next poll hands in what it
  brought. Every read has its own total deadline (collectors/http.py `get_capped`), so a
  stalled server holds one of the `max_workers` workers for at most that long;
- `poll_one` raising is that server's failure, handed to the collector to report (once per
  episode, the collector's rule), never the others'.
A stopping runner's last poll waits as any poll does (`wait_s`), so a read it started is handed
in; only a read that had not been answered by then is left behind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from collectors.base import CollectorContext, PollResult, ServerTarget

WORKERS = 32  # reads at once per collector: servers past it queue behind the slowest reads
_Read = tuple[PollResult, dict[str, dict[str, Any]]]


@dataclass(slots=True)
class FanOut:
    """What one fanned-out poll brought in."""

    result: PollResult = field(default_factory=PollResult)
    done: list[ServerTarget] = field(default_factory=list)  # read and handed in
    failed: list[tuple[ServerTarget, BaseException]] = field(default_factory=list)
    busy: list[ServerTarget] = field(default_factory=list)  # still being read: handed in later


class ServerPool:
    """A collector's worker threads and its reads in flight, one per server at most."""

    def __init__(self, name: str, max_workers: int = WORKERS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"{name}-srv")
        self._inflight: dict[int, tuple[ServerTarget, Future[_Read]]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def poll_servers(
        self,
        ctx: CollectorContext,
        servers: Sequence[ServerTarget],
        poll_one: Callable[[CollectorContext, ServerTarget], PollResult],
        *,
        wait_s: float,
    ) -> FanOut:
        """Start a read of every server not already being read, wait up to `wait_s` seconds,
        and hand in every read that has finished (this poll's and earlier ones')."""
        out = FanOut()
        wanted = {s.id for s in servers}
        started: set[Future[_Read]] = set()
        with self._lock:
            for sid in [sid for sid in self._inflight if sid not in wanted]:
                self._inflight.pop(sid)[1].cancel()  # the server left: its read is not wanted
            for server in servers:
                if server.id not in self._inflight:
                    fut = self._pool.submit(self._run, ctx, server, poll_one)
                    self._inflight[server.id] = (server, fut)
                    started.add(fut)
            mine = dict(self._inflight)
        # wait for this poll's reads only: one still running from an earlier poll (a stalled
        # server) is handed in if it has finished, and holds up nobody's cadence
        wait(started, timeout=wait_s)
        for sid, (server, fut) in mine.items():
            if not fut.done():
                out.busy.append(server)
                continue
            with self._lock:
                if self._inflight.get(sid, (None, None))[1] is not fut:
                    continue  # another poll handed it in already
                del self._inflight[sid]
            if fut.cancelled():
                continue
            exc = fut.exception()
            if exc is not None:
                out.failed.append((server, exc))
                continue
            rows, staged = fut.result()
            out.result.extend(rows)
            out.done.append(server)
            for key, value in staged.items():
                ctx.save_state(key, value)
        return out

    @staticmethod
    def _run(
        ctx: CollectorContext,
        server: ServerTarget,
        poll_one: Callable[[CollectorContext, ServerTarget], PollResult],
    ) -> _Read:
        staged: dict[str, dict[str, Any]] = {}

        def save_state(key: str, value: dict[str, Any]) -> None:
            staged[key] = value

        return poll_one(replace(ctx, servers=[server], save_state=save_state), server), staged
