"""The doctor's vocabulary: what its rules read (`Evidence`), what a rule says (`Finding`) and
an engine's rule set (`TuningRules`, the Engine's `tuning_rules`).

The rules themselves are the engine's (its tuning guidance names its own flags and server args):
collectors/<engine>/doctor_rules.py. The doctor service (dashboard/services/doctor.py) gathers
the evidence through storage and runs the server's engine's rules over it; everything here is
pure, so every rule is tested on recorded figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Evidence:
    """What the rules read for one server over [since, until) (seconds since the epoch)."""

    since: float
    until: float
    series: dict[str, np.ndarray] = field(default_factory=dict)  # metric -> values in the window
    events: dict[str, int] = field(default_factory=dict)  # event kind -> count in the window
    server_args: dict[str, Any] = field(default_factory=dict)  # the running launch's server info args
    gpu_free_bytes: list[float] = field(default_factory=list)  # per GPU: total - used (median)
    prompt_set: str | None = None  # workload of the newest probe run in the window
    gpu_walls: list[dict[str, Any]] = field(default_factory=list)  # gpu_wall.gpu_walls()["gpus"]
    stage_walls: dict[str, Any] = field(default_factory=dict)  # image servers: gpu_wall_stage.stage_walls()
    engine: str | None = None  # the server's engine (storage's Server.engine); None: the default engine

    @property
    def minutes(self) -> float:
        return max((self.until - self.since) / 60.0, 1e-9)

    def first(self, keys: tuple[str, ...]) -> np.ndarray:
        """The first of `keys` with samples in the window (log before /metrics, as listed)."""
        for key in keys:
            arr = self.series.get(key)
            if arr is not None and arr.size:
                return arr
        return np.asarray([], dtype=float)

    def arg(self, *keys: str) -> Any:
        """The first of the server args `keys` the running launch reported (not None), else None."""
        for key in keys:
            if self.server_args.get(key) is not None:
                return self.server_args[key]
        return None


@dataclass
class Finding:
    rule: str
    title: str
    evidence: str  # the figures, in words
    suggestion: str
    flags: dict[str, Any]  # the suggested change as profile flags (a candidate profile)


@dataclass(frozen=True)
class TuningRules:
    """One engine's doctor rules.

    series: the series keys the rules read (the service loads each over the window);
    rules: Evidence -> a Finding or None, each; checked(Evidence) -> what each rule read, one
    line a rule, for a quiet Doctor.
    """

    series: tuple[str, ...]
    rules: tuple[Callable[[Evidence], Finding | None], ...]
    checked: Callable[[Evidence], list[str]]

    def diagnose(self, ev: Evidence) -> list[Finding]:
        return [f for f in (rule(ev) for rule in self.rules) if f is not None]
