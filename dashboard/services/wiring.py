"""Wires the runner's supervisor and intent handlers from dashboard services.

The runner lives in collectors/ and must not import dashboard/, so the CLI builds these parts
here and injects them (DESIGN.md import direction).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from dashboard.settings import Settings


def runner_parts(settings: Settings, engine: Engine) -> tuple[Any, dict[str, Any]]:
    """(supervisor or None, {intent kind: handler})."""
    supervisor = None
    handlers: dict[str, Any] = {}
    handlers["probe"] = __import__("dashboard.services.benchmarks", fromlist=["_"]).probe_intent_handler(engine, settings)
    return supervisor, handlers
