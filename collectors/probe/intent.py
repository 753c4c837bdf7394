"""The runner's handler for `probe` intents (a sweep started from the dashboard).

Intent.payload is a SweepSpec dict (sweep.py); `url` may be left out when the intent names a
server (Intent.server_id): the server's base_url and api_key are used. The sweep runs in its own
process (`run_sweep_subprocess`); the intent's progress mirrors ProbeRun.progress and its result
names the run: `{"run_id": N, "status": "done" | "aborted" | "failed"}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from collectors.probe import store
from collectors.probe.sweep import SweepSpec, run_sweep_subprocess
from storage import repo
from storage.models import Intent


def make_probe_intent_handler(engine: Engine, db_url: str, *, timeout_s: float | None = 3600.0) -> Callable[[Intent], None]:
    """A handler for the runner's `intent_handlers={"probe": ...}`."""

    def handle(intent: Intent) -> None:
        assert intent.id is not None
        intent_id = intent.id
        payload: dict[str, Any] = dict(intent.payload or {})
        if intent.server_id is not None:
            payload.setdefault("server_id", intent.server_id)
            if "url" not in payload:
                server = repo.get_server(engine, id=intent.server_id)
                if server is None:
                    repo.update_intent(engine, intent_id=intent_id, state="failed",
                                       message=f"Server {intent.server_id} does not exist; pick another server.")
                    return
                payload["url"] = server.base_url
                if server.api_key and not payload.get("api_key"):
                    payload["api_key"] = server.api_key
        try:
            spec = SweepSpec.from_dict(payload)
            spec.validate()
        except (ValueError, TypeError) as exc:
            repo.update_intent(engine, intent_id=intent_id, state="failed", message=f"Bad probe request: {exc}")
            return

        def progress(run_id: int, frac: float) -> None:
            repo.update_intent(engine, intent_id=intent_id, progress={
                "stage": "probe", "fraction": frac, "detail": f"probe run {run_id}"})

        run_id = run_sweep_subprocess(engine, db_url, spec, timeout_s=timeout_s, on_progress=progress)
        row = store.get_run(engine, run_id=run_id) or {}
        status = str(row.get("status", "failed"))
        repo.update_intent(engine, intent_id=intent_id, state="failed" if status == "failed" else "done",
                           result={"run_id": run_id, "status": status},
                           message=row.get("error") or f"Probe run {run_id} {status}.")

    return handle
