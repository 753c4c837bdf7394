"""What the Profiles page reads and does, Streamlit-free: tables, saves with audit, validation.

Every change made here lands in the Audit table with the actor (the signed-in operator, or
"local" on a loopback dashboard with no credential configured) and a diff; so does every
validation request.

Secrets (a flag such as `api-key`, an env var such as `HF_TOKEN`: storage/redact.py names them)
never reach the page: profiles, diffs, launches, intents and the audit trail come out redacted
(present/shown.py). A profile shown with `api-key = "***"` and saved unchanged keeps
its stored key (`_keep_secrets`); a new profile must spell its secrets out.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from collectors.engines import DEFAULT_ENGINE, get_engine
from config.settings import Settings
from dashboard.services.views import health
from launching import launcher, profiles, sandbox
from launching.profiles import ProfileError, ProfileSpec
from present import shown
from present.format import launch_label
from runner.supervisor import restarts_used
from storage import repo
from storage.kinds import CONTROL_KINDS
from storage.models import Intent, Launch, Server
from storage.redact import MASK, redact_obj, secret_name


@dataclass(frozen=True)
class ServerState:
    server: Server
    launch: Launch | None  # the current (not ended) launch
    intent: Intent | None  # the newest lifecycle intent


def managed_servers(engine: Engine) -> list[ServerState]:
    out = []
    for s in repo.list_servers(engine):
        if not s.managed or s.id is None:
            continue
        intents = repo.list_intents(engine, server_id=s.id, kinds=CONTROL_KINDS, limit=1)
        out.append(ServerState(shown.server(s), shown.launch(launcher.running_launch(engine, s.id)),
                               shown.intent(intents[0] if intents else None)))
    return out


def restart_policy(engine: Engine, settings: Settings, server_name: str | None) -> str:
    """One sentence on what the runner does when a managed server exits on its own, with the
    restarts the selected server has used of its budget."""
    opts = settings.runner
    if not opts.get("auto_restart"):
        return ("Auto-restart is off (`[runner] auto_restart = false`): a managed server that "
                "crashes stays down until someone launches it.")
    budget, window = int(opts.get("restart_budget", 3)), float(opts.get("restart_window_s", 3600))
    used = ""
    server = repo.get_server(engine, name=server_name) if server_name else None
    if server is not None and server.id is not None:
        n = restarts_used(engine, server.id, window)
        used = f" {server.name} has used {n} of {budget}."
    return (f"Auto-restart is on: a managed server that exits on its own is started again with "
            f"backoff, at most {budget} times per {window / 60:.0f} min; then it stays down.{used} "
            "A server an operator stopped is never started by the runner.")


def runner_alive(engine: Engine) -> bool:
    return health.runner_alive(engine)


def current_launch(engine: Engine, server_name: str) -> Launch | None:
    server = repo.get_server(engine, name=server_name)
    if server is None or server.id is None:
        return None
    return shown.launch(launcher.running_launch(engine, server.id))


def launch_name(engine: Engine, server_name: str, launch: Launch) -> str:
    """"demo launch 3": the launch by its number among its server's (format.launch_label)."""
    number = repo.launch_numbers(engine, [launch.id]).get(launch.id) if launch.id is not None else None
    return launch_label(server_name, number)


def latest_intent(engine: Engine, server_name: str) -> Intent | None:
    server = repo.get_server(engine, name=server_name)
    if server is None or server.id is None:
        return None
    found = repo.list_intents(engine, server_id=server.id, kinds=CONTROL_KINDS, limit=1)
    return shown.intent(found[0]) if found else None


def shown_spec(spec: ProfileSpec) -> ProfileSpec:
    """The profile as a page shows it (and its editor starts from): secret flags and env masked."""
    return dataclasses.replace(spec, flags=redact_obj(dict(spec.flags)), env=redact_obj(dict(spec.env)))


def flag_check_help() -> str:
    """What checks a profile's flags, for the Validate button: the default engine's own parser,
    else its bundled flag table (profiles start the default engine)."""
    engine = get_engine(DEFAULT_ENGINE)
    return f"{engine.display_name}'s own parser, or the {engine.bundled_table}"


def entrypoint_help() -> str:
    """The entrypoints a profile may name beside a Python module, quoted, for the editor's help."""
    return profiles.entrypoint_examples()


