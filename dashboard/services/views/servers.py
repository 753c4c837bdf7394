"""Servers: mirror the configured servers (and the demo server) into storage.

The settings file is the source of truth for which servers exist; storage keeps a row per server
so samples, events and launches can reference it. The demo server is an ordinary managed server
whose profile (profiles/demo.toml) starts the bundled simulator; nothing downstream knows it is a
simulator.
"""

from __future__ import annotations

import sys
from typing import Any

from sqlalchemy.engine import Engine

from dashboard.settings import ServerConfig, Settings
from storage import repo
from storage.models import Server

DEMO_SERVER = "demo"
DEMO_PROFILE = "demo"
DEMO_GPU_HOURLY_USD = 3.80  # an on-demand H200 hour, the demo's simulated GPU


def configured_servers(settings: Settings) -> list[ServerConfig]:
    """The servers Pitwall should watch: those in pitwall.toml, or the demo server."""
    servers = list(settings.servers)
    if settings.demo_active and not any(s.name == DEMO_SERVER for s in servers):
        servers.append(
            ServerConfig(
                name=DEMO_SERVER,
                base_url=f"http://127.0.0.1:{settings.demo_port}",
                kind="llm",
                managed=True,
                gpu_indices=[0],
                gpu_hourly_usd=DEMO_GPU_HOURLY_USD,
                python=sys.executable,
                profile=DEMO_PROFILE,
            )
        )
    return servers


def sync_servers(engine: Engine, settings: Settings) -> list[Server]:
    """Upsert every configured server; managed servers log to <data_dir>/logs/<name>.log."""
    out = []
    configured = configured_servers(settings)
    for cfg in configured:
        fields: dict[str, Any] = {
            "base_url": cfg.base_url.rstrip("/"),
            "kind": cfg.kind,
            "managed": cfg.managed,
            "log_path": cfg.log_path,
            "gpu_indices": cfg.gpu_indices,
            "gpu_hourly_usd": cfg.gpu_hourly_usd,
            "python": cfg.python or (sys.executable if cfg.managed else None),
            "profile": cfg.profile,
            "api_key": cfg.api_key,
        }
        if cfg.managed and not cfg.log_path:
            fields["log_path"] = str(settings.logs_dir / f"{cfg.name}.log")
        out.append(repo.upsert_server(engine, name=cfg.name, **fields))
    # servers that left pitwall.toml (the demo, once real servers are configured) stop being
    # watched or started; their history stays browsable on Compare and Events
    repo.retire_servers_except(engine, names=[c.name for c in configured])
    return out


def seed_demo(engine: Engine, settings: Settings) -> int | None:
    """First run of the demo: queue one sweep so every page has probe data. Returns the run id.

    The sweep waits for the demo server to be ready (the probe intent handler does), and is
    queued only while the demo has no probe run yet.
    """
    from dashboard.services.views.benchmarks import SweepRequest, start_sweep

    if not settings.demo_active:
        return None
    server = repo.get_server(engine, name=DEMO_SERVER)
    if server is None or repo.list_probe_runs(engine, server_id=server.id, limit=1):
        return None
    run_id, _ = start_sweep(
        engine,
        SweepRequest(server=DEMO_SERVER, levels=[1, 4, 8, 16], requests=40, prompt_set="shared-prefix",
                     max_new_tokens=64, name="demo: first sweep"),
        requested_by="demo",
    )
    return run_id
