"""One poll, many servers, one deadline: the per-server fan-out every per-server collector uses.

A collector that reads each of its servers (the /metrics scrape, the HTTP API) hands
`poll_servers` a `poll_one(ctx, server) -> PollResult`. Each server is read in its own worker
thread, all under ONE deadline (seconds from the call), so a server that stalls, drips or sends a
payload that is slow to parse delays nobody else:

- a server that finishes in time contributes its rows AND the state it saved; each server's
  `save_state` is staged apart and handed on only with that server's rows, so a server whose poll
  is abandoned moves no offset or counter memory forward (nothing is skipped, nothing counted twice);
- a server still running at the deadline (or when the runner stops: `ctx.stopping()`) is
  abandoned: its thread ends on its own read deadline (collectors/http.py `get_capped`), and
  until then the server is not read again (`busy`), so a stalled server never holds more than
  one worker;
- `poll_one` raising is that server's failure, returned to the collector to report (once per
  episode, the collector's rule), never the others'.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from collectors.base import CollectorContext, PollResult, ServerTarget

WAIT_STEP_S = 0.25  # how often a waiting poll looks at ctx.stopping()


@dataclass(slots=True)
class FanOut:
    """What one fanned-out poll brought in."""

    result: PollResult = field(default_factory=PollResult)
    failed: list[tuple[ServerTarget, BaseException]] = field(default_factory=list)
    late: list[ServerTarget] = field(default_factory=list)  # abandoned at the deadline or stop
    busy: list[ServerTarget] = field(default_factory=list)  # its previous read is still running


class ServerPool:
    """A collector's worker threads and the servers whose read is still in flight."""

    def __init__(self, name: str, max_workers: int = 8) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"{name}-srv")
        self._inflight: set[int] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def poll_servers(
        self,
        ctx: CollectorContext,
        servers: Sequence[ServerTarget],
        poll_one: Callable[[CollectorContext, ServerTarget], PollResult],
        *,
        deadline_s: float,
    ) -> FanOut:
        out = FanOut()
        futures: dict[Future[tuple[PollResult, dict[str, dict[str, Any]]]], ServerTarget] = {}
        for server in servers:
            with self._lock:
                if server.id in self._inflight:
                    out.busy.append(server)
                    continue
                self._inflight.add(server.id)
            futures[self._pool.submit(self._run, ctx, server, poll_one)] = server
        end = time.monotonic() + deadline_s
        pending = set(futures)
        while pending and not ctx.stopping():
            left = end - time.monotonic()
            if left <= 0:
                break
            _, pending = wait(pending, timeout=min(left, WAIT_STEP_S), return_when=FIRST_COMPLETED)
        for fut, server in futures.items():
            if fut in pending:
                out.late.append(server)
                continue
            exc = fut.exception()
            if exc is not None:
                out.failed.append((server, exc))
                continue
            rows, staged = fut.result()
            out.result.extend(rows)
            for key, value in staged.items():
                ctx.save_state(key, value)
        return out

    def _run(
        self,
        ctx: CollectorContext,
        server: ServerTarget,
        poll_one: Callable[[CollectorContext, ServerTarget], PollResult],
    ) -> tuple[PollResult, dict[str, dict[str, Any]]]:
        staged: dict[str, dict[str, Any]] = {}

        def save_state(key: str, value: dict[str, Any]) -> None:
            staged[key] = value

        try:
            return poll_one(replace(ctx, servers=[server], save_state=save_state), server), staged
        finally:
            with self._lock:
                self._inflight.discard(server.id)
