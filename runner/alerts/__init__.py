"""Alerts: rules as data (rules.py), pure evaluation (evaluate.py), the lifecycle
(lifecycle.py), evaluation over storage (engine.py), delivery from the outbox (deliver.py), and
the runner component that ties them to the loop (`Alerting`, below).

The runner calls `Alerting.tick()` every loop turn; every `eval_interval_s` one pass (evaluate,
then send what is due) runs in the component's own worker thread, so a slow receiver (each call
has a total deadline) never holds the scheduler loop.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from runner.alerts.deliver import Sender
from runner.alerts.engine import AlertEvaluator

log = logging.getLogger("pitwall.alerts")

__all__ = ["Alerting"]


class Alerting:
    def __init__(self, evaluator: AlertEvaluator, sender: Sender, *, eval_interval_s: float = 15.0) -> None:
        self.evaluator, self.sender, self.eval_interval_s = evaluator, sender, eval_interval_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alerts")
        self._future: Future[Any] | None = None
        self._next_at = 0.0
        self._lock = threading.Lock()
        self.passes = 0
        self.last_pass_at: float | None = None
        self.last_error: str | None = None

    def tick(self) -> None:
        """Start a pass when one is due and none is running (never blocks)."""
        now = time.monotonic()
        if now < self._next_at or (self._future is not None and not self._future.done()):
            return
        self._next_at = now + self.eval_interval_s
        self._future = self._pool.submit(self.run_once)

    def run_once(self) -> None:
        with self._lock:
            try:
                self.evaluator.evaluate()
            except Exception as exc:  # e.g. the database restarting: the next pass tries again
                self.last_error = str(exc)
                log.warning("alert evaluation failed (will retry): %s", exc)
            try:
                self.sender.send()
            except Exception as exc:
                log.warning("alert delivery failed (will retry): %s", exc)
            self.passes += 1
            self.last_pass_at = time.time()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
