"""Servers: mirror the configured servers (and the demo server) into storage.

The settings file is the source of truth for which servers exist; storage keeps a row per server
so samples, events and launches can reference it. The demo server is an ordinary managed server
whose profile (profiles/demo.toml) starts the bundled simulator; nothing downstream knows it is a
simulator. Beside it runs `demo-image` (kind image, port demo_port + 1): the simulator's
diffusion server with a simulated Qwen-Image on a simulated B300 (profiles/demo-image.toml;
relaunch it under demo-image-fast for an acceleration A/B with the image check). The demo's
GPUs: the LLM demo simulates GPU 0, the image demo GPU 1; each serves a dcgm-exporter look-alike
at its port + 100 (the profiles' [env] sets the simulator's DCGM port to "+100"), which Pitwall reads
like any dcgm-exporter (config/settings.py demo_dcgm_urls, when gpu.dcgm_url is unset).

A fleet (several runners, one database): every server row carries the runner host that owns it
(its `[[servers]]` `host`, else this runner's runner.host). Server names are fleet-wide unique:
a configured server whose name another host owns is refused (ServerOwnershipError) while that
host's runner is alive, and also when it is dead unless the table says `host` explicitly (then
this configuration takes the server over: the operator moved it). A runner retires only its own
host's servers that left its configuration, never another host's.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import Engine

from config.settings import (
    DEMO_PD_METRICS_OFFSET,
    DEMO_PD_SERVERS,
    DEMO_PD_SERVICE,
    ServerConfig,
    Settings,
)
from runner.lease import LEASE_TTL_S
from storage import repo
from storage.errors import HeldElsewhere
from storage.models import Server

DEMO_SERVER = "demo"
DEMO_PROFILE = "demo"
DEMO_GPU_HOURLY_USD = 3.80  # an on-demand H200 hour, the demo's simulated GPU
DEMO_IMAGE_SERVER = "demo-image"
DEMO_IMAGE_PROFILE = "demo-image"
#: one B300 GPU-hour, an assumed on-demand price (B200 lists near $5-6/GPU-h at GPU clouds in
#: 2025; B300 a little above): an operator sets their own in pitwall.toml
DEMO_IMAGE_GPU_HOURLY_USD = 6.50


def demo_image_sweep(name: str = "demo-image: first sweep") -> Any:
    """The demo image sweep: Qwen-Image at 1024², 20 steps, concurrency 1 and 2, 9 requests each
    (seed 0): 9 is three repeats of 3, the fewest that give each figure a measured spread
    (collectors/probe/stats.py), so the README's A/B can tell a tie from a change; short enough
    to finish within two minutes, and the same workload every time, so a second run under
    demo-image-fast compares with it (fingerprints match)."""
    from dashboard.services.views.benchmarks import SweepRequest

    return SweepRequest(server=DEMO_IMAGE_SERVER, levels=[1, 2], requests=9, api="images",
                        prompt_set="builtin", image_size="1024x1024", image_steps=20, name=name)


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
    if settings.demo_active and not any(s.name == DEMO_IMAGE_SERVER for s in servers):
        servers.append(
            ServerConfig(
                name=DEMO_IMAGE_SERVER,
                base_url=f"http://127.0.0.1:{settings.demo_port + 1}",
                kind="image",
                managed=True,
                gpu_indices=[1],
                gpu_hourly_usd=DEMO_IMAGE_GPU_HOURLY_USD,
                python=sys.executable,
                profile=DEMO_IMAGE_PROFILE,
            )
        )
    if settings.demo_active and settings.demo_pd:
        servers += _demo_service(settings, {s.name for s in servers})
    return servers


def _demo_service(settings: Settings, taken: set[str]) -> list[ServerConfig]:
    """The demo's disaggregated service (demo_pd): a prefill and a decode simulator on GPUs 2
    and 3 behind the router look-alike, each an ordinary managed server under its profile."""
    out = []
    for name, (offset, role, gpu, profile) in DEMO_PD_SERVERS.items():
        if name in taken:
            continue
        out.append(ServerConfig(
            name=name, base_url=f"http://127.0.0.1:{settings.demo_port + offset}", kind="llm", managed=True,
            gpu_indices=[gpu] if gpu is not None else None,
            gpu_hourly_usd=DEMO_GPU_HOURLY_USD if gpu is not None else None, python=sys.executable,
            profile=profile, service=DEMO_PD_SERVICE, role=role,
            metrics_url=(f"http://127.0.0.1:{settings.demo_port + DEMO_PD_METRICS_OFFSET}/metrics"
                         if role == "router" else None)))
    return out


class ServerOwnershipError(HeldElsewhere, ValueError):
    """A configured server's name is owned by another runner host; the message says what to do."""


