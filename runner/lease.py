"""The runner's leases, per host and for the database, with generations that fence every action.

A fleet is several runners, one per GPU host (runner.host), writing to one database. Storage
keeps one Lease row per scope (storage/repo/runner_state.py):

- `host:<runner.host>`: the runner of that host. A runner MUST hold it (`acquire()` raises
  LeaseHeld naming the holder while another live runner has it): only its holder supervises
  that host's servers, collects from them and carries out their intents.
- `db`: database-wide housekeeping (rollups and their catch-up, retention, alert evaluation and
  delivery, expiry of pending intents, runner_lost / runner_back events). Every runner TRIES to
  take it at each renew beat; exactly one holds it, and when it dies another takes it over once
  its heartbeat is LEASE_TTL_S old.

A lease is taken when free, stale (no heartbeat for the TTL) or left by a dead process on this
machine, and each acquire bumps its generation. The runner renews both every 2 s; intent claims
are fenced in SQL by the host lease's generation (`claim_next_intent(generation=...)`) and the
supervisor checks `held()` before it starts, stops or restarts anything. So a runner that stalled
past the TTL (SIGSTOP, a frozen VM, a long GC) and woke after another took over can neither claim
a request nor touch a server: the two never supervise the same server.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time

import psutil
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from storage import repo
from storage.errors import HeldElsewhere
from storage.models import Lease as LeaseRow

LEASE_TTL_S = 15.0
RENEW_EVERY_S = 2.0

log = logging.getLogger("pitwall.runner")


class LeaseHeld(HeldElsewhere, RuntimeError):
    """Another runner holds this host's lease in this database; the message names it."""


class Lease:
    """This runner's host lease (required) and the `db` housekeeping lease (when it can)."""

    def __init__(self, engine: Engine, holder: str | None = None, ttl_s: float = LEASE_TTL_S, *,
                 host: str | None = None) -> None:
        self.engine = engine
        self.machine = socket.gethostname()  # where our pid lives (a dead holder is checked here)
        self.host = host or self.machine  # runner.host: the fleet's name of this runner's host
        self.scope = repo.host_scope(self.host)
        # machine:pid names the process for people; the random tail makes the name this
        # instance's alone (containers sharing a hostname can share a pid, e.g. 1): a holder
        # that matches its own name re-takes a lease without a freshness check (acquire_lease)
        self.holder = holder or f"{self.machine}:{os.getpid()}:{secrets.token_hex(3)}"
        self.ttl_s = ttl_s
        self.generation: int | None = None  # of the host lease
        self.db_generation: int | None = None  # of the `db` lease, while this runner keeps house

    @property
    def acquired(self) -> bool:
        return self.generation is not None

    @property
    def holds_db(self) -> bool:
        """This runner keeps house (as of the last beat)."""
        return self.db_generation is not None

    def _take(self, scope: str) -> tuple[bool, LeaseRow | None]:
        ok, lease = repo.acquire_lease(self.engine, scope=scope, holder=self.holder, pid=os.getpid(),
                                       host=self.machine, ttl_s=self.ttl_s)
        if not ok and lease is not None and lease.host == self.machine and not psutil.pid_exists(lease.pid):
            # The holder died without releasing (SIGKILL): take over at once.
            ok, lease = repo.acquire_lease(self.engine, scope=scope, holder=self.holder, pid=os.getpid(),
                                           host=self.machine, ttl_s=0)
        return ok, lease

    def acquire(self) -> None:
        """Take this host's lease (LeaseHeld when another live runner has it), then try `db`."""
        ok, lease = self._take(self.scope)
        if not ok:
            assert lease is not None
            raise LeaseHeld(
                f"Another runner ({lease.holder}) is collecting for host {self.host} into this database "
                f"(heartbeat {time.time() - lease.heartbeat_at:.0f} s ago); stop it first, or give this "
                "runner another runner.host (PITWALL_RUNNER_HOST) or another PITWALL_DATABASE_URL."
            )
        assert lease is not None
        self.generation = lease.generation
        self.try_db()

    def try_db(self) -> bool:
        """Renew the `db` lease when held, else try to take it; True when this runner keeps house.
        A database error keeps the last answer (tried again at the next beat)."""
        try:
            if self.db_generation is not None:
                if not repo.renew_lease(self.engine, scope=repo.DB_SCOPE, holder=self.holder,
                                        generation=self.db_generation):
                    log.warning("another runner took over database housekeeping (the db lease)")
                    self.db_generation = None
            else:
                ok, lease = self._take(repo.DB_SCOPE)
                if ok and lease is not None:
                    self.db_generation = lease.generation
                    log.info("this runner (host %s) keeps house for the database (db lease)", self.host)
        except OperationalError as exc:
            log.warning("could not renew or take the db lease: %s", exc)
        return self.holds_db

    def renew(self) -> bool:
        """Heartbeat of both leases; False when another runner took the host lease (this one
        must stop acting). Losing or gaining `db` only changes `holds_db`."""
        if self.generation is None or not repo.renew_lease(
                self.engine, scope=self.scope, holder=self.holder, generation=self.generation):
            return False
        self.try_db()
        return True

    def held(self) -> bool:
        """The host lease is still ours (read from storage now, not from the last heartbeat)."""
        return self.generation is not None and repo.lease_is(self.engine, scope=self.scope, generation=self.generation)

    def release(self) -> None:
        if self.db_generation is not None and repo.lease_is(self.engine, scope=repo.DB_SCOPE,
                                                           generation=self.db_generation):
            repo.release_lease(self.engine, scope=repo.DB_SCOPE, holder=self.holder)
        self.db_generation = None
        if self.generation is not None and self.held():
            repo.release_lease(self.engine, scope=self.scope, holder=self.holder)