def sandbox_warning(settings: Settings) -> str | None:
    """The Profiles page's warning: what pitwall.toml lets profiles do beyond the launch sandbox
    (sandbox.allowances), one bullet each; None when it lets nothing."""
    lines = sandbox.allowances(settings)
    if not lines:
        return None
    return ("pitwall.toml lets profiles go beyond the launch sandbox (only pitwall.toml can; "
            "remove an entry to refuse it again):\n" + "\n".join(f"- {_plain(ln)}" for ln in lines))


def _plain(text: str) -> str:
    """A line of pitwall.toml text safe to draw as Markdown (no markup of its own)."""
    return "".join("\\" + c if c in "\\`*_[]()<>#+!|~" else c for c in text)


def profile_table(settings: Settings) -> tuple[pd.DataFrame, list[ProfileSpec], list[str]]:
    """(table, profiles as shown, errors); hashes are those of the files as stored."""
    specs, errors = profiles.load_dir(settings.profiles_dir)
    if profiles.candidates_dir(settings.data_dir).is_dir():  # the Doctor's candidates
        mine, more = profiles.load_dir(profiles.candidates_dir(settings.data_dir))
        specs, errors = specs + mine, errors + more
    rows = [
        {"name": s.name, "hash": s.content_hash, "model": s.model_path, "entrypoint": s.entrypoint,
         "flags": len(s.flags), "env": len(s.env), "description": s.description}
        for s in specs
    ]
    return pd.DataFrame(rows), [shown_spec(s) for s in specs], errors


def running_diff(engine: Engine, server_name: str, spec: ProfileSpec) -> tuple[str | None, pd.DataFrame | None]:
    """(running profile name, diff table running -> spec), or (None, None) when nothing runs."""
    server = repo.get_server(engine, name=server_name)
    if server is None:
        return None, None
    rows = launcher.diff_against_running(engine, server, _stored(engine, spec))
    if rows is None:
        return None, None
    assert server.id is not None
    launch = launcher.running_launch(engine, server.id)
    running = launch.profile_name if launch else None
    return running, shown.diff_frame(rows, f"running ({running})", spec.name)


def toml_value(text: str) -> Any:
    """A form cell as a TOML value: `0.8`, `true`, `"lpm"`, `[1, 2]`; bare words stay strings."""
    text = text.strip()
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def toml_literal(value: Any) -> str:
    """The TOML text of one value (the inverse of toml_value)."""
    import tomli_w

    return tomli_w.dumps({"v": value}).strip()[len("v = "):]


def save_toml(engine: Engine, settings: Settings, text: str, actor: str) -> tuple[ProfileSpec, list[tuple[str, Any, Any]]]:
    """Validate the shape of raw TOML, write profiles/<name>.toml, mirror, audit (with the diff)."""
    spec = profiles.parse_profile(text, source="the edited profile")
    return _save(engine, settings, spec, actor)


def save_form(
    engine: Engine,
    settings: Settings,
    *,
    name: str,
    description: str,
    model_path: str,
    entrypoint: str,
    flags: list[tuple[str, str]],
    env: list[tuple[str, str]],
    actor: str,
) -> tuple[ProfileSpec, list[tuple[str, Any, Any]]]:
    """The form's fields -> profile file; flag values are TOML literals, env values strings."""
    flag_map: dict[str, Any] = {}
    for key, raw in flags:
        key = (key or "").strip()
        if key:
            flag_map[key] = toml_value(raw or "true")
    env_map = {(k or "").strip(): str(v or "") for k, v in env if (k or "").strip()}
    text = profiles.dump_profile(ProfileSpec(name=name.strip(), description=description, model_path=model_path.strip(),
                                             entrypoint=entrypoint.strip(), flags=flag_map, env=env_map))
    return save_toml(engine, settings, text, actor)


def _stored(engine: Engine, spec: ProfileSpec) -> ProfileSpec:
    """The profile as stored (its file, else its mirror) behind a shown (masked) copy."""
    if spec.source_path:
        try:
            return profiles.load_file(Path(spec.source_path))
        except (ProfileError, OSError):
            pass
    row = repo.get_profile(engine, name=spec.name)
    return profiles.from_row(row) if row is not None else spec


