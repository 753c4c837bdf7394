"""Collection health: is the runner alive, how big is the database, what does each table hold.

Used by the About / health page and `pitwall status`; `retention_table` is the page's view of
the retention policy (storage/repo/retention.py: rows, bytes, oldest row, what goes next). A runner is "alive" when its host
lease's heartbeat is younger than LEASE_TTL_S (it renews every 2 s); a fleet has one runner per
host (`list_runners`), one of which holds the `db` lease and keeps house. URLs come out redacted
(`shown_url`: a PostgreSQL password or a server URL's userinfo is never printed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from present.format import fmt_bytes as fmt_bytes  # `pitwall status` prints with it
from present.format import fmt_ts
from runner import launch_logs
from runner.lease import LEASE_TTL_S
from runner.loop import SELF_SERVER_ID, self_source
from storage import repo
from storage.db import database_size_bytes
from storage.redact import redact_url
from storage.series_keys import SELF_CPU_PCT as SELF_CPU_PCT  # the About page shows these
from storage.series_keys import SELF_LOOP_LAG_S as SELF_LOOP_LAG_S
from storage.series_keys import SELF_ROWS_PER_S as SELF_ROWS_PER_S
from storage.series_keys import unit_of as unit_of

SELF_METRICS = (SELF_CPU_PCT, SELF_LOOP_LAG_S, SELF_ROWS_PER_S)


def shown_url(url: str) -> str:
    """A database or server URL as Pitwall prints it: the password masked (storage/redact.py)."""
    return redact_url(url)


@dataclass
class RunnerInfo:
    """One runner of the fleet, as its host lease says (and its own self.* samples)."""

    host: str
    holder: str
    heartbeat_age_s: float
    started_at: float
    alive: bool
    housekeeping: bool  # holds the `db` lease (rollups, retention, alerts, intent expiry)
    self_metrics: dict[str, float] = field(default_factory=dict)

    @property
    def line(self) -> str:
        state = "running" if self.alive else "STOPPED (no heartbeat)"
        house = ", keeps house (db lease)" if self.housekeeping else ""
        return f"{self.host}: {state} as {self.holder}, heartbeat {self.heartbeat_age_s:.1f} s ago{house}"


@dataclass
class RunnerHealth:
    alive: bool
    holder: str | None
    heartbeat_age_s: float | None
    started_at: float | None
    db_bytes: int | None
    counts: dict[str, int] = field(default_factory=dict)
    servers: list[str] = field(default_factory=list)
    self_metrics: dict[str, float] = field(default_factory=dict)
    runners: list[RunnerInfo] = field(default_factory=list)  # every host lease, by host

    @property
    def summary(self) -> str:
        if self.holder is None:
            return "not running — start it with `pitwall up` (or `pitwall collect`)"
        if not self.alive:
            return (
                f"stopped — last heartbeat from {self.holder} {self.heartbeat_age_s:.0f} s ago; "
                "start it with `pitwall up`"
            )
        return f"running as {self.holder}, heartbeat {self.heartbeat_age_s:.1f} s ago"


def runner_alive(engine: Engine, host: str | None = None, now: float | None = None,
                 ttl_s: float = LEASE_TTL_S) -> bool:
    """The runner of `host` heartbeats (its host lease is fresh); without `host`, any runner of
    the fleet does."""
    now = time.time() if now is None else now
    leases = ([repo.get_lease(engine, scope=repo.host_scope(host))] if host is not None
              else [x for x in repo.list_leases(engine) if x.scope != repo.DB_SCOPE])
    return any(x is not None and now - x.heartbeat_at < ttl_s for x in leases)


def list_runners(engine: Engine, now: float | None = None, ttl_s: float = LEASE_TTL_S) -> list[RunnerInfo]:
    """Every runner with a host lease (stale ones too: a dead runner's row stays until another
    takes its host over), with the one that keeps house marked and its latest self.* figures."""
    now = time.time() if now is None else now
    leases = repo.list_leases(engine)
    db = next((x for x in leases if x.scope == repo.DB_SCOPE and now - x.heartbeat_at < ttl_s), None)
    out = []
    for lease in leases:
        if lease.scope == repo.DB_SCOPE:
            continue
        host = lease.scope.removeprefix(repo.HOST_SCOPE_PREFIX)
        latest = repo.latest_samples(engine, server_id=SELF_SERVER_ID, metrics=SELF_METRICS, source=self_source(host))
        out.append(RunnerInfo(host=host, holder=lease.holder, heartbeat_age_s=now - lease.heartbeat_at,
                              started_at=lease.started_at, alive=now - lease.heartbeat_at < ttl_s,
                              housekeeping=db is not None and db.holder == lease.holder,
                              self_metrics={k: v for k, (_, v) in latest.items()}))
    return out


def start_runner_detached(repo_root: str) -> None:
    """Ask the runner package to start `python -m cli collect` detached (runner/up.py).

    Safe to call when one may already be running: the runner's lease lets only one collect.
    """
    from runner.up import start_detached

    start_detached(repo_root)


def start_runner_for(engine: Engine, repo_root: str, *, actor: str) -> None:
    """`start_runner_detached` on an operator's behalf (the dashboard opened under `streamlit run
    app.py`), recorded in Audit as `runner_start` with that operator."""
    start_runner_detached(repo_root)
    repo.add_audit(engine, actor=actor, action="runner_start", target="runner", detail={"repo_root": repo_root})


def runner_health(engine: Engine, database_url: str, host: str | None = None) -> RunnerHealth:
    """Collection health; the top-level runner fields describe the runner of `host` (this
    machine's runner.host) or, without one or when it has no lease, the first runner listed;
    `runners` lists the whole fleet."""
    runners = list_runners(engine)
    mine = next((r for r in runners if r.host == host), None) or next(iter(runners), None)
    servers = []
    for s in repo.list_servers(engine):
        kind = "managed" if s.managed else "watched"
        owner = f", host {s.host}" if s.host else ""
        servers.append(f"{s.name}  {shown_url(s.base_url)}  ({kind}, {s.kind}{owner})")
    return RunnerHealth(
        alive=mine is not None and mine.alive,
        holder=mine.holder if mine else None,
        heartbeat_age_s=mine.heartbeat_age_s if mine else None,
        started_at=mine.started_at if mine else None,
        db_bytes=database_size_bytes(database_url),
        counts=repo.table_counts(engine),
        servers=servers,
        self_metrics=mine.self_metrics if mine else {},
        runners=runners,
    )


def retention_table(engine: Engine, policy: dict[str, Any], now: float | None = None,
                    logs_dir: Path | None = None) -> pd.DataFrame:
    """One row per table the retention policy covers: rows, bytes on disk ("n/a" where the
    database cannot say: SQLite without `dbstat`), oldest row (UTC), how long rows are kept
    (days; "forever" for 0) and the rows the runner's next passes remove; with `logs_dir`, a
    last row "launch logs (files)": files, their bytes, the oldest file's time, the size kept
    (retention.launch_logs_mb) and the files the next pass removes (oldest ended ones)."""
    now = time.time() if now is None else now
    table = _table_rows(engine, policy, now)
    if logs_dir is not None:
        table = pd.concat([table, pd.DataFrame([_logs_row(engine, policy, now, logs_dir)])], ignore_index=True)
    return table


def _logs_row(engine: Engine, policy: dict[str, Any], now: float, logs_dir: Path) -> dict[str, Any]:
    budget = float(policy.get("launch_logs_mb") or 0.0)
    files = launch_logs.plan(logs_dir, live=repo.live_log_paths(engine), budget_mb=budget, now=now)
    going = [f for f in files if f.goes_next]
    return {
        "table": "launch logs (files)",
        "rows": len(files),
        "size": fmt_bytes(sum(f.bytes for f in files), missing="n/a"),
        "oldest (UTC)": fmt_ts(files[0].mtime) if files else "—",
        "kept": f"{budget:g} MB" if budget > 0 else "forever",
        "removed next": len(going),
    }


def _table_rows(engine: Engine, policy: dict[str, Any], now: float) -> pd.DataFrame:
    plan = repo.retention_plan(engine, policy=policy, now=now)
    sizes = repo.table_sizes(engine, [p["table"] for p in plan])
    keys = {t: k for t, k, *_ in repo.RETENTION_TABLES}
    return pd.DataFrame({
        "table": [p["table"] for p in plan],
        "rows": [p["rows"] for p in plan],
        "size": [fmt_bytes(sizes.get(p["table"]), missing="n/a") for p in plan],
        "oldest (UTC)": [fmt_ts(p["oldest"]) if p["oldest"] is not None else "—" for p in plan],
        "kept": [f"{float(policy.get(keys[p['table']]) or 0):g} days" if p["cutoff"] is not None else "forever"
                 for p in plan],
        "removed next": [p["to_remove"] for p in plan],
    })
