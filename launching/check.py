"""A named profile checked as the runner's check lane does it (runner/validation.py): the launch
validation of launcher.py (sandbox, flags, guardrails) against the server it would replace, plus
preflight.py's host facts (GPU memory, disk) for an LLM profile, with one `profile_validate`
Audit row saying who asked and what was found. The Profiles page and `pitwall profiles validate`
request it through an intent; the runner's assembly (cli/wiring.py) calls it.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from collectors.engines import get_engine
from config.settings import Settings
from launching import guardrails, launcher, preflight, profiles
from storage import repo


def validate_named(engine: Engine, settings: Settings, name: str, server_name: str | None, actor: str) -> launcher.Report:
    spec = profiles.resolve(engine, settings.profiles_dir, name)
    server = repo.get_server(engine, name=server_name) if server_name else None
    replacing = False
    own: list[int] = []
    if server is not None and server.id is not None:
        launch = launcher.running_launch(engine, server.id)
        replacing = launch is not None
        own = guardrails.process_tree(launch.pid) if launch is not None else []
    report = launcher.validate(spec, server, replacing=replacing, own_pids=own,
                               sandbox=launcher.sandbox_for(settings, engine))
    if server is not None and server.id is not None and get_engine(server.engine).profile_kind(spec.flags) == "llm":
        facts = preflight.host_facts(engine, server, replacing=replacing)
        report.issues.extend(preflight.preflight(spec.model_path, spec.flags, facts))
    repo.add_audit(engine, actor=actor, action="profile_validate", target=name,
                   detail={"ok": report.ok, "issues": report.lines(), "checked_by": report.checked_by})
    return report