def _keep_secrets(engine: Engine, settings: Settings, spec: ProfileSpec) -> ProfileSpec:
    """A saved profile whose secret flags / env still read `***` (shown masked, left unchanged)
    keeps the stored values; ProfileError when there is nothing stored to keep."""
    masked = [k for k, v in {**spec.flags, **spec.env}.items() if v == MASK and secret_name(k)]
    if not masked:
        return spec
    try:
        old: ProfileSpec | None = profiles.resolve(engine, settings.profiles_dir, spec.name)
    except ProfileError:
        old = None
    flags, env = dict(spec.flags), dict(spec.env)
    for table, before in ((flags, old.flags if old else {}), (env, old.env if old else {})):
        for k, v in table.items():
            if v == MASK and secret_name(k):
                if k not in before:
                    raise ProfileError(
                        f"{k} of profile {spec.name} reads {MASK} (a hidden secret) and no stored "
                        "value is there to keep; type the value itself.")
                table[k] = before[k]
    return dataclasses.replace(spec, flags=flags, env=env)


def _save(engine: Engine, settings: Settings, spec: ProfileSpec, actor: str) -> tuple[ProfileSpec, list[tuple[str, Any, Any]]]:
    spec = _keep_secrets(engine, settings, spec)
    # the launch sandbox refuses before anything is written: the editor shows the same reason
    # `pitwall profiles validate` would print
    refused = [i for i in launcher.sandbox_issues(spec, launcher.sandbox_for(settings, engine)) if i.severity == "error"]
    if refused:
        raise ProfileError(f"{spec.name} was not saved: {refused[0].message}"
                           + (f" (+{len(refused) - 1} more)" if len(refused) > 1 else ""))
    before = repo.get_profile(engine, name=spec.name)
    old = profiles.from_row(before).canonical() if before is not None else {}
    row = profiles.save(engine, settings.profiles_dir, spec)
    changes = profiles.diff(old, spec.canonical())
    shown_changes = [list(map(shown.setting_text, r)) for r in shown.diff_rows(changes)]
    repo.add_audit(engine, actor=actor, action="profile_create" if before is None else "profile_edit",
                   target=spec.name, detail={"hash": row.content_hash, "diff": shown_changes})
    return spec, changes


def _shown_detail(detail: Any) -> Any:
    """An audit detail as shown: redacted, a profile diff's secret settings masked (rows written
    before the trail was redacted at write time included)."""
    if isinstance(detail, dict) and isinstance(detail.get("diff"), list):
        rows = [r for r in detail["diff"] if isinstance(r, list | tuple) and r]
        return {**redact_obj({k: v for k, v in detail.items() if k != "diff"}),
                "diff": [list(r) for r in shown.diff_rows(rows)]}
    return redact_obj(detail)


def audit_frame(engine: Engine, limit: int = 50) -> pd.DataFrame:
    rows = [{"ts": a.ts, "actor": a.actor, "action": a.action, "target": a.target,
             "detail": _shown_detail(a.detail)}
            for a in repo.list_audit(engine, limit=limit)]
    return pd.DataFrame(rows, columns=["ts", "actor", "action", "target", "detail"])


def request_validation(engine: Engine, *, profile: str, server_name: str | None, actor: str) -> Intent:
    """Record a `validate` intent and a `validate_request` Audit row: the runner's check lane runs
    it (the engine's own parser can take seconds to import), the page follows it with
    `latest_validation`. Returns at once."""
    server = repo.get_server(engine, name=server_name) if server_name else None
    intent = repo.create_intent(engine, kind="validate", server_id=server.id if server else None,
                                payload={"profile": profile, "server": server_name}, requested_by=actor)
    # the request is audited here (the verdict adds `profile_validate` when the runner ran it)
    repo.add_audit(engine, actor=actor, action="validate_request", target=profile,
                   detail={"server": server_name, "intent_id": intent.id})
    return intent


def latest_validation(engine: Engine, profile: str) -> Intent | None:
    """The newest validate intent of this profile (its progress, then its verdict in .result)."""
    for intent in repo.list_intents(engine, kinds=("validate",), limit=50):
        if (intent.payload or {}).get("profile") == profile:
            return shown.intent(intent)
    return None


def request_action(engine: Engine, *, kind: str, server_name: str, actor: str, profile: str | None = None) -> Intent:
    """launcher.request for the page (raises LauncherError with one sentence)."""
    return launcher.request(engine, kind=kind, server_name=server_name, actor=actor, profile=profile)


__all__ = ["ProfileError", "ServerState"]
