"""What the Alerts page, the sidebar and `pitwall alerts` read and write: alerts with their
figures, the history, silences (create / expire, audited), the rules with their last evaluation,
and the outbox per receiver. Rows come back as plain dicts, secrets masked (storage/redact.py)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.engine import Engine

from config.settings import Settings
from dashboard.services.alerts import rule_edits
from runner.alerts.deliver import receivers
from runner.alerts.engine import STATE_KEY
from storage import repo
from storage.errors import RequestError
from storage.kinds import OPEN_ALERT_STATES
from storage.redact import redact_obj, redact_webhook_url


class SilenceError(RequestError, ValueError):
    """A silence request is incomplete; the message says what to give."""


def _names(engine: Engine) -> dict[int, str]:
    return {int(s.id): s.name for s in repo.list_servers(engine, include_retired=True) if s.id is not None}


def alerts(engine: Engine, *, open_only: bool, since_s: float = 7 * 86400.0, limit: int = 200) -> list[dict[str, Any]]:
    """Open alerts (firing first), or the history of the last `since_s` with durations (s)."""
    names, now = _names(engine), time.time()
    rows = repo.list_alerts(engine, states=OPEN_ALERT_STATES if open_only else None,
                            since=None if open_only else now - since_s, limit=limit)
    silenced = repo.list_silences(engine, active_at=now)
    out = []
    for a in rows:
        server = names.get(a.server_id or -1, "")
        out.append({
            "state": a.state, "rule": a.rule, "server": server, "severity": a.severity, "value": a.value,
            "summary": a.summary, "since": a.fired_at or a.active_since, "resolved_at": a.resolved_at,
            "duration_s": (a.resolved_at or now) - (a.fired_at or a.active_since),
            "silenced": any(s.rule in (None, a.rule) and s.server in (None, server) for s in silenced),
            "link": (a.annotations or {}).get("server_page", ""), "labels": redact_obj(a.labels or {}),
        })
    out.sort(key=lambda r: (r["state"] != "firing", -r["since"]))
    return out


def firing_count(engine: Engine) -> int:
    return sum(1 for a in repo.list_alerts(engine, states=("firing",), limit=1000))


def silences(engine: Engine, *, active_only: bool = False) -> list[dict[str, Any]]:
    now = time.time()
    return [{"id": s.id, "rule": s.rule or "(any)", "server": s.server or "(any)", "until": s.ends_at,
             "reason": s.reason, "by": s.created_by,
             "state": "expired" if s.expired_at or s.ends_at <= now else "active",
             "expired_by": s.expired_by}
            for s in repo.list_silences(engine, active_at=now if active_only else None)]


def create_silence(engine: Engine, *, rule: str | None, server: str | None, duration_s: float, reason: str,
                   actor: str) -> int:
    """A silence from now for `duration_s`, audited (`alert_silence`); SilenceError when it
    names neither a rule nor a server, has no reason, or no positive duration."""
    if not (rule or server):
        raise SilenceError("A silence needs a rule or a server (or both); give at least one.")
    if not reason.strip():
        raise SilenceError("A silence needs a reason, so others know why alerts are quiet.")
    if duration_s <= 0:
        raise SilenceError("A silence needs a duration above zero, e.g. 2h.")
    row = repo.add_silence(engine, rule=rule, server=server, ends_at=time.time() + duration_s,
                           reason=reason.strip(), created_by=actor)
    repo.add_audit(engine, actor=actor, action="alert_silence", target=f"{rule or '*'}@{server or '*'}",
                   detail={"silence_id": row.id, "until": row.ends_at, "reason": row.reason})
    return int(row.id or 0)


def expire_silence(engine: Engine, *, silence_id: int, actor: str) -> bool:
    ok = repo.expire_silence(engine, silence_id=silence_id, actor=actor)
    if ok:
        repo.add_audit(engine, actor=actor, action="alert_unsilence", target=str(silence_id))
    return ok


def rules(settings: Settings, engine: Engine) -> list[dict[str, Any]]:
    """Each rule (switched-off ones too) with where it comes from (rule_edits.ORIGINS), whether it
    is on, and its last evaluation (when, cost in ms, how many servers active)."""
    last = repo.load_state(engine, key=STATE_KEY) or {}
    out = []
    for r, origin in rule_edits.effective(settings, engine):
        ev = last.get(r.name) or {}
        servers = ev.get("servers") or {}
        what = {"burn_rate": f"{r.slo} {r.speed}", "threshold": f"{r.metric} {r.op} {r.value:g}",
                "event": r.event}[r.kind]
        out.append({"rule": r.name, "kind": r.kind, "what": what, "for_s": r.for_s, "severity": r.severity,
                    "enabled": r.enabled, "origin": origin, "value": r.value,
                    "last_eval": ev.get("at"), "eval_ms": ev.get("ms"),
                    "active_on": sorted(n for n, v in servers.items() if v.get("active"))})
    return out


def receiver_status(settings: Settings, engine: Engine) -> list[dict[str, Any]]:
    """Configured receivers (URLs shown without their secrets) and what waits in the outbox."""
    queued = repo.outbox_summary(engine)
    out = []
    for r in receivers(settings.alerting):
        shown = redact_webhook_url(r.url) if r.name == "webhook" else r.url
        q = queued.get(r.name, {})
        out.append({"receiver": r.name, "url": shown, "queued": q.get("queued", 0),
                    "last_error": q.get("last_error")})
    return out
