"""The launch sandbox: a profile is data, never code. One place judges what a profile may name,
for all three paths that must refuse the same things: validation (launcher.validate, the runner's
check lane), the Profiles editor's save (profile_admin) and the launch itself (launcher.Planner,
called by the runner right before it starts the process).

- the entrypoint: the engine's own, the bundled simulator, or one `launch.allowed_entrypoints`
  names;
- [env]: explicit names only (the engine's `check_env`: its own names, plus
  `launch.allowed_env`); `LD_*`, `PYTHON*`, `PATH` and `PITWALL_*` never;
- the engine's deny table (its `check_profile`, `deny_reason`): code loaders and
  remote services refused, paths kept out of system folders, written paths kept inside the data
  folder, ports kept off every port Pitwall holds (`reserved_ports`);
- only `launch.allow_unsandboxed` in pitwall.toml (never a profile, never the page) lifts a deny
  rule, one flag or variable by name; the Profiles page lists what it lifts (`allowances`).

Also the secrets file: `write_secrets` puts a profile's secret flags (`api-key`, ...) into a 0600
YAML file under `<data_dir>/run/`, so argv carries only its path (the engine's `config_text`
and `build_argv`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from sqlalchemy.engine import Engine

from collectors.base import Issue
from collectors.engines import DEFAULT_ENGINE, get_engine
from config.settings import DEMO_DCGM_PORT_OFFSET, DEMO_PD_METRICS_OFFSET, DEMO_PD_SERVERS, Settings
from launching.profiles import ProfileSpec
from storage import repo
from storage.files import open_private, private_dir
from storage.models import Server

#: Entrypoints every Pitwall allows beside the engine's own: the bundled simulator (the demo).
BUNDLED_ENTRYPOINTS: tuple[str, ...] = ("simulator.launch_server", "simulator.launch_router")
SECRETS_FOLDER = "run"  # under the data folder: <data_dir>/run/<server>-<hash>.yaml, 0600


@dataclass(frozen=True)
class Sandbox:
    """What a profile may name beyond the engine's own allow-lists (settings `launch.*`)."""

    entrypoints: tuple[str, ...] = ()
    env: tuple[str, ...] = ()  # names (a legacy PREFIX_* entry is still read, with a warning)
    allowed: frozenset[str] = frozenset()  # launch.allow_unsandboxed
    data_dir: Path | None = None
    reserved_ports: dict[int, tuple[str, str | None]] = field(default_factory=dict)


