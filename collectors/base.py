"""The collector protocol, the row types collectors emit, and CollectorError.

A collector is a small object with a `name`, an `interval_s` and a `poll(ctx)` method that returns
a `PollResult` (samples + events). The runner (collectors/runner.py) calls `poll` on the collector's
interval in a worker thread, writes the rows in batches, and turns an exception into one
`collector_error` event while the other collectors carry on. Collectors never touch the database
directly: persistent state (a tailer's offset) goes through `ctx.load_state` / `ctx.save_state`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class CollectorError(Exception):
    """A failure a person can act on; the message is one sentence saying what to do."""


@dataclass(slots=True)
class SampleRow:
    """One value of one metric; `metric` is a Pitwall key (units in the name, base units)."""

    ts: float
    server_id: int
    metric: str
    value: float
    source: str
    launch_id: int | None = None


@dataclass(slots=True)
class EventRow:
    """One event of the DESIGN.md taxonomy (`kind`), with the raw excerpt it came from."""

    ts: float
    server_id: int | None
    kind: str
    message: str
    severity: str = "info"
    raw: str | None = None
    launch_id: int | None = None


@dataclass(slots=True)
class PollResult:
    samples: list[SampleRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)

    def extend(self, other: PollResult) -> None:
        self.samples.extend(other.samples)
        self.events.extend(other.events)


@dataclass(slots=True)
class ServerTarget:
    """What a collector needs to know about one server (a read-only view of storage.Server)."""

    id: int
    name: str
    base_url: str
    kind: str = "llm"
    managed: bool = False
    log_path: str | None = None
    gpu_indices: list[int] | None = None
    api_key: str | None = None
    launch_id: int | None = None  # the current Launch row, when known
    pids: list[int] = field(default_factory=list)  # processes of a managed server (for NVML)
    #: status of the current Launch of a managed server (starting | ready | stopping | stopped | exited |
    #: failed), None for watched servers. Request-sending collectors skip a managed server that
    #: is not "ready", so a start or a stop is not reported as errors.
    launch_status: str | None = None

    @property
    def serving(self) -> bool:
        return not self.managed or self.launch_status == "ready"


@dataclass(slots=True)
class CollectorContext:
    """Handed to every poll: the servers to watch, the clock, and persistent state access."""

    servers: list[ServerTarget]
    load_state: Callable[[str], dict[str, Any] | None]
    save_state: Callable[[str, dict[str, Any]], None]
    now: Callable[[], float] = time.time
    #: called by collectors that learn facts about a launch (server args, version)
    update_launch: Callable[[int, dict[str, Any]], None] | None = None


class Collector(Protocol):
    name: str
    interval_s: float

    def poll(self, ctx: CollectorContext) -> PollResult: ...

    def close(self) -> None: ...
