"""Sends the outbox (storage AlertOutbox) to the receivers, in order, with a total deadline per
call and retry with exponential back-off; a row leaves the outbox only when its receiver answered
2xx, so a receiver that is down gets every queued notification when it is back (within the
outbox bound, see storage/repo/alerts.py).

Receivers and their bodies (`render`):
- `alertmanager`: Prometheus Alertmanager API v2, `POST <url>/api/v2/alerts` with a JSON list of
  {labels, annotations, startsAt, endsAt, generatorURL} (RFC 3339 times). A firing alert gets
  `endsAt` = now + `am_expire_s`: the runner re-sends it every `am_resend_s`, and should the runner
  die, Alertmanager resolves it by itself. A resolved one gets its real end time.
  Cross-check: `amtool alert query --alertmanager.url=URL` or `curl URL/api/v2/alerts`.
- `webhook`, format `json`: `POST url` with {"version": "pitwall/1", "status", "alerts": [...]}.
- `webhook`, format `slack`: `POST url` with {"text": "..."} (Slack, Mattermost, Rocket.Chat).
  An optional token goes in `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import Engine

from collectors.http import capped_client, get_capped
from storage import repo
from storage.redact import redact_text

log = logging.getLogger("pitwall.alerts")

RESPONSE_CAP = 64 * 1024  # bytes of a receiver's answer read (it is only logged)


@dataclass(frozen=True)
class Receiver:
    name: str  # "alertmanager" | "webhook"
    url: str
    format: str = "json"  # webhook only: json | slack
    token: str | None = None

    def endpoint(self) -> str:
        if self.name == "alertmanager":
            return self.url.rstrip("/") + "/api/v2/alerts"
        return self.url


def receivers(alerting: Mapping[str, Any]) -> list[Receiver]:
    """The receivers the `[alerting]` settings table names: Alertmanager (`alertmanager_url`), then a
    webhook (`webhook_url`, `webhook_format`, `webhook_token`); none when neither URL is set."""
    out = []
    if alerting.get("alertmanager_url"):
        out.append(Receiver("alertmanager", alerting["alertmanager_url"]))
    if alerting.get("webhook_url"):
        out.append(Receiver("webhook", alerting["webhook_url"], format=alerting.get("webhook_format", "json"),
                            token=alerting.get("webhook_token")))
    return out


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def alertmanager_alert(payload: dict[str, Any], *, now: float, expire_s: float) -> dict[str, Any]:
    """One Alertmanager v2 postableAlert from an outbox payload."""
    ends = payload.get("ends_at") if payload["status"] == "resolved" else None
    return {
        "labels": {k: str(v) for k, v in (payload.get("labels") or {}).items()},
        "annotations": {k: str(v) for k, v in (payload.get("annotations") or {}).items()},
        "startsAt": _rfc3339(float(payload["starts_at"])),
        "endsAt": _rfc3339(float(ends) if ends else now + expire_s),
        "generatorURL": payload.get("generator_url") or "",
    }


def slack_text(payload: dict[str, Any]) -> str:
    labels = payload.get("labels") or {}
    mark = "RESOLVED" if payload["status"] == "resolved" else str(labels.get("severity", "")).upper()
    summary = (payload.get("annotations") or {}).get("summary", "")
    link = payload.get("generator_url") or ""
    return f"[{mark}] {labels.get('alertname', '?')} on {labels.get('server', '?')}: {summary}" + (
        f" <{link}|Server page>" if link else "")


def render(receiver: Receiver, payloads: list[dict[str, Any]], *, now: float, expire_s: float) -> Any:
    if receiver.name == "alertmanager":
        return [alertmanager_alert(p, now=now, expire_s=expire_s) for p in payloads]
    if receiver.format == "slack":
        return {"text": "\n".join(slack_text(p) for p in payloads)}
    status = "firing" if any(p["status"] == "firing" for p in payloads) else "resolved"
    return {"version": "pitwall/1", "status": status, "alerts": payloads}


class Sender:
    """`send(now)` drains what is due, per receiver, oldest first."""

    def __init__(self, engine: Engine, receivers: list[Receiver], *, deadline_s: float = 10.0,
                 backoff_s: float = 5.0, max_backoff_s: float = 300.0, am_expire_s: float = 300.0,
                 batch: int = 50) -> None:
        self.engine, self.receivers = engine, receivers
        self.deadline_s, self.backoff_s, self.max_backoff_s = deadline_s, backoff_s, max_backoff_s
        self.am_expire_s, self.batch = am_expire_s, batch

    def send(self, now: float | None = None) -> dict[str, int]:
        """{receiver: notifications delivered in this pass}."""
        now = time.time() if now is None else now
        out = {}
        for receiver in self.receivers:
            try:
                out[receiver.name] = self._drain(receiver, now)
            except Exception as exc:  # a database hiccup: the rows stay, next pass retries
                log.warning("alert delivery to %s failed: %s", receiver.name, redact_text(str(exc)))
        return out

    def _drain(self, receiver: Receiver, now: float) -> int:
        sent = 0
        # Alertmanager takes a list per call; a webhook gets one notification per call, in order
        per_call = self.batch if receiver.name == "alertmanager" else 1
        while True:
            rows = repo.due_notifications(self.engine, receiver=receiver.name, now=now, limit=per_call)
            if not rows:
                return sent
            error = self._post(receiver, [r.payload or {} for r in rows], now)
            ids = [r.id for r in rows if r.id is not None]
            if error is None:
                repo.delete_notifications(self.engine, ids=ids)
                sent += len(ids)
                continue
            delay = min(self.backoff_s * 2 ** rows[0].attempts, self.max_backoff_s)
            repo.defer_notifications(self.engine, ids=ids, next_at=now + delay, error=error)
            log.warning("alert receiver %s: %s (retrying in %.0f s)", receiver.name, error, delay)
            return sent

    def _post(self, receiver: Receiver, payloads: list[dict[str, Any]], now: float) -> str | None:
        return post(receiver, payloads, now=now, deadline_s=self.deadline_s, expire_s=self.am_expire_s)


def post(receiver: Receiver, payloads: list[dict[str, Any]], *, now: float, deadline_s: float,
         expire_s: float) -> str | None:
    """One call to a receiver: None when it took it (2xx), else the reason, secrets masked."""
    headers = {"Authorization": f"Bearer {receiver.token}"} if receiver.token else {}
    body = render(receiver, payloads, now=now, expire_s=expire_s)
    try:
        with capped_client(deadline_s) as client:
            resp = get_capped(client, receiver.endpoint(), method="POST", json_body=body, headers=headers,
                              deadline_s=deadline_s, max_bytes=RESPONSE_CAP)
    except Exception as exc:
        return _without_url(redact_text(f"{type(exc).__name__}: {exc}"), receiver)
    if 200 <= resp.status_code < 300:
        return None
    return f"HTTP {resp.status_code}: {redact_text(resp.content[:200].decode('utf-8', 'replace'))}"


def _without_url(message: str, receiver: Receiver) -> str:
    """An error message with the receiver's URL and path taken out (a webhook's path is its
    credential, see storage/redact.py)."""
    endpoint = receiver.endpoint()
    path = urlsplit(endpoint).path
    message = message.replace(endpoint, f"<{receiver.name} url>")
    return message.replace(path, "<path>") if len(path) > 1 else message


def send_test(receiver: Receiver, *, deadline_s: float = 10.0, now: float | None = None) -> str | None:
    """Send one test alert (`alertname=PitwallTest`, resolved a minute later) straight to a
    receiver, bypassing the outbox; None when it answered 2xx, else the reason."""
    now = time.time() if now is None else now
    payload = {"status": "firing", "labels": {"alertname": "PitwallTest", "severity": "info", "server": "pitwall"},
               "annotations": {"summary": "A test alert from `pitwall alerts test`; nothing is wrong."},
               "starts_at": now, "ends_at": None, "generator_url": "", "fingerprint": "PitwallTest"}
    return post(receiver, [payload], now=now, deadline_s=deadline_s, expire_s=60.0)
