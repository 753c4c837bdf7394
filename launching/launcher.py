"""Launcher: validate profiles, plan launches for the runner's supervisor, record lifecycle intents.

- `validate(spec, server)` -> Report: the launch sandbox (sandbox.py: entrypoint, [env]
  allow-list, the deny table of code loaders, remote services, paths and ports); [flags] against
  the engine's own parser when the engine imports in the server's Python (the Engine's
  `flag_parser`, run as a child of runner/procs.py with an argument list and a deadline; secret
  values replaced by "x"), otherwise against the engine's bundled flag table (`check_flags`);
  and the guardrails (port, GPUs, model path, tp x dp).
- `Planner` (injected into runner.supervisor.ProcessSupervisor by wiring.py): profile name ->
  validated LaunchPlan, or PlanError (event kind bad_cli_flag / port_in_use). The runner calls
  it right before it starts the process, so a profile or pitwall.toml edited since the last
  validation is judged again. Secret flags go into a 0600 `--config` file (sandbox.write_secrets).
- `request(...)` writes a launch/stop/relaunch Intent for the runner, with an Audit row; it
  refuses while another lifecycle intent for the server is pending or running (one action per
  server at a time; the supervisor applies the same rule to requests that raced past this check).
- `follow(...)` polls an Intent until it finishes (CLI, bench).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from collectors.base import FlagParser, Issue
from collectors.engines import DEFAULT_ENGINE, get_engine
from config.settings import Settings
from launching import guardrails, profiles
from launching.profiles import ProfileSpec
from launching.sandbox import (
    BUNDLED_ENTRYPOINTS,
    Sandbox,
    config_path_of,
    host_port,
    sandbox_for,
    sandbox_issues,
    write_secrets,
)
from present.format import request_label
from runner import procs
from runner.launch_plan import LaunchPlan, PlanError
from storage import repo
from storage.errors import RequestError
from storage.kinds import CONTROL_KINDS, FINAL_INTENT_STATES
from storage.models import Intent, Launch, Server

# the sandbox's names stay importable from here (profile_admin, the CLI and tests use them)
__all__ = ["BUNDLED_ENTRYPOINTS", "Sandbox", "host_port", "sandbox_for", "sandbox_issues"]

PARSER_TIMEOUT_S = 120.0  # importing an engine imports torch: seconds, more on a cold disk
FINAL_STATES = FINAL_INTENT_STATES


class LauncherError(RequestError, ValueError):
    """A request cannot be recorded (unknown server, busy, read-only); one sentence."""


@dataclass
class Report:
    """Validation outcome: issues by severity and what checked the flags."""

    issues: list[Issue] = field(default_factory=list)
    checked_by: str = field(default_factory=lambda: get_engine(DEFAULT_ENGINE).bundled_table)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "error"]

    def lines(self) -> list[str]:
        return [str(i) for i in self.issues]


# (python, argv, env) -> the real parser's verdict. Importing an engine takes seconds (torch), so
# a relaunch to a profile already validated in this process does not pay it again.
_PARSER_CACHE: dict[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], tuple[list[Issue], str]] = {}
_PARSER_CACHE_MAX = 64


def real_parser_issues(python: str, spec: ProfileSpec, timeout_s: float = PARSER_TIMEOUT_S,
                       engine: str = DEFAULT_ENGINE) -> tuple[list[Issue], str] | None:
    """Ask the engine's own parser in `python`; None when the engine cannot be imported there
    (or has no parser).

    Also checks that `python` can find the profile's entrypoint module (an error Issue if not).
    """
    parser = get_engine(engine).flag_parser
    if parser is None:
        return None
    args = tuple(parser.args(spec.entrypoint, spec.model_path, spec.flags))
    key = (python, args, tuple(sorted((k, str(v)) for k, v in spec.env.items())))
    if key in _PARSER_CACHE:
        return _PARSER_CACHE[key]
    result = _run_real_parser(python, spec, list(args), timeout_s, parser)
    if result is not None:
        if len(_PARSER_CACHE) >= _PARSER_CACHE_MAX:
            _PARSER_CACHE.pop(next(iter(_PARSER_CACHE)))
        _PARSER_CACHE[key] = result
    return result


def _run_real_parser(python: str, spec: ProfileSpec, args: list[str], timeout_s: float,
                     parser: FlagParser | None = None) -> tuple[list[Issue], str] | None:
    """Runs in the runner's check lane (runner/validation.py), never in a page: a child of
    runner/procs.py with a total deadline and capped output; its environment carries no
    PITWALL_* variable (procs.child_env)."""
    parser = parser or get_engine(DEFAULT_ENGINE).flag_parser
    if parser is None:
        return None
    argv = [python, "-c", parser.script, *args]
    env = procs.child_env({k: str(v) for k, v in spec.env.items()}, keep_pitwall=False)
    try:
        proc = procs.run_capture(argv, timeout_s=timeout_s, env=env)
    except OSError:
        return None
    if proc.timed_out:
        return None
    return parser.verdict(python, spec.entrypoint, spec.flags, proc.returncode, proc.stderr)


def validate(
    spec: ProfileSpec,
    server: Server | None = None,
    *,
    replacing: bool = False,
    own_pids: list[int] | None = None,
    use_real_parser: bool = True,
    gpu_snapshot: dict[int, list[guardrails.GpuProcess]] | None = None,
    sandbox: Sandbox | None = None,
) -> Report:
    """Every check a launch of `spec` on `server` must pass (server None: flags and env only)."""
    name = server.engine if server else DEFAULT_ENGINE
    engine = get_engine(name)
    report = Report(checked_by=engine.bundled_table)
    report.issues.extend(sandbox_issues(spec, sandbox, name, server))
    python = (server.python if server else None) or sys.executable
    refused_entry = any(i.flag == "entrypoint" for i in report.issues)
    # a profile the engine's parser does not judge (a diffusion server's) gets the bundled table
    asked = use_real_parser and not refused_entry and engine.flag_parser is not None and engine.flag_parser.applies(spec.flags)
    real = real_parser_issues(python, spec, engine=name) if asked else None
    parsed = real is not None and not any(i.flag == "entrypoint" for i in real[0])
    if real is not None:
        report.issues.extend(real[0])
        report.checked_by = real[1]
    report.issues.extend(engine.check_flags(spec.flags, known_by_parser=parsed))
    kind = engine.profile_kind(spec.flags)
    if kind == "router":  # it loads no model; its own flag table judged it
        report.checked_by = f"bundled {engine.display_name} router flag table"
        if server is not None:
            report.issues.extend(engine.check_router(spec.flags, server.metrics_url))
    else:
        report.issues.extend(guardrails.check_model_path(spec.model_path, engine.display_name))
    if spec.record_requests and engine.record_flags is None:
        report.issues.append(Issue("error", "record_requests", f"{engine.display_name} servers cannot record their "
                                   "requests for Pitwall; remove record_requests from the profile."))
    if server is None:
        return report
    if (kind == "router") != (server.role == "router") and server.role is not None:
        report.issues.append(Issue("error", "entrypoint", f"profile {spec.name} starts a {'router' if kind == 'router' else 'server'}, "
                                   f"but {server.name} is the {server.role} of service {server.service}."))
    host, port = host_port(server.base_url)
    if replacing:
        report.issues.append(Issue("note", "port", f"Port {port} is held by the server being replaced; it is freed by the stop."))
    else:
        report.issues.extend(guardrails.check_port(host, port))
    gpu_issues, count = guardrails.check_gpus(server.gpu_indices, own_pids or (), gpu_snapshot,
                                              probe=gpu_snapshot is None)
    report.issues.extend(gpu_issues)
    report.issues.extend(guardrails.check_parallelism(spec.flags, count))
    return report


class Planner:
    """Profile name -> validated LaunchPlan for the supervisor (raises PlanError)."""

    def __init__(self, settings: Settings, engine: Engine, *, ready_timeout_s: float = 600.0) -> None:
        self.settings = settings
        self.engine = engine
        self.ready_timeout_s = ready_timeout_s

    def __call__(self, server: Server, profile: str | None, replacing: bool) -> LaunchPlan:
        name = profile or server.profile
        if not name:
            raise PlanError(f"{server.name} has no profile; pass one (`--profile NAME`) or set profile in pitwall.toml.")
        try:
            spec = profiles.resolve(self.engine, self.settings.profiles_dir, name)
        except profiles.ProfileError as exc:
            raise PlanError(str(exc)) from None
        row = profiles.mirror(self.engine, spec)
        assert server.id is not None
        own = running_launch(self.engine, server.id)
        # the last check before the process starts: the runner calls this right before spawning
        report = validate(spec, server, replacing=replacing, sandbox=sandbox_for(self.settings, self.engine),
                          own_pids=guardrails.process_tree(own.pid) if replacing and own else [])
        if not report.ok:
            kind = "port_in_use" if any(i.flag == "port" for i in report.errors) else "bad_cli_flag"
            detail = "\n".join(report.lines())
            first = report.errors[0].message
            more = f" (+{len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
            raise PlanError(f"profile {spec.name} is invalid: {first}{more}", kind=kind, detail=detail)
        host, port = host_port(server.base_url)
        env = {k: str(v) for k, v in spec.env.items()}
        env["PYTHONUNBUFFERED"] = "1"  # Pitwall tails the server's log: lines as they are written
        if server.gpu_indices and "CUDA_VISIBLE_DEVICES" not in env:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in server.gpu_indices)
        log_path = server.log_path or str(self.settings.logs_dir / f"{server.name}.log")
        engine = get_engine(server.engine)
        flags, secrets = engine.split_secrets(spec.flags)
        config_path = None
        if secrets:  # into a 0600 file, not argv (ps shows argv to every local user)
            good = repo.list_launches(self.engine, server_id=server.id, limit=50)
            keep = {p for p in (config_path_of(x.argv) for x in good if x.ready_at) if p}
            config_path = write_secrets(Path(self.settings.data_dir), server.name, engine.config_text(secrets), keep)
        argv = engine.build_argv(server.python or sys.executable, spec.entrypoint, spec.model_path, host, port, flags,
                                 config_path=config_path)
        if spec.record_requests and engine.record_flags is not None:  # Pitwall's own flags: last
            records = self.settings.requests_dir / server.name
            records.mkdir(parents=True, exist_ok=True, mode=0o700)
            argv += engine.record_flags(str(records))
        return LaunchPlan(
            server_id=server.id,
            server_name=server.name,
            base_url=server.base_url.rstrip("/"),
            argv=argv,
            engine=server.engine,
            env=env,
            log_path=log_path,
            profile_name=spec.name,
            profile_id=row.id,
            profile_hash=spec.content_hash,
            cwd=str(self.settings.data_dir) if Path(self.settings.data_dir).is_dir() else None,
            api_key=server.api_key,
            ready_timeout_s=self.ready_timeout_s,
            notes=[str(i) for i in report.issues if i.severity != "error"],
        )


# ---------------------------------------------------------------------------------------------
# intents


def pending_control(engine: Engine, server_id: int) -> Intent | None:
    found = repo.list_intents(engine, server_id=server_id, states=("pending", "running"), kinds=CONTROL_KINDS, limit=1)
    return found[0] if found else None


def request(
    engine: Engine,
    *,
    kind: str,
    server_name: str,
    actor: str,
    profile: str | None = None,
    timeout_s: float | None = None,
) -> Intent:
    """Record a launch/stop/relaunch intent for the runner, with an Audit row."""
    if kind not in CONTROL_KINDS:
        raise LauncherError(f"Unknown action {kind!r}; expected launch, stop or relaunch.")
    server = repo.get_server(engine, name=server_name)
    if server is None:
        names = ", ".join(s.name for s in repo.list_servers(engine)) or "none"
        raise LauncherError(f"No server named {server_name!r}; known: {names}.")
    if not server.managed:
        raise LauncherError(f"{server_name} is not managed by Pitwall (managed = false in pitwall.toml); it cannot be {kind}ed from here.")
    assert server.id is not None
    busy = pending_control(engine, server.id)
    if busy is not None:
        prof = (busy.payload or {}).get("profile")
        raise LauncherError(
            f"{server_name} already has a {busy.kind} in progress ({request_label(busy.id, busy.kind)}"
            + (f", profile {prof}" if prof else "") + f", requested by {busy.requested_by}); wait for it to finish."
        )
    if kind == "relaunch" and not profile:
        profile = current_profile(engine, server)
    if kind != "stop" and not (profile or server.profile):
        raise LauncherError(f"{server_name} has no default profile; pass one with --profile NAME.")
    payload: dict[str, Any] = {"profile": profile or (server.profile if kind != "stop" else None)}
    if timeout_s:
        payload["timeout_s"] = float(timeout_s)
    intent = repo.create_intent(engine, kind=kind, server_id=server.id, payload=payload, requested_by=actor)
    repo.add_audit(engine, actor=actor, action=kind, target=server_name,
                   detail={"intent_id": intent.id, "profile": payload.get("profile")})
    return intent


def current_profile(engine: Engine, server: Server) -> str | None:
    """The profile `server` runs under now: its latest launch's that did not fail (a rollback's
    launch names the profile it went back to), else its configured one."""
    assert server.id is not None
    for launch in repo.list_launches(engine, server_id=server.id, limit=20):
        if launch.status != "failed" and launch.profile_name:
            return launch.profile_name
    return server.profile


def follow(
    engine: Engine,
    intent_id: int,
    *,
    timeout_s: float,
    on_progress: Callable[[Intent], None] | None = None,
    poll_s: float = 0.1,
) -> Intent | None:
    """Poll an intent until it is done/failed/cancelled or timeout_s passes (returns the last read)."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    intent = repo.get_intent(engine, intent_id=intent_id)
    while intent is not None:
        key = (intent.state, repr(intent.progress))
        if key != last and on_progress is not None:
            on_progress(intent)
        last = key
        if intent.state in FINAL_STATES or time.monotonic() > deadline:
            return intent
        time.sleep(poll_s)
        intent = repo.get_intent(engine, intent_id=intent_id)
    return intent


# ---------------------------------------------------------------------------------------------
# what is running


def running_launch(engine: Engine, server_id: int) -> Launch | None:
    """The server's current launch (not ended), or None."""
    launch = repo.latest_launch(engine, server_id=server_id)
    return launch if launch is not None and launch.ended_at is None else None


def expected_downtime_s(engine: Engine, server_id: int, profile_name: str | None) -> float | None:
    """Seconds from start to ready of the last ready launch of this profile (else of the server)."""
    launches = [x for x in repo.list_launches(engine, server_id=server_id, limit=50) if x.ready_at]
    for pick in ([x for x in launches if x.profile_name == profile_name], launches):
        if pick:
            return float(pick[0].ready_at or 0) - float(pick[0].started_at)
    return None


def diff_against_running(engine: Engine, server: Server, spec: ProfileSpec) -> list[tuple[str, Any, Any]] | None:
    """(key, running, candidate) rows; None when nothing runs or the running profile is unknown."""
    assert server.id is not None
    launch = running_launch(engine, server.id)
    if launch is None or not launch.profile_name:
        return None
    row = repo.get_profile(engine, name=launch.profile_name)
    if row is None:
        return None
    return profiles.diff(profiles.from_row(row).canonical(), spec.canonical())
