"""The alert lifecycle, pure: one evaluation's verdict moves an episode (storage AlertState)
from nothing -> pending -> firing -> resolved, and says what to notify.

- active, no open episode: a new one, `pending` (or `firing` at once when `for_s` is 0);
- pending, still active for `for_s` since `active_since`: `firing`, notify "firing";
- pending, no longer active: the episode is dropped (it never fired; noise around a target that
  does not hold for `for_s` leaves no trace and sends nothing);
- firing, no longer active: `resolved` (resolved_at), notify "resolved" when "firing" was sent;
- firing, still active: notify "firing" again after `repeat_s` (a reminder), or when a silence
  that held the first notification back has ended.
- no verdict (`Verdict.known` False: a threshold's window holds no sample): nothing starts, a
  pending episode stays pending (its `for_s` is not counted as met), a firing one stays firing
  (reminders go on).
A silenced alert changes state like any other; only its notifications are held back.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.alerts.evaluate import Verdict
from storage.models import AlertState


@dataclass(frozen=True)
class Step:
    save: AlertState | None  # the episode to write (None: nothing changed worth writing)
    drop: AlertState | None  # a pending episode that cleared: delete it
    notify: str | None  # "firing" | "resolved" | None


def advance(prev: AlertState | None, verdict: Verdict, *, fresh: AlertState, now: float, for_s: float,
            repeat_s: float, silenced: bool) -> Step:
    """The next state of one alert. `fresh` carries the labels, annotations and severity of this
    evaluation (used for a new episode, and refreshed on an open one)."""
    if prev is not None and not verdict.known:
        prev.last_eval_at, prev.summary = now, verdict.summary
        if prev.state == "firing" and (prev.notified_at is None or now - prev.notified_at >= repeat_s):
            return _maybe_notify(prev, now, silenced)
        return Step(prev, None, None)
    if prev is None:
        if not verdict.active:
            return Step(None, None, None)
        alert = fresh
        alert.state, alert.active_since, alert.value, alert.summary = "pending", now, verdict.value, verdict.summary
        alert.last_eval_at = now
        prev = alert
    else:
        prev.last_eval_at, prev.value, prev.summary = now, verdict.value, verdict.summary
        prev.labels, prev.annotations, prev.severity = fresh.labels, fresh.annotations, fresh.severity
    if prev.state == "pending":
        if not verdict.active:
            return Step(None, prev, None)
        if now - prev.active_since >= for_s:
            prev.state, prev.fired_at = "firing", now
            return _maybe_notify(prev, now, silenced)
        return Step(prev, None, None)
    # firing
    if not verdict.active:
        prev.state, prev.resolved_at = "resolved", now
        sent = prev.notified_at is not None
        return Step(prev, None, "resolved" if sent else None)
    if prev.notified_at is None or now - prev.notified_at >= repeat_s:
        return _maybe_notify(prev, now, silenced)
    return Step(prev, None, None)


def _maybe_notify(alert: AlertState, now: float, silenced: bool) -> Step:
    if silenced:
        return Step(alert, None, None)
    alert.notified_at = now
    return Step(alert, None, "firing")
