"""The one table of collectors the runner runs (one module per collector, one protocol, one registry).

Each row: name, factory. A factory takes the settings groups a collector may need ({"probe": {...},
"gpu": {...}}, each a dict of that group's settings) and returns a Collector. COLLECTORS holds the
engine-neutral ones (GPU, canary, Prometheus source); every engine of collectors/engines.py brings
its own (engine_rows: one per role it fills, named "<engine>_<role>", built through its Engine),
and the runner hands those only the servers whose Server.engine is theirs (collectors/base.py
engine_of). The runner adds its built-in `self` collector on top of these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collectors.base import Collector

NVML_POLL_S = 1.0  # gpu.poll_interval_s unset, over NVML (the setting says what a read costs)
DCGM_POLL_S = 2.0  # ... from a dcgm-exporter, which refreshes its own figures every 30 s by default


def _engine(engine: str, role: str) -> Callable[[dict[str, Any]], Collector]:
    """A factory building the `role` collector of `engine` through the engine registry
    (collectors/engines.py), imported on first use so importing this table stays cheap."""

    def make(groups: dict[str, dict[str, Any]]) -> Collector:
        from collectors.engines import get_engine

        collector = get_engine(engine).collector(role)
        configure = getattr(collector, "configure", None)
        if callable(configure):  # a collector with settings takes the `runner.*` group
            configure(groups.get("runner") or {})
        return collector

    return make


def _gpu(groups: dict[str, dict[str, Any]]) -> Collector:
    """NVML by default; dcgm-exporters instead when `gpu.dcgm_url` lists one or more (no NVML in a
    container; one exporter per node or per simulator process, merged by DcgmFleet); this host's
    exporter read through Prometheus when `gpu.prometheus_selector` is set (with prometheus.url).
    Every `gpu.poll_interval_s`, else NVML_POLL_S or DCGM_POLL_S."""
    from collectors.gpu import GpuCollector

    gpu = groups.get("gpu") or {}
    every = gpu.get("poll_interval_s")
    if gpu.get("prometheus_selector"):
        from collectors.gpu_dcgm import DcgmPromBackend

        url, selector = gpu.get("prometheus_url"), str(gpu["prometheus_selector"])
        if not url:
            raise ValueError("gpu.prometheus_selector is set but prometheus.url is not; set the "
                             "Prometheus that scrapes this host's dcgm-exporter.")
        return GpuCollector(float(every or DCGM_POLL_S), backend_factory=lambda: DcgmPromBackend(str(url), selector))
    raw = gpu.get("dcgm_url")
    urls = [raw] if isinstance(raw, str) else list(raw or [])
    if urls:
        from collectors.gpu_dcgm import DcgmFleet

        advice = dcgm_advice(gpu.get("dcgm_origin"))
        return GpuCollector(float(every or DCGM_POLL_S), backend_factory=lambda: DcgmFleet([str(u) for u in urls], advice=advice))
    return GpuCollector(float(every or NVML_POLL_S))


def dcgm_advice(origin: object) -> str:
    """What to check when a dcgm-exporter does not answer, by where `gpu.dcgm_url` came from
    (settings: "demo", the PITWALL_GPU_DCGM_URL variable, or the pitwall.toml file read)."""
    if origin == "demo":
        return ("it is the demo's simulated exporter, started with the demo servers: the Events of "
                "demo and demo-image say why one did not start. To read a real exporter, set "
                "PITWALL_GPU_DCGM_URL, or create a pitwall.toml in the folder you start Pitwall "
                "from with dcgm_url under [gpu].")
    if origin == "PITWALL_GPU_DCGM_URL":
        return "check that it runs and that PITWALL_GPU_DCGM_URL points at its /metrics."
    if origin:
        return f"check that it runs and that dcgm_url under [gpu] in {origin} points at its /metrics."
    return "check that it runs and that gpu.dcgm_url points at its /metrics."


def _canary(groups: dict[str, dict[str, Any]]) -> Collector:
    from collectors.canary import CanaryCollector

    probe = groups.get("probe") or {}
    return CanaryCollector(interval_s=float(probe.get("canary_interval_s", 30.0)))


def _prometheus_source(groups: dict[str, dict[str, Any]]) -> Collector:
    """Reads servers with a `prometheus_url` through that Prometheus; idle when none has one.
    Takes the same `runner.metrics_*` caps as the direct scrape."""
    from collectors.prometheus_source import PrometheusSourceCollector

    collector = PrometheusSourceCollector()
    collector.configure(groups.get("runner") or {})
    return collector


Factory = Callable[[dict[str, dict[str, Any]]], Collector]

COLLECTORS: tuple[tuple[str, Factory], ...] = (
    ("gpu", _gpu),
    ("canary", _canary),
    ("prometheus_source", _prometheus_source),
)


def engine_rows() -> list[tuple[str, Factory]]:
    """("<engine>_<role>", factory) for every role of every registered engine (importing the
    engine registry, not the collectors: a factory imports its module when called)."""
    from collectors.engines import ENGINES

    return [(f"{name}_{role}", _engine(name, role)) for name, eng in ENGINES.items() for role in eng.collectors]


def collector_names() -> list[str]:
    """Every collector build_collectors can build, engines' first."""
    return [name for name, _ in [*engine_rows(), *COLLECTORS]]


def build_collectors(
    probe: dict[str, Any], names: set[str] | None = None, *, gpu: dict[str, Any] | None = None,
    runner: dict[str, Any] | None = None, dependents: Callable[[Any], list[str]] | None = None,
) -> tuple[list[Collector], list[str]]:
    """Instantiate the registry (or the named subset); returns (collectors, errors).

    A collector that cannot be built (a broken install, say) is reported, not fatal: the
    others still run. A canary interval of 0 turns the canary off. `dependents` (Pitwall keys ->
    what reads them, present/dependents.py) goes to every collector that names what a change
    costs (`set_dependents`: the /metrics drift guard).
    """
    out: list[Collector] = []
    errors: list[str] = []
    for name, factory in [*engine_rows(), *COLLECTORS]:
        if names is not None and name not in names:
            continue
        if name == "canary" and float(probe.get("canary_interval_s", 30.0)) <= 0:
            continue
        try:
            collector = factory({"probe": probe, "gpu": gpu or {}, "runner": runner or {}})
            hook = getattr(collector, "set_dependents", None)
            if dependents is not None and callable(hook):
                hook(dependents)
            out.append(collector)
        except Exception as exc:
            errors.append(f"Collector {name} could not start: {type(exc).__name__}: {exc}")
    return out, errors
