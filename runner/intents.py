"""Intents in the runner: claim per lane, run the handler, expire what waited too long.

An intent is desired state written by the UI or CLI (storage/kinds.py names every kind and its
lane). Each lane runs one intent at a time in its own thread, so a sweep (probe lane) never
blocks a relaunch (control lane), a validation (check lane) never waits behind either, and a
tune (tune lane) requests its relaunches through the control lane and runs its own sweeps.
Claims are atomic in SQL and fenced by the host lease's generation: two tabs or two CLIs never
launch twice, and a runner that lost its lease claims nothing. In a fleet a runner claims only its
host's intents (Intent.host), plus the host-less ones while it holds the `db` lease; an intent for
another host waits for that host's runner, or expires.

A handler settles its intent (done / failed with one sentence, progress on the way); one that
raises fails the intent with the exception's text, never the runner. Pending intents older than
`expiry_s` become `expired` with an `intent_expired` event: a relaunch clicked while no runner
was alive is not carried out hours later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from sqlalchemy.engine import Engine

from storage import repo
from storage.kinds import INTENT_KINDS, LANES, request_label
from storage.models import Intent

log = logging.getLogger("pitwall.runner")

IntentHandler = Callable[[Intent], None]


class IntentLanes:
    def __init__(self, engine: Engine, handlers: dict[str, IntentHandler], *, expiry_s: float) -> None:
        unknown = sorted(set(handlers) - set(INTENT_KINDS))
        if unknown:
            raise ValueError(f"Handlers for unknown intent kinds {unknown}; see storage/kinds.py.")
        self.engine = engine
        self.handlers = dict(handlers)
        self.expiry_s = expiry_s
        self._lanes: dict[str, Future[Any] | None] = dict.fromkeys(LANES)
        self._pool = ThreadPoolExecutor(max_workers=len(LANES), thread_name_prefix="intent")

    def dispatch(self, generation: int | None, *, host: str | None = None, db_generation: int | None = None) -> None:
        """Claim the next intent of every idle lane that has a handler, and start it (with
        `host`, only that host's intents, and host-less ones with `db_generation`)."""
        idle = {}
        for lane in LANES:
            fut = self._lanes[lane]
            if fut is not None and not fut.done():
                continue
            kinds = [k for k, ln in INTENT_KINDS.items() if ln == lane and k in self.handlers]
            if kinds:
                idle[lane] = kinds
        if not idle:
            return
        # one read a tick; a claim (a write transaction) only in a lane that has work
        pending = repo.pending_intent_kinds(self.engine, host=host, db_generation=db_generation)
        for lane, kinds in idle.items():
            if not pending.intersection(kinds):
                continue
            intent = repo.claim_next_intent(self.engine, kinds=kinds, generation=generation, host=host,
                                            db_generation=db_generation)
            if intent is not None:
                self._lanes[lane] = self._pool.submit(self._run, intent, self.handlers[intent.kind])

    def _run(self, intent: Intent, handler: IntentHandler) -> None:
        try:
            handler(intent)
        except Exception as exc:  # a handler bug must not kill the runner
            log.exception("intent %s failed", intent.id)
            assert intent.id is not None
            repo.update_intent(self.engine, intent_id=intent.id, state="failed", message=f"{type(exc).__name__}: {exc}")

    def expire(self) -> int:
        """Expire pending intents older than expiry_s; one `intent_expired` event each."""
        try:
            expired = repo.expire_pending_intents(self.engine, older_than=time.time() - self.expiry_s)
        except Exception as exc:
            log.warning("could not expire old intents (will retry): %s", exc)
            return 0
        for it in expired:
            what = request_label(it.id, it.kind)
            prof = (it.payload or {}).get("profile")
            if prof:
                what += f" (profile {prof})"
            repo.add_event(self.engine, kind="intent_expired", server_id=it.server_id,
                           message=f"{what} requested by {it.requested_by} expired: {it.message}")
        return len(expired)

    def close(self) -> None:
        """Stop what handlers run (sweep processes) and leave the lane threads to finish."""
        for handler in set(self.handlers.values()):
            close = getattr(handler, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    log.exception("closing an intent handler failed")
        self._pool.shutdown(wait=False, cancel_futures=True)
