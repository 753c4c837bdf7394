"""The health state machine every engine's HTTP API collector runs: up / down / flap. Pure.

One observation per poll (did the engine's health endpoint answer 200?) advances it; a change
emits `health_up` / `health_down`, and `flap_threshold` changes within `flap_window_s` seconds emit
one `health_flap` warning, so every engine's health events read alike. Severities are
storage/kinds.py EVENT_KINDS's. The I/O (the read, its latency, what a status means) is each
engine's collector's (collectors/api_poll.py and the engine's api.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class HealthEvent:
    """A health change; its severity is storage/kinds.py EVENT_KINDS's for the kind."""

    kind: str  # health_up | health_down | health_flap
    message: str


def health_step(
    state: dict[str, Any],
    ok: bool,
    ts: float,
    *,
    server_name: str,
    detail: str = "",
    flap_threshold: int = 4,
    flap_window_s: float = 300.0,
) -> tuple[list[HealthEvent], dict[str, Any]]:
    """Advance the health state machine by one observation (ts in seconds). Pure.

    `state` holds `up` (last known, None before the first poll), `transitions` (times of changes
    within the flap window) and `flap_warned_at`. A change emits `health_up` / `health_down`; a
    first observation emits `health_down` only (up is the quiet default). `flap_threshold`
    changes within `flap_window_s` emit one `health_flap` warning, repeated at most once per
    window (not `health_check_failed`: that is an engine's own health check failing).
    """
    new = dict(state)
    events: list[HealthEvent] = []
    prev = state.get("up")
    transitions = [t for t in state.get("transitions", []) if ts - t <= flap_window_s]
    if prev is None:
        if not ok:
            events.append(HealthEvent("health_down", f"{server_name} is not healthy ({detail})."))
    elif prev != ok:
        transitions.append(ts)
        if ok:
            events.append(HealthEvent("health_up", f"{server_name} is healthy again."))
        else:
            events.append(HealthEvent("health_down", f"{server_name} stopped answering /health ({detail})."))
    warned = state.get("flap_warned_at")
    if len(transitions) >= flap_threshold and (not isinstance(warned, int | float) or ts - warned > flap_window_s):
        events.append(HealthEvent(
            "health_flap",
            f"{server_name} health is flapping: {len(transitions)} up/down changes in the last "
            f"{flap_window_s:.0f} s; check its log for crashes, OOM or timeouts.",
        ))
        new["flap_warned_at"] = ts
    new["up"] = ok
    new["transitions"] = transitions
    return events, new