def sync_servers(engine: Engine, settings: Settings) -> list[Server]:
    """Upsert every configured server; managed servers log to <data_dir>/logs/<name>.log.

    Raises ServerOwnershipError (before writing anything) for a name another host owns."""
    out = []
    configured = configured_servers(settings)
    me = settings.runner.get("host")
    ttl_s = float(settings.runner.get("lease_ttl_s", LEASE_TTL_S))
    for cfg in configured:
        _check_owner(engine, cfg, cfg.host or me, ttl_s)
    for cfg in configured:
        fields: dict[str, Any] = {
            "base_url": cfg.base_url.rstrip("/"),
            "kind": cfg.kind,
            "engine": cfg.engine,
            "managed": cfg.managed,
            "log_path": cfg.log_path,
            "gpu_indices": cfg.gpu_indices,
            "gpu_hourly_usd": cfg.gpu_hourly_usd,
            "python": cfg.python or (sys.executable if cfg.managed else None),
            "profile": cfg.profile,
            "api_key": cfg.api_key,
            "host": cfg.host or me,
            "service": cfg.service,
            "role": cfg.role,
            "metrics_url": cfg.metrics_url,
            **_prometheus_source(cfg, settings),
        }
        if cfg.managed and not cfg.log_path:
            fields["log_path"] = str(settings.logs_dir / f"{cfg.name}.log")
        # checked again on the row the upsert updates: another host's runner may have inserted
        # this name since the check above (two hosts starting at once)
        out.append(repo.upsert_server(engine, name=cfg.name, **fields, check=functools.partial(
            _check_row, engine, cfg=cfg, host=cfg.host or me, ttl_s=ttl_s)))
    # servers that left pitwall.toml (the demo, once real servers are configured) stop being
    # watched or started; their history stays browsable on Compare and Events
    repo.retire_servers_except(engine, names=[c.name for c in configured], host=me)
    return out


def _check_owner(engine: Engine, cfg: ServerConfig, host: str | None, ttl_s: float) -> None:
    """Refuse a configured server whose (active) row another runner host owns; see the module
    docstring for when a dead host's server is taken over."""
    row = repo.get_server(engine, name=cfg.name)
    if row is not None:
        _check_row(engine, row, cfg=cfg, host=host, ttl_s=ttl_s)


def _check_row(engine: Engine, row: Server, *, cfg: ServerConfig, host: str | None, ttl_s: float) -> None:
    if row.retired_at is not None or not row.host or row.host == host:
        return
    lease = repo.get_lease(engine, scope=repo.host_scope(row.host))
    alive = lease is not None and time.time() - lease.heartbeat_at < ttl_s
    if not alive and cfg.host:
        return  # the configuration names the host explicitly: the operator moved the server
    state = "is alive" if alive else "is not running"
    if cfg.name in (DEMO_SERVER, DEMO_IMAGE_SERVER) and cfg.profile in (DEMO_PROFILE, DEMO_IMAGE_PROFILE):
        raise ServerOwnershipError(
            f"This runner would start the demo ({cfg.name!r}) because its configuration lists no "
            f"server, but runner host {row.host!r} already runs the demo in this database. On a "
            "fleet host that only shows the dashboard, or that has no servers yet, set demo = "
            '"off" in pitwall.toml (or PITWALL_DEMO=off).'
        )
    raise ServerOwnershipError(
        f"Server {cfg.name!r} belongs to runner host {row.host!r}, whose runner {state}; server names "
        f"are unique across the fleet. Rename it in this pitwall.toml, remove it from {row.host}'s "
        f"configuration, or (when {row.host}'s runner is stopped) set host = {host!r} in its "
        "[[servers]] table to move it to this host."
    )


def _prometheus_source(cfg: ServerConfig, settings: Settings) -> dict[str, str | None]:
    """Where a server's engine series are read: its own prometheus_url, else prometheus.url
    (an empty prometheus_url opts out: scrape /metrics directly); the selector's {instance}
    (host:port of base_url) and {name} filled in."""
    url = cfg.prometheus_url if cfg.prometheus_url is not None else settings.prometheus.get("url")
    if not url:
        return {"prometheus_url": None, "prometheus_selector": None}
    template = cfg.prometheus_selector or settings.prometheus.get("selector") or 'instance="{instance}"'
    instance = urlsplit(cfg.base_url).netloc
    selector = template.replace("{instance}", instance).replace("{name}", cfg.name)
    return {"prometheus_url": url.rstrip("/"), "prometheus_selector": selector}


#: the demo's small anonymised trace (Mooncake JSONL), stored on the demo's first run
DEMO_TRACE = Path(__file__).resolve().parents[3] / "traces" / "demo-chat.jsonl"


def seed_demo(engine: Engine, settings: Settings) -> int | None:
    """First run of the demo: queue one sweep per demo server (LLM and image) so every page has
    probe data, and store the demo's trace so the Traces page has one to preview and replay.
    Returns the LLM sweep's run id (None when it was not queued).

    Each sweep waits for its server to be ready (the probe intent handler does), and is queued
    only while that server has no probe run yet; the trace is stored while no trace is.
    """
    from dashboard.services.views.benchmarks import start_sweep

    if settings.demo_active and not repo.list_traces(engine) and DEMO_TRACE.is_file():
        from collectors.trace import importer

        importer.store(engine, importer.build([DEMO_TRACE]))
    if settings.demo_active:
        image = repo.get_server(engine, name=DEMO_IMAGE_SERVER)
        if image is not None and not repo.list_probe_runs(engine, server_id=image.id, limit=1):
            start_sweep(engine, demo_image_sweep(), requested_by="demo")
    return _seed_llm_demo(engine, settings)


def _seed_llm_demo(engine: Engine, settings: Settings) -> int | None:
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
