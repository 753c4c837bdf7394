"""Builds runner/alerts' Alerting from settings: the rules of `[[alerts]]` (with the Alerts page's
stored edits, re-read at every pass), the receivers of `alerting.*`, and each server's SLO targets
(scorecard/slo.py, which the runner cannot import) injected as a callable."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import Engine

from config.settings import Settings
from runner.alerts import Alerting
from runner.alerts.deliver import Receiver, Sender
from runner.alerts.engine import AlertConfig, AlertEvaluator
from runner.alerts.rules import build_rules, rule_source
from scorecard import slo


def receivers(settings: Settings) -> list[Receiver]:
    opts = settings.alerting
    out = []
    if opts.get("alertmanager_url"):
        out.append(Receiver("alertmanager", opts["alertmanager_url"]))
    if opts.get("webhook_url"):
        out.append(Receiver("webhook", opts["webhook_url"], format=opts.get("webhook_format", "json"),
                            token=opts.get("webhook_token")))
    return out


def slo_targets(settings: Settings, engine: Engine) -> Callable[[str], dict[str, float]]:
    """server name -> {slo key: target} (defaults, [slo], UI edits; read at every pass)."""
    def targets(server: str) -> dict[str, float]:
        resolved = slo.resolve(server, settings.slo, slo.load_overrides(engine))
        return {k: t.target for k, t in resolved.targets.items()}

    return targets


def build_evaluator(settings: Settings, engine: Engine) -> AlertEvaluator:
    opts = settings.alerting
    config = AlertConfig(
        receivers=tuple(r.name for r in receivers(settings)),
        repeat_s=float(opts.get("repeat_interval_s", 4 * 3600.0)),
        am_resend_s=max(float(opts.get("eval_interval_s", 15.0)) * 4, 60.0),
        outbox_max=int(opts.get("outbox_max", 10_000)),
        inhibit_grace_s=float(opts.get("inhibit_grace_s", 120.0)),
        dashboard_url=f"http://{settings.host}:{settings.port}",
    )
    defaults = bool(opts.get("defaults", True))
    source = rule_source(engine, settings.alerts, defaults=defaults)
    # the file's rules now (a bad [[alerts]] stops the start with its message); edits join each pass
    return AlertEvaluator(engine, build_rules(settings.alerts, defaults=defaults), config=config, slo_targets=slo_targets(settings, engine),
                          rule_source=source)


def build_alerting(settings: Settings, engine: Engine) -> Alerting:
    opts = settings.alerting
    evaluator = build_evaluator(settings, engine)
    sender = Sender(engine, receivers(settings), deadline_s=float(opts.get("send_deadline_s", 10.0)),
                    am_expire_s=evaluator.config.am_resend_s * 4)
    return Alerting(evaluator, sender, eval_interval_s=float(opts.get("eval_interval_s", 15.0)))
