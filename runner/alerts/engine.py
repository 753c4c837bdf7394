"""Rule evaluation in the runner: reads what the collectors stored, asks runner/alerts/evaluate.py
for a verdict per rule and server, moves each alert through runner/alerts/lifecycle.py, stores the
episodes, and queues notifications in the outbox (runner/alerts/deliver.py sends them).

Inhibition: while a launch, stop, relaunch or tune that an operator (or Pitwall's tuner) asked for
is pending or running, and `inhibit_grace_s` after it ended well, the rules of EVENT_RULES marked
inhibitable (crash, OOM, NCCL, health down, no samples) ignore that server: a planned restart
raises nothing. A failed one is not covered (its intent is `failed`), and `relaunch-failed` fires.
Auto-restarts are not operator plans: the crash that caused them has already been seen.

Each pass stores `{rule: {"at", "ms", "servers": {name: {"active", "value", "summary"}}}}` as
CollectorState `alerts:last_eval` for the Alerts page's rule list.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from sqlalchemy.engine import Engine

from runner.alerts import evaluate as ev
from runner.alerts.lifecycle import advance
from runner.alerts.rules import BURN_SPEEDS, EVENT_RULES, Rule
from runner.supervisor import AUTO_RESTART_BY
from storage import repo
from storage import series_keys as sk
from storage.kinds import EVENT_KINDS, INTENT_KINDS
from storage.models import AlertState, Server

log = logging.getLogger("pitwall.alerts")

STATE_KEY = "alerts:last_eval"
EVENT_WINDOW_S = 3600.0  # an event alert without a clearing event resolves after this long
#: intent kinds whose own work stops a server on purpose (`tune` when INTENT_KINDS has it)
PLANNED_KINDS = tuple(k for k in ("launch", "stop", "relaunch", "tune") if k in INTENT_KINDS)


@dataclass(frozen=True)
class AlertConfig:
    receivers: tuple[str, ...] = ()  # names of configured receivers ("alertmanager", "webhook")
    repeat_s: float = 4 * 3600.0  # a firing alert is notified again after this long
    am_resend_s: float = 60.0  # Alertmanager gets firing alerts again this often (it expires them)
    outbox_max: int = 10_000  # queued notifications per receiver
    inhibit_grace_s: float = 120.0
    dashboard_url: str = "http://127.0.0.1:8501"


class AlertEvaluator:
    """One `evaluate(now)` pass over every rule and server; pure parts in evaluate/lifecycle."""

    def __init__(self, engine: Engine, rules: Sequence[Rule], *, config: AlertConfig,
                 slo_targets: Callable[[str], dict[str, float]],
                 rule_source: Callable[[], list[Rule]] | None = None) -> None:
        self.engine, self.rules, self.config, self.slo_targets = engine, list(rules), config, slo_targets
        self.rule_source = rule_source  # read at every pass (the Alerts page's edits, no restart)
        self._am_sent: dict[str, float] = {}

    def _reload_rules(self) -> None:
        """Take the current rules from `rule_source`; a failed read keeps the last good ones."""
        if self.rule_source is None:
            return
        try:
            self.rules = list(self.rule_source())
        except Exception as exc:  # a database hiccup or a stale edit: evaluate what was in force
            log.warning("alert rules could not be reloaded (keeping the last ones): %s", exc)

    # -- one pass -------------------------------------------------------------------------------
    def evaluate(self, now: float | None = None) -> dict[str, dict]:
        now = time.time() if now is None else now
        self._reload_rules()
        servers = [s for s in repo.list_servers(self.engine) if s.id is not None]
        open_alerts = repo.open_alerts(self.engine)
        silences = repo.list_silences(self.engine, active_at=now)
        report: dict[str, dict] = {}
        queue: list[dict] = []
        for rule in self.rules:
            t0 = time.perf_counter()
            per_server: dict[str, dict] = {}
            for server in servers:
                if not rule.applies_to(server.name, server.kind):
                    continue
                try:
                    verdict = self.verdict(rule, server, now)
                except Exception as exc:  # one bad read never stops the other rules
                    log.warning("alert rule %s on %s failed: %s", rule.name, server.name, exc)
                    continue
                per_server[server.name] = {"active": verdict.active, "value": verdict.value,
                                           "summary": verdict.summary}
                queue += self._advance(rule, server, verdict, open_alerts, silences, now)
            report[rule.name] = {"at": now, "ms": (time.perf_counter() - t0) * 1000.0, "servers": per_server}
        self._resolve_orphans(open_alerts, now, queue)
        dropped = repo.enqueue_notifications(self.engine, rows=queue, max_rows=self.config.outbox_max, now=now)
        for receiver, n in dropped.items():
            repo.add_event(self.engine, kind="alert_dropped",
                           message=f"{n} alert notification(s) for {receiver} were dropped: the outbox held "
                                   f"{self.config.outbox_max} while {receiver} did not answer (oldest first).")
        with self.engine.begin() as conn:
            repo.save_state(conn, key=STATE_KEY, value=report)
        return report

    def _advance(self, rule: Rule, server: Server, verdict: ev.Verdict, open_alerts: dict[str, AlertState],
                 silences: list, now: float) -> list[dict]:
        fp = f"{rule.name}:{server.id}"
        prev = open_alerts.pop(fp, None)
        silenced = any((s.rule in (None, rule.name)) and (s.server in (None, server.name)) for s in silences)
        step = advance(prev, verdict, fresh=self._fresh(rule, server, fp, now), now=now, for_s=rule.for_s,
                       repeat_s=self.config.repeat_s, silenced=silenced)
        if step.drop is not None and step.drop.id is not None:
            repo.delete_alert(self.engine, alert_id=step.drop.id)
        saved = repo.save_alert(self.engine, alert=step.save) if step.save is not None else None
        rows = []
        if step.notify is not None and saved is not None:
            rows += [self._row(r, saved, step.notify) for r in self.config.receivers]
            self._am_sent[fp] = now
        elif saved is not None and saved.state == "firing" and not silenced and "alertmanager" in self.config.receivers \
                and now - self._am_sent.get(fp, 0.0) >= self.config.am_resend_s:
            rows.append(self._row("alertmanager", saved, "firing"))  # keep it alive in Alertmanager
            self._am_sent[fp] = now
        return rows

    def _resolve_orphans(self, open_alerts: dict[str, AlertState], now: float, queue: list[dict]) -> None:
        """Open episodes of rules or servers no longer configured resolve (or, pending, go)."""
        for alert in open_alerts.values():
            if alert.state == "pending" and alert.id is not None:
                repo.delete_alert(self.engine, alert_id=alert.id)
                continue
            alert.state, alert.resolved_at, alert.summary = "resolved", now, "rule or server no longer configured"
            saved = repo.save_alert(self.engine, alert=alert)
            if alert.notified_at is not None:
                queue += [self._row(r, saved, "resolved") for r in self.config.receivers]

    # -- verdicts -------------------------------------------------------------------------------
    def verdict(self, rule: Rule, server: Server, now: float) -> ev.Verdict:
        assert server.id is not None
        if rule.kind == "burn_rate":
            return self._burn(rule, server, now)
        if rule.kind == "threshold":
            metric, agg = rule.series()
            keys = [metric]
            if "<" in metric:  # a field on every GPU: each stored key it stands for
                keys = sk.keys_matching(metric, repo.metric_names(self.engine, server_id=server.id,
                                                                  prefix=sk.pattern_prefix(metric)))
            values: list[float] = []
            for key in keys:
                _, vals = repo.sample_points(self.engine, server_id=server.id, metric=key,
                                             since=now - rule.window_s, until=now + 1e-6)
                values += vals.tolist()
            return ev.threshold(values, agg=agg, op=rule.op, value=rule.value, what=metric)
        return self._event(rule, server, now)

    def _burn(self, rule: Rule, server: Server, now: float) -> ev.Verdict:
        assert server.id is not None
        target = self.slo_targets(server.name).get(rule.slo)
        if target is None:
            return ev.Verdict(False, None, f"{rule.slo} has no target for {server.name} ([slo])")
        short_s, long_s, factor = BURN_SPEEDS[rule.speed]
        rows = repo.probe_outcomes(self.engine, server_id=server.id, since=now - long_s)
        rows += self._canary_rows(server.id, now - long_s, now)
        outcomes = ev.outcomes_for(rule.slo, target, rows)
        verdict = ev.multiwindow(outcomes, now=now, short_s=short_s, long_s=long_s, factor=factor,
                                 budget=ev.error_budget(rule.slo, target), what=f"{rule.slo} (target {target:g})")
        return verdict

    def _canary_rows(self, server_id: int, since: float, now: float) -> list[tuple[float, bool, float | None, float | None]]:
        """Canary samples as (ts, ok, ttft_s, e2e_s), matched by timestamp (one request writes
        its three samples with the same ts)."""
        out: dict[float, list] = {}
        for i, metric in enumerate((sk.CANARY_OK, sk.CANARY_TTFT_S, sk.CANARY_E2E_S)):
            ts, values = repo.sample_points(self.engine, server_id=server_id, metric=metric, since=since,
                                            until=now + 1e-6)
            for t, v in zip(ts.tolist(), values.tolist(), strict=True):
                row = out.setdefault(t, [t, None, None, None])
                row[1 + i] = v
        return [(t, bool(ok), ttft, e2e) for t, ok, ttft, e2e in out.values() if ok is not None]

    def _event(self, rule: Rule, server: Server, now: float) -> ev.Verdict:
        assert server.id is not None
        raise_kinds, clear_kinds, inhibitable = EVENT_RULES[rule.event]
        inhibited = self._inhibition(server, now) if inhibitable else (lambda _ts: False)
        if rule.event == "health_down":
            if inhibited(now):
                return ev.Verdict(False, None, "inhibited: a launch, stop or relaunch Pitwall started")
            _, values = repo.sample_points(self.engine, server_id=server.id, metric=sk.API_HEALTH_OK,
                                           since=now - max(rule.window_s, 120.0), until=now + 1e-6)
            return ev.threshold(list(values), agg="last", op="<", value=1.0, what="/health answering (1 = 200)")
        if rule.event == "no_sample":
            limit = rule.intervals * rule.interval_s
            if inhibited(now) or server.stopped_by:
                return ev.Verdict(False, None, "inhibited: stopped or being (re)started by Pitwall")
            newest = repo.newest_sample_ts(self.engine, server_id=server.id, since=now - 2 * limit - 3600.0)
            return ev.silent_for(newest, now=now, limit_s=limit, what=f"samples from {server.name}")
        window = rule.window_s if rule.event == "decode_retract" else EVENT_WINDOW_S
        kinds = [k for k in raise_kinds + clear_kinds if k in EVENT_KINDS]
        # only what had happened by this pass's clock: an event written while the pass runs is
        # judged by the next pass, so an episode never resolves before the event that cleared it
        frame = repo.list_events(self.engine, server_id=server.id, kinds=kinds, since=now - window,
                                 until=now + 1e-6, limit=1000)
        if len(frame) and "severity" in frame:  # a drift Pitwall reads through (info) raises nothing
            frame = frame[~((frame["kind"] == "metric_drift") & (frame["severity"] == "info"))]
        events = list(zip(frame["ts"].astype(float).tolist(), frame["kind"].tolist(), strict=True)) if len(frame) else []
        if rule.event == "decode_retract":
            return ev.event_rate([t for t, _ in events], now=now, window_s=window, rate_per_min=rule.rate_per_min,
                                 what="decode retractions")
        return ev.latest_event(events, raise_kinds, clear_kinds, now=now, window_s=window, inhibited=inhibited,
                               what=rule.event.replace("_", " "))

    def _inhibition(self, server: Server, now: float) -> Callable[[float], bool]:
        """ts -> True when a planned launch/stop/relaunch/tune of this server covered it."""
        intents = repo.list_intents(self.engine, server_id=server.id, kinds=PLANNED_KINDS, limit=20)
        spans = []
        for it in intents:
            if it.requested_by == AUTO_RESTART_BY or it.state not in ("pending", "running", "done"):
                continue
            end = (it.finished_at or now) + self.config.inhibit_grace_s if it.state == "done" else now + 1.0
            spans.append((it.created_at, end))
        return lambda ts: any(a <= ts <= b for a, b in spans)

    # -- labels and payloads ----------------------------------------------------------------------
    def _fresh(self, rule: Rule, server: Server, fp: str, now: float) -> AlertState:
        launch = repo.latest_launch(self.engine, server_id=server.id) if server.id is not None else None
        args = (launch.server_args or {}) if launch is not None else {}
        labels = {"alertname": rule.name, "server": server.name, "host": urlsplit(server.base_url).hostname or "",
                  "profile": (launch.profile_name if launch else None) or server.profile or "",
                  "model": str(args.get("served_model_name") or args.get("model_path") or ""),
                  "severity": rule.severity, "rule_kind": rule.kind, **rule.labels}
        link = (f"{self.config.dashboard_url.rstrip('/')}/server?server={quote(server.name)}"
                f"&from={int(now - 3600)}&to={int(now + 600)}")
        annotations = {"summary": rule.summary, "server_page": link}
        return AlertState(rule=rule.name, server_id=server.id, fingerprint=fp, severity=rule.severity,
                          labels={k: v for k, v in labels.items() if v != ""}, annotations=annotations)

    def _row(self, receiver: str, alert: AlertState, status: str) -> dict:
        annotations = dict(alert.annotations or {})
        annotations["summary"] = " ".join(x for x in (annotations.get("summary"), alert.summary) if x)
        payload = {"status": status, "labels": alert.labels or {}, "annotations": annotations,
                   "starts_at": alert.fired_at or alert.active_since, "ends_at": alert.resolved_at,
                   "value": alert.value, "generator_url": annotations.get("server_page", ""),
                   "fingerprint": alert.fingerprint}
        return {"receiver": receiver, "fingerprint": alert.fingerprint, "status": status, "payload": payload}
