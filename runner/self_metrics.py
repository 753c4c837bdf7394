"""The runner's own health as samples: the built-in `self` collector (runner/loop.py adds it).

CPU of the runner process (self.cpu_pct, % of one core), the scheduler loop's worst lag
(self.loop_lag_s) and rows written per second (self.rows_per_s), every 5 s, on server_id 0
(SELF_SERVER_ID, no Server row) with source `self:<runner.host>`: the runners of a fleet write
into one database, and each reader (`pitwall status`, About, Pitwall's own /metrics) picks one
runner's figures by that source.
"""

from __future__ import annotations

import time
from typing import Any

import psutil

from collectors.base import CollectorContext, PollResult, SampleRow
from storage import series_keys as sk

SELF_SERVER_ID = 0  # samples about the runner itself
SELF_SOURCE_PREFIX = "self:"  # their source: "self:<runner.host>"


def self_source(host: str) -> str:
    """Source of the self samples of the runner of `host`."""
    return f"{SELF_SOURCE_PREFIX}{host}"


class SelfCollector:
    """Runner health: CPU of this process, scheduler loop lag, rows written per second."""

    name = "self"
    interval_s = 5.0

    def __init__(self, runner: Any) -> None:
        self._runner = runner
        self._source = self_source(runner.host)
        self._proc = psutil.Process()
        self._proc.cpu_percent(None)
        self._last_rows = 0
        self._last_t = time.monotonic()

    def poll(self, ctx: CollectorContext) -> PollResult:
        now = ctx.now()
        t = time.monotonic()
        rows = self._runner.rows_written
        rate = (rows - self._last_rows) / max(t - self._last_t, 1e-6)
        self._last_rows, self._last_t = rows, t
        lag = self._runner.take_max_lag()
        out = PollResult()
        for metric, value in (
            (sk.SELF_CPU_PCT, self._proc.cpu_percent(None)),
            (sk.SELF_LOOP_LAG_S, lag),
            (sk.SELF_ROWS_PER_S, rate),
        ):
            out.samples.append(SampleRow(now, SELF_SERVER_ID, metric, float(value), self._source))
        return out

    def close(self) -> None:
        pass


#: glibc's malloc gives each thread that allocates its own arena (up to 8 per core); the runner's
#: poll workers each read up to a 16 MiB body, and memory freed in one arena is not reused by
#: another, so a burst of large answers left ~80 MiB of RSS stranded (bench: the hostile tier).
#: Two arenas, as gunicorn and many Python services run, keep that memory reusable.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number (glibc malloc.h)


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """mallopt(M_ARENA_MAX, arenas) in this process when libc is glibc; True if it took.
    MALLOC_ARENA_MAX in the environment wins (an operator's own choice)."""
    import ctypes
    import ctypes.util
    import os

    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(_M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt): nothing to tune
