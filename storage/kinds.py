"""The one table of event kinds and the one table of intent kinds: every writer and reader
names kinds from here, never by a literal of its own.

Each event kind carries its severity and one line of meaning (EVENT_KINDS below); the runner's
own kinds (`restart_budget_exhausted`, `intent_expired`) and the fleet's (`runner_lost` /
`runner_back`) sit beside the server's. Intent kinds name the runner lane that carries them
out: `control` (server lifecycle, one action at a time), `probe` (sweeps), `check` (profile
validation with the engine's own parser) and `tune` (a search over profiles that itself requests
relaunches and runs sweeps), so a long sweep never blocks a relaunch and a validation
never waits behind either.
"""

from __future__ import annotations

#: kind -> (severity, what it means). The severity is what every writer stores: storage/repo
#: (`add_event`, `insert_events`) and collectors/base.py `EventRow` fill it from here when a
#: writer names only the kind. A writer that stores another severity passes it together with
#: `severity_reason=` (why this event is not the table's); tests/foundation/test_event_severity.py
#: walks the writers and holds them to that.
EVENT_KINDS: dict[str, tuple[str, str]] = {
    "server_ready": ("info", "the server answered /health 200 or logged its ready line"),
    "server_exit": ("error", "a server process exited (on its own, or before it was ready)"),
    "oom": ("error", "CUDA out of memory"),
    "prefill_oom": ("error", "prefill could not allocate KV cache"),
    "decode_retract": ("warning", "decode retracted requests to free KV cache"),
    "nccl_timeout": ("critical", "an NCCL collective timed out (watchdog)"),
    "crash": ("critical", "a traceback or a child process's sigquit"),
    "warmup_failed": ("error", "the server did not become ready (warm-up failed or timed out)"),
    "bad_cli_flag": ("error", "a launch was refused: a flag, env or profile error"),
    "port_in_use": ("error", "a launch was refused: the port is held by another process"),
    "health_check_failed": ("warning", "the server's own health check failed"),
    "health_down": ("error", "/health stopped answering 200"),
    "health_up": ("info", "/health answers 200 again"),
    "health_flap": ("warning", "/health changed up/down often within a few minutes (Pitwall's own poll)"),
    "probe_error": ("warning", "a canary or probe request failed"),
    "relaunch_started": ("info", "a relaunch began"),
    "relaunch_done": ("info", "a relaunch reached ready"),
    "relaunch_failed": ("error", "a relaunch did not reach ready"),
    "rollback": ("warning", "the last good launch was started again after a failed relaunch"),
    "collector_error": ("warning", "a collector failed; it is retried with backoff"),
    "gpu_xid": ("critical", "NVML reported an XID error"),
    "metric_drift": ("warning", "after a relaunch or an upgrade a /metrics family Pitwall saw before is gone, "
                                "changed type or lost a label (the engine's metrics catalogue)"),
    "restart_budget_exhausted": ("critical", "a crashing server used up its auto-restart budget; it stays down"),
    "intent_expired": ("warning", "a request was not started within intent_expiry_s and was dropped"),
    "alert_dropped": ("warning", "alert notifications were dropped: the outbox was full while a receiver was down"),
    "runner_lost": ("error", "a fleet runner's host lease went stale: that host's servers are not watched"),
    "runner_back": ("info", "a fleet runner that was lost heartbeats again"),
}

#: alert rule kind -> what it watches (runner/alerts/rules.py parses `[[alerts]]` by these)
ALERT_RULE_KINDS: dict[str, str] = {
    "burn_rate": "SLO error-budget burn over two windows (SRE workbook), from probe and canary requests",
    "threshold": "a stored series (log.*, gpu.*, api.*, self.*) aggregated over a window against a value",
    "event": "server events (crash, OOM, NCCL timeout, ...), retraction rate, health down, no samples",
}

#: pending -> firing -> resolved; a pending alert that clears before its `for` is dropped
ALERT_STATES = ("pending", "firing", "resolved")
OPEN_ALERT_STATES = ("pending", "firing")

#: intent kind -> runner lane
INTENT_KINDS: dict[str, str] = {
    "launch": "control",
    "stop": "control",
    "relaunch": "control",
    "probe": "probe",
    "validate": "check",
    "tune": "tune",
}

#: kinds whose handler keeps its own state in the intent (result) and resumes: a runner that
#: starts after one died puts these back to pending instead of failing them
RESUMABLE_INTENT_KINDS: tuple[str, ...] = ("tune",)

CONTROL_KINDS: tuple[str, ...] = tuple(k for k, lane in INTENT_KINDS.items() if lane == "control")
LANES: tuple[str, ...] = tuple(dict.fromkeys(INTENT_KINDS.values()))

#: pending -> running -> done | failed; pending -> cancelled (refused) | expired (too old)
INTENT_STATES = ("pending", "running", "done", "failed", "cancelled", "expired")
OPEN_INTENT_STATES = ("pending", "running")
FINAL_INTENT_STATES = ("done", "failed", "cancelled", "expired")


def check_event_kind(kind: str) -> str:
    """`kind`, or ValueError naming the known kinds (a writer's typo fails loudly, in tests)."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"Unknown event kind {kind!r}; add it to storage/kinds.py EVENT_KINDS.")
    return kind


def event_severity(kind: str, severity: str | None = None) -> str:
    """The severity an event of `kind` is stored with: `severity` when a writer overrides the
    table (stating why), else EVENT_KINDS's; ValueError for an unknown kind."""
    return severity if severity is not None else EVENT_KINDS[check_event_kind(kind)][0]


def check_intent_kind(kind: str) -> str:
    if kind not in INTENT_KINDS:
        known = ", ".join(INTENT_KINDS)
        raise ValueError(f"Unknown intent kind {kind!r}; known: {known}.")
    return kind


# -- names of launches and requests: one wording everywhere -------------------------------------
# A launch is numbered per server ("demo launch 3": its third launch; storage/repo/inventory.py
# launch_numbers derives the number); a request (an Intent: launch, stop, relaunch, probe,
# validate, tune) is "R-<id>", a visibly different name, so "launch 3" and "relaunch R-3" are never
# read as one. present/format.py re-exports both for the pages.


def launch_label(server: str | None, number: int | None) -> str:
    """"demo launch 3" (None for the server: "launch 3"); "launch —" when the number is unknown."""
    name = f"{server} " if server else ""
    return f"{name}launch {number if number is not None else '—'}"


def request_label(intent_id: int | None, kind: str = "request", *, start: bool = False) -> str:
    """"request R-17", or with the request's kind: "relaunch R-17", "tune R-17"; `start` for
    the start of a sentence ("Tune R-17")."""
    word = kind[:1].upper() + kind[1:] if start else kind
    return f"{word} R-{intent_id if intent_id is not None else '—'}"
