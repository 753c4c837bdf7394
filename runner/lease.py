"""The single-instance lease of the runner, with a generation that fences every action.

One row in storage (RunnerLease). `acquire()` takes it when free, stale (no heartbeat for
LEASE_TTL_S) or left by a dead process on this host, and bumps its generation. The runner renews
it every 2 s; intent claims are fenced in SQL (`claim_next_intent(generation=...)`) and the
supervisor checks `held()` before it starts, stops or restarts anything. So a runner that stalled
past the TTL (SIGSTOP, a frozen VM, a long GC) and woke after another took over can neither claim
a request nor touch a server: the two never supervise the same server.
"""

from __future__ import annotations

import os
import socket
import time

import psutil
from sqlalchemy.engine import Engine

from storage import repo

LEASE_TTL_S = 15.0
RENEW_EVERY_S = 2.0


class LeaseHeld(RuntimeError):
    """Another runner holds this database; the message names it."""


class Lease:
    def __init__(self, engine: Engine, holder: str | None = None, ttl_s: float = LEASE_TTL_S) -> None:
        self.engine = engine
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        self.ttl_s = ttl_s
        self.generation: int | None = None

    @property
    def acquired(self) -> bool:
        return self.generation is not None

    def acquire(self) -> None:
        host = socket.gethostname()
        ok, lease = repo.acquire_lease(self.engine, holder=self.holder, pid=os.getpid(), host=host, ttl_s=self.ttl_s)
        if not ok and lease is not None and lease.host == host and not psutil.pid_exists(lease.pid):
            # The holder died without releasing (SIGKILL): take over at once.
            ok, lease = repo.acquire_lease(self.engine, holder=self.holder, pid=os.getpid(), host=host, ttl_s=0)
        if not ok:
            assert lease is not None
            raise LeaseHeld(
                f"Another runner ({lease.holder}) is collecting into this database "
                f"(heartbeat {time.time() - lease.heartbeat_at:.0f} s ago); stop it first or use "
                "another PITWALL_DATABASE_URL."
            )
        assert lease is not None
        self.generation = lease.generation

    def renew(self) -> bool:
        """Heartbeat; False when another runner took the lease (this one must stop acting)."""
        return self.generation is not None and repo.renew_lease(
            self.engine, holder=self.holder, generation=self.generation)

    def held(self) -> bool:
        """Still ours (read from storage now, not from the last heartbeat)."""
        return self.generation is not None and repo.lease_is(self.engine, generation=self.generation)

    def release(self) -> None:
        if self.generation is not None and self.held():
            repo.release_lease(self.engine, holder=self.holder)