def host_port(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    host = parts.hostname or "127.0.0.1"
    if host == "localhost":
        host = "127.0.0.1"
    return host, parts.port or (443 if parts.scheme == "https" else 80)


def reserved_ports(settings: Settings, engine: Engine | None = None) -> dict[int, tuple[str, str | None]]:
    """port -> (what holds it, the server it belongs to or None): the dashboard, the runner's own
    /metrics, the demo's block (its two servers and their dcgm-exporters at + 100 / + 101) and
    every server's own port."""
    out: dict[int, tuple[str, str | None]] = {settings.port: ("the dashboard's port", None)}
    metrics_port = int(settings.metrics.get("port") or 0)
    if metrics_port:
        out[metrics_port] = ("the runner's own /metrics port", None)
    demo = settings.demo_port
    for offset, name in ((0, "demo"), (1, "demo-image")):
        out[demo + offset] = (f"the {name} server's port", name)
        out[demo + offset + DEMO_DCGM_PORT_OFFSET] = (f"the {name} server's dcgm-exporter port", name)
    if settings.demo_pd:
        for name, (offset, _, gpu, _) in DEMO_PD_SERVERS.items():
            out[demo + offset] = (f"the {name} server's port", name)
            if gpu is not None:
                out[demo + offset + DEMO_DCGM_PORT_OFFSET] = (f"the {name} server's dcgm-exporter port", name)
        out[demo + DEMO_PD_METRICS_OFFSET] = ("the demo-router's metrics port", "demo-router")
    if engine is not None:
        for s in repo.list_servers(engine):
            out[host_port(s.base_url)[1]] = (f"the {s.name} server's port", s.name)
    return out


def sandbox_for(settings: Settings, engine: Engine | None = None) -> Sandbox:
    """The sandbox of this pitwall.toml; with a database, every server's port is reserved too."""
    opts = settings.launch
    return Sandbox(tuple(opts.get("allowed_entrypoints") or ()), tuple(opts.get("allowed_env") or ()),
                   frozenset(opts.get("allow_unsandboxed") or ()), Path(settings.data_dir),
                   reserved_ports(settings, engine))


def allowances(settings: Settings) -> list[str]:
    """What pitwall.toml lets profiles do beyond the sandbox, one line each (the Profiles page
    shows them as a warning); empty when it lets nothing."""
    opts = settings.launch
    lines = [f"{name}: {_reason(name)}" for name in opts.get("allow_unsandboxed") or ()]
    lines += [f"entrypoint {e} (launch.allowed_entrypoints)" for e in opts.get("allowed_entrypoints") or ()]
    lines += [f"every [env] name starting {e[:-1]} (a prefix in launch.allowed_env; list names instead)"
              for e in opts.get("allowed_env") or () if e.endswith("*")]
    return lines


def _reason(name: str, engine: str = DEFAULT_ENGINE) -> str:
    rule = get_engine(engine).deny_reason(name)
    if name == "model_path":
        return "model_path may point anywhere"
    if name == "load-format":
        return "weights may be loaded from a remote service"
    return f"allowed although {rule}" if rule else "not a flag or variable the sandbox refuses (no effect)"


def sandbox_issues(spec: ProfileSpec, sandbox: Sandbox | None = None, engine: str = DEFAULT_ENGINE,
                   server: Server | None = None) -> list[Issue]:
    """Every sandbox refusal of `spec` (on `server` when given: its port and its companions).
    Each names the key and how to allow it, when it can be allowed."""
    sandbox = sandbox or Sandbox()
    eng = get_engine(engine)
    allowed = (*eng.entrypoints, *BUNDLED_ENTRYPOINTS, *sandbox.entrypoints)
    issues: list[Issue] = []
    if spec.entrypoint not in allowed:
        issues.append(Issue("error", "entrypoint", f"Entrypoint {spec.entrypoint!r} is not allowed; use one of {', '.join(allowed)} (more only through launch.allowed_entrypoints in pitwall.toml)."))
    issues.extend(eng.check_options(spec.entrypoint, spec.model_path, spec.flags))
    issues.extend(eng.check_env(spec.env, sandbox.env, allowed=sandbox.allowed))
    issues.extend(eng.check_profile(spec.model_path, spec.flags, spec.env, allowed=sandbox.allowed,
                                    data_dir=sandbox.data_dir, reserved_ports=sandbox.reserved_ports,
                                    server=server.name if server else None,
                                    own_port=host_port(server.base_url)[1] if server else None))
    return issues


def secrets_path(data_dir: Path, server_name: str, text: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", server_name)
    return data_dir / SECRETS_FOLDER / f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"


def write_secrets(data_dir: Path, server_name: str, text: str, keep: Collection[str] = ()) -> str:
    """Write the secrets file of a launch of `server_name` (0600 in a 0700 folder) and remove
    that server's older ones except those in `keep` (the last launch that reached ready, which a
    rollback starts again with its exact argv). Returns the path argv carries."""
    path = secrets_path(data_dir, server_name, text)
    private_dir(path.parent)
    with open_private(path, "wb") as f:
        f.write(text.encode())
    prefix = path.name.rsplit("-", 1)[0] + "-"
    for old in path.parent.glob(f"{prefix}*.yaml"):
        if old != path and str(old) not in keep and old.name.rsplit("-", 1)[0] + "-" == prefix:
            old.unlink(missing_ok=True)
    return str(path)


def config_path_of(argv: list[str] | None) -> str | None:
    """The `--config PATH` of a launch's argv (Pitwall's secrets file), else None."""
    argv = list(argv or [])
    for i, tok in enumerate(argv[:-1]):
        if tok == "--config":
            return argv[i + 1]
    return None
