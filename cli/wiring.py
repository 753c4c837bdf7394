"""Builds the runner (runner/) with what the runner package cannot import: profiles, validation,
settings, the scorecard. Imports run one way (README.md, "How it fits together"), so the CLI
asks this module for a Runner with its parts injected (and it imports nothing of dashboard/:
tests/foundation/test_meta.py):

- the supervisor (runner/supervisor.py) gets the launcher's Planner (profile -> validated
  LaunchPlan) and the `[runner]` settings (auto_restart, restart budget);
- the control lane runs launch / stop / relaunch, the probe lane sweeps (runner/sweeps.py), the
  check lane profile validation (runner/validation.py with check.validate_named), the
  tune lane tune runs (runner/tunes.py with the scorer of scorecard/scorer.py);
- the profiles folder is mirrored into storage first;
- alerting (runner/alerts) gets the rules of `[[alerts]]` (with the Alerts page's stored edits,
  re-read at every pass), the receivers of `alerting.*` and each server's SLO targets
  (scorecard/slo.py, which the runner cannot import) injected as a callable;
- Pitwall's own `/metrics` (runner/own_metrics.py) gets each server's scorecard grades
  (scorecard/grades.py) injected as a callable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from collectors.registry import build_collectors
from config.settings import Settings
from launching import check, launcher, profiles
from present.dependents import resolver
from runner.alerts import Alerting
from runner.alerts.deliver import Sender, receivers
from runner.alerts.engine import AlertConfig, AlertEvaluator
from runner.alerts.rules import build_rules, rule_source
from runner.lease import LEASE_TTL_S
from runner.loop import Runner
from runner.own_metrics import build_exporter
from runner.supervisor import ProcessSupervisor
from runner.sweeps import Sweeps
from runner.tunes import Tunes
from runner.validation import Validations
from scorecard import slo
from scorecard.grades import grades_only
from scorecard.scorer import make_scorer
from storage import repo
from storage.kinds import CONTROL_KINDS

log = logging.getLogger("pitwall.runner")


def runner_parts(
    settings: Settings, engine: Engine, *, auto_start: bool = True, auto_restart: bool | None = None
) -> tuple[ProcessSupervisor, dict[str, Any]]:
    """(supervisor, {intent kind: handler}); mirrors profiles/ into storage first."""
    _, errors = profiles.sync_profiles(engine, settings.profiles_dir)
    if profiles.candidates_dir(settings.data_dir).is_dir():  # the Doctor's candidates, under the data folder
        errors += profiles.sync_profiles(engine, profiles.candidates_dir(settings.data_dir))[1]
    for err in errors:
        log.error(err)
        repo.add_event(engine, kind="bad_cli_flag", message=err, severity="warning",
                       severity_reason="a profile file that does not load refuses no launch yet; "
                                       "launching it is refused later, as an error")
    opts = settings.runner
    supervisor = ProcessSupervisor(
        engine, launcher.Planner(settings, engine), auto_start=auto_start,
        auto_restart=bool(opts.get("auto_restart", False)) if auto_restart is None else auto_restart,
        restart_budget=int(opts.get("restart_budget", 3)),
        restart_window_s=float(opts.get("restart_window_s", 3600.0)),
        logs_dir=settings.logs_dir, host=opts.get("host"),
    )
    handlers: dict[str, Any] = {kind: supervisor.handle_intent for kind in CONTROL_KINDS}
    sweeps = Sweeps(engine, settings.database_url)
    handlers["probe"] = _with_close(sweeps.handle, sweeps.stop_all)

    def validate(profile: str, server: str | None, actor: str) -> dict[str, Any]:
        report = check.validate_named(engine, settings, profile, server, actor)
        return {"ok": report.ok, "checked_by": report.checked_by,
                "issues": [{"severity": i.severity, "flag": i.flag, "message": i.message} for i in report.issues]}

    handlers["validate"] = Validations(engine, validate).handle
    tunes = Tunes(engine, sweeps, make_scorer(engine, settings))
    handlers["tune"] = _with_close(tunes.handle, tunes.close)
    return supervisor, handlers


def build_runner(settings: Settings, engine: Engine) -> Runner:
    """The runner with every collector of the registry and the intent handlers wired in."""
    supervisor, handlers = runner_parts(settings, engine)
    # a GPU selector reads this host's dcgm-exporter through the fleet's Prometheus
    gpu = {**settings.gpu, "prometheus_url": settings.prometheus.get("url")}
    rules = rule_source(engine, settings.alerts, defaults=bool(settings.alerting.get("defaults", True)))
    collectors, errors = build_collectors(settings.probe, gpu=gpu, runner=settings.runner,
                                          dependents=resolver(rules))
    for err in errors:
        log.error(err)
        repo.add_event(engine, kind="collector_error", message=err, severity="error",
                       severity_reason="a collector the settings refuse is never built, so it is not "
                                       "retried like a failing one: it stays off until the settings are fixed")
    return Runner(engine, collectors, supervisor=supervisor, intent_handlers=handlers,
                  intent_expiry_s=float(settings.runner.get("intent_expiry_s", 900.0)),
                  retention=dict(settings.retention), logs_dir=settings.logs_dir,
                  alerting=build_alerting(settings, engine), exporter=build_exporter(settings, engine, grades=grades_only),
                  host=settings.runner.get("host"),
                  lease_ttl_s=float(settings.runner.get("lease_ttl_s", LEASE_TTL_S)))


class _with_close:  # noqa: N801 - reads as a function at the call site
    """A handler callable that also has close() (the runner calls it at shutdown)."""

    def __init__(self, handle: Any, close: Any) -> None:
        self._handle, self.close = handle, close

    def __call__(self, intent: Any) -> None:
        self._handle(intent)


# -- alerting: runner/alerts' Alerting from settings ---------------------------------------------
def slo_targets(settings: Settings, engine: Engine) -> Callable[[str], dict[str, float]]:
    """server name -> {slo key: target} (defaults, [slo], UI edits; read at every pass)."""
    def targets(server: str) -> dict[str, float]:
        resolved = slo.resolve(server, settings.slo, slo.load_overrides(engine))
        return {k: t.target for k, t in resolved.targets.items()}

    return targets


def build_evaluator(settings: Settings, engine: Engine) -> AlertEvaluator:
    opts = settings.alerting
    config = AlertConfig(
        receivers=tuple(r.name for r in receivers(settings.alerting)),
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
    sender = Sender(engine, receivers(settings.alerting), deadline_s=float(opts.get("send_deadline_s", 10.0)),
                    am_expire_s=evaluator.config.am_resend_s * 4)
    return Alerting(evaluator, sender, eval_interval_s=float(opts.get("eval_interval_s", 15.0)))
