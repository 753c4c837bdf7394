"""Watching the other runners of a fleet: `runner_lost` / `runner_back` events.

Run by the runner that holds the `db` lease (runner/lease.py), every few seconds. A host lease
whose heartbeat is older than the TTL means that host's runner died or hangs: its servers are no
longer watched, supervised or served their requests. One `runner_lost` event is recorded (naming
the host, the holder and its servers) and one `runner_back` when a fresh heartbeat returns. A
runner stopped cleanly (SIGTERM, `pitwall` exiting) releases its lease, which is no loss.

What was reported is kept in CollectorState (`fleet:hosts`, {host: "lost" | "up"}), so a new `db`
holder neither repeats a `runner_lost` nor misses the matching `runner_back`.
"""

from __future__ import annotations

import time

from sqlalchemy.engine import Engine

from storage import repo

STATE_KEY = "fleet:hosts"


def watch_hosts(engine: Engine, *, ttl_s: float, now: float | None = None) -> list[str]:
    """Record runner_lost / runner_back for host leases that went stale / came back; returns
    the event kinds written (with the host), e.g. ["runner_lost:host-b"]."""
    now = time.time() if now is None else now
    before: dict[str, str] = dict(repo.load_state(engine, key=STATE_KEY) or {})
    state = dict(before)
    leases = {lease.scope.removeprefix(repo.HOST_SCOPE_PREFIX): lease for lease in repo.list_leases(engine)
              if lease.scope.startswith(repo.HOST_SCOPE_PREFIX)}
    written = []
    for host, lease in leases.items():
        age = now - lease.heartbeat_at
        was = state.get(host)
        if age >= ttl_s and was != "lost":
            _record(engine, "runner_lost", host, _lost_message(engine, host, lease.holder, age))
            state[host] = "lost"
            written.append(f"runner_lost:{host}")
        elif age < ttl_s and was != "up":
            if was == "lost":
                _record(engine, "runner_back", host, f"The runner of host {host} ({lease.holder}) is back: "
                                                     "its servers are watched and supervised again.")
                written.append(f"runner_back:{host}")
            state[host] = "up"
    for host in [h for h, s in state.items() if h not in leases and s == "up"]:
        del state[host]  # released cleanly: nothing was lost
    if state != before:
        with engine.begin() as conn:
            repo.save_state(conn, key=STATE_KEY, value=state)
    return written


def _lost_message(engine: Engine, host: str, holder: str, age: float) -> str:
    names = [s.name for s in repo.list_servers(engine) if s.host == host]
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return (f"The runner of host {host} ({holder}) stopped heartbeating {age:.0f} s ago: its "
            f"{len(names)} server(s) ({shown or 'none'}) are not watched or supervised and their "
            f"requests wait until it returns. Check `pitwall collect` on {host}.")


def _record(engine: Engine, kind: str, host: str, message: str) -> None:
    repo.add_event(engine, kind=kind, message=message)
