"""Profile validation runs in the runner's check lane, never in a page.

Validating a profile with the engine's own parser imports the engine (and torch) in the server's Python:
seconds, up to PARSER_TIMEOUT_S on a cold disk. The Profiles page records an Intent(kind=
"validate", payload={"profile": NAME, "server": NAME or None}) and returns at once; this handler
runs the injected validator (launching/launcher.py through the wiring: flags against
the engine's parser via runner/procs.run_capture, env, guardrails) and stores the verdict in
Intent.result as {"ok": bool, "checked_by": str, "issues": [{"severity", "flag", "message"}]},
which the page draws as it arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from collectors.engines import DEFAULT_ENGINE, display_name
from storage import repo
from storage.models import Intent

#: (profile name, server name or None, actor) -> {"ok", "checked_by", "issues"}
Validator = Callable[[str, str | None, str], dict[str, Any]]


class Validations:
    def __init__(self, engine: Engine, validator: Validator) -> None:
        self.engine = engine
        self.validator = validator

    def handle(self, intent: Intent) -> None:
        assert intent.id is not None
        payload = intent.payload or {}
        profile = payload.get("profile")
        if not profile:
            repo.update_intent(self.engine, intent_id=intent.id, state="failed",
                               message="Validation names no profile; pick one and press Validate again.")
            return
        server = payload.get("server")
        where = f" for {server}" if server else ""
        row = repo.get_server(self.engine, name=str(server)) if server else None
        name = display_name(row.engine if row is not None else DEFAULT_ENGINE)
        repo.update_intent(self.engine, intent_id=intent.id, progress={
            "stage": "validating", "fraction": 0.3,
            "detail": f"checking {profile}{where}: flags ({name}'s parser when installed), env, guardrails"})
        try:
            verdict = self.validator(str(profile), str(server) if server else None, intent.requested_by)
        except Exception as exc:  # a profile that cannot be read: one sentence, not a traceback
            msg = f"{profile} could not be validated: {exc}"
            repo.update_intent(self.engine, intent_id=intent.id, state="failed", message=msg,
                               progress={"stage": "failed", "fraction": 1.0, "detail": msg})
            return
        ok = bool(verdict.get("ok"))
        n = len([i for i in verdict.get("issues", []) if i.get("severity") == "error"])
        msg = (f"{profile} is valid" if ok else f"{profile} is invalid ({n} error{'s' if n != 1 else ''})") + \
            f" (checked by {verdict.get('checked_by')})."
        repo.update_intent(self.engine, intent_id=intent.id, state="done", message=msg, result=verdict,
                           progress={"stage": "valid" if ok else "invalid", "fraction": 1.0, "detail": msg})
