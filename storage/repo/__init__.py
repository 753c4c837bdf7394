"""Keyword-only read/write functions: the only SQL in Pitwall, one module per table family.

Callers use `from storage import repo` and `repo.<function>`; each name below is imported from the
family module that defines it (every family lists its public names in `__all__`; this package
exports their union and nothing else, so `repo.x` leads to one module). The families are
`samples` (hot-path insert, raw reads, chart buckets), `rollups` (minute and quarter tiers),
`events`, `fleet` (every server at once, one query per kind of row), `intents`, `runner_state`
(collector state, the runner lease), `inventory` (servers, profiles, launches), `probes` (probe
runs and requests), `traces` (imported request traces), `retention` (what old rows leave, in
batches), `windows` (a window read raw where samples are kept and from rollups where retention removed them), `audit` and `alerts`
(alert episodes, silences, the notification outbox). `_common` holds what they share
(the table handles, QUARTER_S).

Rules: time-series rows are written in batches, one executemany per batch (SQLAlchemy Core
`insert()`, or the driver's executemany on the sample hot path), never one ORM add per row
(bench/storage.py measures the write path against raw sqlite3); percentile reads select the
value column over an indexed window and compute with numpy, never ORDER BY/OFFSET; charts read
SQL-bucketed series (`CAST(ts / bucket AS INTEGER)`), long windows read Rollup and RollupQuarter.
Everything here is portable SQL (SQLite and PostgreSQL).
"""

from __future__ import annotations

from storage.repo._common import QUARTER_S
from storage.repo.alerts import (
    add_silence,
    defer_notifications,
    delete_alert,
    delete_notifications,
    due_notifications,
    enqueue_notifications,
    expire_silence,
    list_alerts,
    list_silences,
    newest_sample_ts,
    open_alerts,
    outbox_summary,
    probe_outcomes,
    save_alert,
)
from storage.repo.audit import add_audit, list_audit, table_counts
from storage.repo.events import add_event, count_events, insert_events, list_events
from storage.repo.fleet import (
    FLEET_SAMPLE_COLUMNS,
    fleet_aggregates,
    fleet_done_runs,
    fleet_event_counts,
    fleet_gpu_indices,
    fleet_latest,
    fleet_latest_launches,
    fleet_probe_requests,
    fleet_samples,
)
from storage.repo.intents import (
    IN_FLIGHT_LAUNCH,
    claim_next_intent,
    create_intent,
    expire_pending_intents,
    fail_stale_intents,
    get_intent,
    in_flight_launch,
    list_intents,
    pending_intent_kinds,
    update_intent,
)
from storage.repo.inventory import (
    create_launch,
    delete_profile,
    get_launch,
    get_profile,
    get_server,
    latest_launch,
    launch_numbers,
    list_launches,
    list_profiles,
    list_servers,
    live_log_paths,
    relocate_launch_log,
    retire_servers_except,
    set_server_stopped,
    update_launch,
    upsert_profile,
    upsert_server,
)
from storage.repo.probes import (
    create_probe_run,
    get_probe_run,
    insert_probe_requests,
    insert_probe_run,
    list_probe_runs,
    newest_probe_run,
    probe_output_rows,
    probe_request_count,
    probe_requests,
    probe_run_row,
    update_probe_run,
)
from storage.repo.retention import RETENTION_TABLES, apply_retention, retention_plan, table_sizes
from storage.repo.rollups import (
    backfill_quarters,
    compute_rollups,
    insert_rollups,
    oldest_sample_ts,
    rollup_series_since,
    rollup_watermark,
)
from storage.repo.runner_state import (
    DB_SCOPE,
    HOST_SCOPE_PREFIX,
    acquire_lease,
    get_lease,
    host_scope,
    lease_fence,
    lease_is,
    list_leases,
    load_state,
    release_lease,
    renew_lease,
    save_state,
)
from storage.repo.samples import (
    SAMPLE_COLUMNS,
    bucketed_series,
    insert_sample_tuples,
    insert_samples,
    latest_samples,
    metric_names,
    sample_points,
    sample_sum,
    sample_values,
)
from storage.repo.traces import (
    delete_trace,
    get_trace,
    list_traces,
    save_trace,
    trace_request_count,
    trace_requests,
)
from storage.repo.windows import (
    MINUTE_ROLLUP,
    QUARTER_ROLLUP,
    RAW,
    WindowAggregate,
    first_ts,
    older_rollups,
    series_names,
    tier_starts,
    window_aggregate,
)

__all__ = [
    # _common
    "QUARTER_S",
    # alerts
    "open_alerts", "save_alert", "delete_alert", "list_alerts", "add_silence", "expire_silence",
    "list_silences", "enqueue_notifications", "due_notifications", "delete_notifications",
    "defer_notifications", "outbox_summary", "probe_outcomes", "newest_sample_ts",
    # audit
    "add_audit", "list_audit", "table_counts",
    # events
    "insert_events", "add_event", "list_events", "count_events",
    # fleet
    "FLEET_SAMPLE_COLUMNS", "fleet_samples", "fleet_latest_launches", "fleet_done_runs",
    "fleet_probe_requests", "fleet_event_counts", "fleet_gpu_indices", "fleet_aggregates",
    "fleet_latest",
    # intents
    "create_intent", "claim_next_intent", "pending_intent_kinds", "update_intent", "get_intent", "list_intents",
    "IN_FLIGHT_LAUNCH", "in_flight_launch", "fail_stale_intents", "expire_pending_intents",
    # inventory
    "upsert_server", "list_servers", "retire_servers_except", "set_server_stopped",
    "get_server", "upsert_profile", "list_profiles", "get_profile", "delete_profile",
    "create_launch", "relocate_launch_log", "live_log_paths", "update_launch", "get_launch",
    "latest_launch", "launch_numbers", "list_launches",
    # probes
    "create_probe_run", "update_probe_run", "insert_probe_requests", "insert_probe_run",
    "probe_run_row", "probe_output_rows", "probe_request_count", "get_probe_run",
    "list_probe_runs", "newest_probe_run", "probe_requests",
    # retention
    "RETENTION_TABLES", "apply_retention", "retention_plan", "table_sizes",
    # rollups
    "compute_rollups", "backfill_quarters", "rollup_watermark", "oldest_sample_ts",
    "rollup_series_since", "insert_rollups",
    # runner_state
    "load_state", "save_state", "DB_SCOPE", "HOST_SCOPE_PREFIX", "host_scope", "acquire_lease",
    "lease_is", "lease_fence", "renew_lease", "release_lease", "get_lease", "list_leases",
    # samples
    "SAMPLE_COLUMNS", "insert_samples", "insert_sample_tuples", "sample_values", "sample_sum",
    "latest_samples", "metric_names", "bucketed_series", "sample_points",
    # traces
    "save_trace", "get_trace", "list_traces", "trace_requests", "delete_trace", "trace_request_count",
    # windows
    "RAW", "MINUTE_ROLLUP", "QUARTER_ROLLUP", "WindowAggregate", "first_ts", "older_rollups",
    "series_names", "tier_starts", "window_aggregate",
]
