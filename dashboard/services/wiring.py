"""Wires the runner's supervisor and intent handlers from dashboard services.

The runner lives in collectors/ and must not import dashboard/, so the CLI builds these parts
here and injects them (DESIGN.md import direction): the profiles folder is mirrored into storage,
and collectors.supervisor.ProcessSupervisor gets the launcher's Planner (profile -> validated
LaunchPlan) and handles the launch / stop / relaunch intents.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.engine import Engine

from collectors.supervisor import ProcessSupervisor
from dashboard.services import benchmarks, launcher, profiles
from dashboard.settings import Settings
from storage import repo

log = logging.getLogger("pitwall.runner")


def runner_parts(
    settings: Settings, engine: Engine, *, auto_start: bool = True, auto_restart: bool = False
) -> tuple[Any, dict[str, Any]]:
    """(supervisor, {intent kind: handler}); mirrors profiles/ into storage first."""
    _, errors = profiles.sync_profiles(engine, settings.profiles_dir)
    for err in errors:
        log.error(err)
        repo.add_event(engine, kind="bad_cli_flag", message=err, severity="warning")
    supervisor = ProcessSupervisor(
        engine, launcher.Planner(settings, engine), auto_start=auto_start, auto_restart=auto_restart
    )
    handlers: dict[str, Any] = {kind: supervisor.handle_intent for kind in ("launch", "stop", "relaunch")}
    handlers["probe"] = benchmarks.probe_intent_handler(engine, settings)
    return supervisor, handlers
