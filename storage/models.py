"""Every table Pitwall stores, as SQLModel classes.

Conventions: base units everywhere (seconds, bytes, watts, USD), the unit in the
column name, missing is NULL (never 0). Timestamps are Unix epoch seconds (float, UTC), which
keeps SQL bucketing (`CAST(ts / 60 AS INTEGER)`) portable between SQLite and PostgreSQL.
JSON columns hold plain dicts/lists (flags, env, argv, specs, reports).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

#: Bumped whenever a table or column changes; storage/db.py upgrades or refuses older files.
SCHEMA_VERSION = 11


def _json(default: Any = None) -> Any:
    return Field(default=default, sa_column=Column(JSON, nullable=True))


class Meta(SQLModel, table=True):
    """Key/value facts about the database itself (schema_version, created_by)."""

    key: str = Field(primary_key=True)
    value: str


class Lease(SQLModel, table=True):
    """A runner lease per scope, refreshed every few seconds.

    `scope` is `host:<runner.host>` (the runner of that host: its servers, their intents and its
    NVML) or `db` (database-wide housekeeping: rollups, retention, alerts, intent expiry), so
    several runners share one database, one per host, and exactly one of them keeps house.
    """

    scope: str = Field(primary_key=True)  # "host:<runner.host>" | "db"
    holder: str  # "<machine>:<pid>"
    pid: int
    host: str  # the machine the holder runs on (its pid is checked there)
    started_at: float
    heartbeat_at: float
    #: bumped by every acquire; the runner fences its claims and process actions with it, so a
    #: runner that stalled past its lease never acts after another took over
    generation: int = 0


class CollectorState(SQLModel, table=True):
    """Small persistent state of a collector (a log tailer's offset, last counter values)."""

    key: str = Field(primary_key=True)  # "<collector>:<server_id>:<what>"
    value: dict[str, Any] | None = _json()
    updated_at: float = 0.0


class Server(SQLModel, table=True):
    """An inference server Pitwall watches (`engine` names its engine in collectors/engines.py);
    `managed` servers are started and stopped by Pitwall."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    base_url: str
    engine: str = "sglang"
    kind: str = "llm"  # "llm" | "image"
    managed: bool = False
    log_path: str | None = None
    gpu_indices: list[int] | None = _json()
    gpu_hourly_usd: float | None = None  # price of ONE GPU-hour
    python: str | None = None  # interpreter used to launch a managed server
    profile: str | None = None  # profile a managed server starts with
    api_key: str | None = None
    updated_at: float = 0.0
    #: set when the server left the configuration (its history stays); None while configured
    retired_at: float | None = None
    #: an operator's Stop, remembered: auto-start and auto-restart leave the server down until
    #: a launch or relaunch is requested (who, when); None when it may run
    stopped_by: str | None = None
    stopped_at: float | None = None
    #: the runner host that owns this server (runner.host of the runner whose configuration lists
    #: it): only that runner supervises it, collects from it and carries out its intents
    host: str | None = Field(default=None, index=True)
    #: read this server's engine series from this Prometheus (HTTP API) instead of scraping
    #: its /metrics; `prometheus_selector` is the label matcher naming it there
    prometheus_url: str | None = None
    prometheus_selector: str | None = None
    #: a disaggregated service: the service's name, and this server's part in it (prefill,
    #: decode or router); None for a server that prefills and decodes on its own
    service: str | None = Field(default=None, index=True)
    role: str | None = None
    #: where its Prometheus text is when not at {base_url}/metrics (a router's own metrics port)
    metrics_url: str | None = None


class Profile(SQLModel, table=True):
    """A named launch profile: the entrypoint, flags and env a managed server starts with."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    description: str = ""
    model_path: str = ""
    entrypoint: str = "sglang.launch_server"
    flags: dict[str, Any] | None = _json()
    env: dict[str, str] | None = _json()
    record_requests: bool = False  # the server writes its request records into the data folder
    source_path: str | None = None
    content_hash: str = ""
    updated_at: float = 0.0


class Launch(SQLModel, table=True):
    """One run of a server process (managed), or one observed server incarnation (unmanaged)."""

    id: int | None = Field(default=None, primary_key=True)
    server_id: int = Field(index=True, foreign_key="server.id")
    profile_id: int | None = Field(default=None, foreign_key="profile.id")
    profile_name: str | None = None
    profile_hash: str | None = None
    argv: list[str] | None = _json()
    env: dict[str, str] | None = _json()
    pid: int | None = None
    log_path: str | None = None
    engine_version: str | None = None  # the version the server reports (its engine's server info)
    server_args: dict[str, Any] | None = _json()
    status: str = "starting"  # starting | ready | stopping | stopped | exited | failed
    started_at: float = 0.0
    ready_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    end_reason: str | None = None


class Intent(SQLModel, table=True):
    """Desired state written by the UI/CLI and carried out by the runner.

    State machine (storage/kinds.py): pending -> running -> done | failed; a pending one is
    cancelled (refused) or expired (not started within intent_expiry_s).
    """

    id: int | None = Field(default=None, primary_key=True)
    kind: str  # storage/kinds.py INTENT_KINDS
    server_id: int | None = Field(default=None, index=True)
    #: the runner host that must carry it out (its server's host when it names one); None: any
    host: str | None = Field(default=None, index=True)
    payload: dict[str, Any] | None = _json()
    state: str = Field(default="pending", index=True)
    requested_by: str = "cli"
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    progress: dict[str, Any] | None = _json()  # {"stage": "...", "fraction": 0..1, "detail": "..."}
    message: str | None = None
    result: dict[str, Any] | None = _json()


class Sample(SQLModel, table=True):
    """Long-format time series: one value of one metric of one server at one instant."""

    __table_args__ = (Index("ix_sample_server_metric_ts", "server_id", "metric", "ts"),)

    id: int | None = Field(default=None, primary_key=True)
    ts: float
    server_id: int
    launch_id: int | None = None
    source: str  # log | metrics | gpu | probe | api | self
    metric: str
    value: float


class _Aggregate(SQLModel):
    """Columns every rollup tier shares: one series over one interval starting at ts."""

    id: int | None = Field(default=None, primary_key=True)
    ts: float
    server_id: int
    metric: str
    count: int
    avg: float
    min: float
    max: float


class Rollup(_Aggregate, table=True):
    """Per-minute aggregate of Sample (ts = start of the minute) for long windows.

    p50/p95/p99 are left NULL (files from older Pitwall versions may hold values): no reader uses
    them, and at ~24 bytes they would be a fifth of the row. Exact percentiles come from Sample.
    """

    __table_args__ = (UniqueConstraint("server_id", "metric", "ts", name="uq_rollup_key"),)

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class RollupQuarter(_Aggregate, table=True):
    """Per-15-minute aggregate of Rollup (ts = start of the quarter hour) for windows of days
    (buckets of 10 minutes or more): a 7-day chart reads 672 rows a series here instead of
    10,080 per-minute ones.

    count/avg/min/max are exact (count-weighted from the minutes); percentiles are not kept, since
    a quarter's p99 cannot be derived from its minutes' (read Sample for exact ones).
    """

    __tablename__ = "rollup_quarter"
    __table_args__ = (UniqueConstraint("server_id", "metric", "ts", name="uq_rollup_quarter_key"),)


class Event(SQLModel, table=True):
    """Something that happened: a kind of storage/kinds.py's EVENT_KINDS, a sentence, and the raw excerpt."""

    __table_args__ = (Index("ix_event_server_ts", "server_id", "ts"),)

    id: int | None = Field(default=None, primary_key=True)
    ts: float
    server_id: int | None = None
    launch_id: int | None = None
    kind: str = Field(index=True)
    severity: str = "info"  # info | warning | error | critical
    message: str = ""
    raw: str | None = None


class ProbeRun(SQLModel, table=True):
    """A probe sweep: what was sent (spec + fingerprint), how far it got, and its report."""

    id: int | None = Field(default=None, primary_key=True)
    server_id: int | None = Field(default=None, index=True)
    launch_id: int | None = None
    url: str
    api: str
    name: str | None = None
    spec: dict[str, Any] | None = _json()
    fingerprint: str = ""
    fingerprint_detail: dict[str, Any] | None = _json()
    status: str = "pending"  # pending | running | done | failed | aborted
    progress: float = 0.0
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    report: dict[str, Any] | None = _json()  # the per-level summary (CLI --json shape)
    trusted: bool | None = None
    baseline_run_id: int | None = None
    error: str | None = None


class ProbeRequest(SQLModel, table=True):
    """One request of a sweep, with client-side timings (seconds)."""

    __table_args__ = (Index("ix_probereq_run_level", "run_id", "level"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="proberun.id")
    level: float
    seq: int = 0
    warmup: bool = False
    start_ts: float = 0.0
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] | None = _json()  # every inter-token gap, per token
    tpot_s: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None
    ok: bool = False
    error_kind: str | None = None
    http_status: int | None = None
    output_hash: str | None = None
    # what the server reported or the probe found per request beyond the timings above, e.g.
    # image servers' {"inference_time_s", "peak_memory_mb"}, a structured-output check's verdict,
    # a multi-turn request's turn; keys are documented where they are written (collectors/probe)
    detail: dict[str, Any] | None = _json()


class Trace(SQLModel, table=True):
    """An imported request trace (collectors/trace): where it came from and a summary; its
    requests are TraceRequest rows. `digest` hashes what a replay sends (the workload fingerprint
    names it); `notes` are the quirks the import met, `bad_rows` the rows it could not use
    ([{"line", "reason"}], the first 200), `bad_count` all of them."""

    __table_args__ = (UniqueConstraint("name", name="uq_trace_name"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str
    format: str
    source: str  # file name(s) as given, never their text
    digest: str
    imported_at: float
    requests: int
    duration_s: float
    block_size: int | None = None
    clock: str = ""  # the source's arrival clock: ms | s | epoch | none (Poisson at --rate)
    first_arrival_ts: float | None = None  # epoch of the first arrival, when the source says it
    keeps_text: bool = False
    notes: list[str] | None = _json()
    bad_rows: list[dict[str, Any]] | None = _json()
    bad_count: int = 0
    summary: dict[str, Any] | None = _json()  # collectors/trace/summary.py


class TraceRequest(SQLModel, table=True):
    """One request of a trace, by arrival (`seq` 0, 1, ...; `arrival_s` from the first)."""

    __table_args__ = (Index("ix_tracereq_trace_seq", "trace_id", "seq"),)

    id: int | None = Field(default=None, primary_key=True)
    trace_id: int = Field(foreign_key="trace.id")
    seq: int
    arrival_s: float
    input_tokens: int
    output_tokens: int | None = None
    hash_ids: list[int] | None = _json()
    session: str | None = None
    turn: int | None = None
    api: str | None = None
    sampling: dict[str, Any] | None = _json()
    cached_tokens: int | None = None
    status: str = "ok"
    text: str | None = None  # the original prompt, only when imported with keep_text
    images: int | None = None
    source_latency_s: float | None = None
    line: int | None = None


class Audit(SQLModel, table=True):
    """Who did what when: relaunches, profile edits, exports, with a diff."""

    id: int | None = Field(default=None, primary_key=True)
    ts: float
    actor: str
    action: str
    target: str = ""
    detail: dict[str, Any] | None = _json()


class AlertState(SQLModel, table=True):
    """One episode of one alert (rule x server): pending -> firing -> resolved (runner/alerts).

    A pending episode that clears before its `for` is deleted; fired ones stay as the history.
    `fingerprint` is "<rule>:<server_id>"; at most one open (pending or firing) row per fingerprint.
    """

    __tablename__ = "alert_state"
    __table_args__ = (Index("ix_alert_state_fp_state", "fingerprint", "state"),)

    id: int | None = Field(default=None, primary_key=True)
    rule: str
    server_id: int | None = None
    fingerprint: str
    state: str = "pending"  # storage/kinds.py ALERT_STATES
    severity: str = "warning"
    value: float | None = None  # the figure of the last evaluation (rule's unit)
    summary: str = ""
    labels: dict[str, Any] | None = _json()
    annotations: dict[str, Any] | None = _json()
    active_since: float = 0.0  # first evaluation that found the condition true
    fired_at: float | None = None
    resolved_at: float | None = None
    last_eval_at: float = 0.0
    notified_at: float | None = None  # last notification queued (None: none yet, e.g. silenced)


class AlertSilence(SQLModel, table=True):
    """An operator's silence: no notification for matching alerts (rule and/or server) until
    `ends_at`, unless expired earlier (who, when)."""

    __tablename__ = "alert_silence"

    id: int | None = Field(default=None, primary_key=True)
    rule: str | None = None  # None: every rule
    server: str | None = None  # server name; None: every server
    starts_at: float = 0.0
    ends_at: float = 0.0
    reason: str = ""
    created_by: str = ""
    expired_by: str | None = None
    expired_at: float | None = None


class AlertOutbox(SQLModel, table=True):
    """A notification waiting for its receiver (runner/alerts/deliver.py): deleted once sent,
    retried with back-off while the receiver is down; at most `alerting.outbox_max` rows."""

    __tablename__ = "alert_outbox"
    __table_args__ = (Index("ix_alert_outbox_receiver", "receiver", "next_at"),)

    id: int | None = Field(default=None, primary_key=True)
    created_at: float = 0.0
    receiver: str  # "alertmanager" | "webhook"
    fingerprint: str = ""
    status: str = "firing"  # firing | resolved
    payload: dict[str, Any] | None = _json()  # the alert, receiver-neutral (deliver.py renders it)
    attempts: int = 0
    next_at: float = 0.0
    last_error: str | None = None
