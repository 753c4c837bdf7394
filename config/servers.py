"""`[[servers]]` tables: the keys a server takes, their checks, and ServerConfig (config/settings.py
loads them with the rest of pitwall.toml)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage.errors import ConfigError


class SettingsError(ConfigError, ValueError):
    """A setting is wrong; the message names it and what it expects (config/settings.py re-exports it)."""


SERVER_KEYS = {
    "name": str, "base_url": str, "kind": str, "engine": str, "managed": bool, "log_path": str,
    "gpu_indices": list, "gpu_hourly_usd": (int, float), "python": str, "profile": str,
    "api_key": str, "host": str, "prometheus_url": str, "prometheus_selector": str,
    "service": str, "role": str, "metrics_url": str,
}
#: a disaggregated service's parts: its prefill and decode servers, and the router in front
SERVICE_ROLES = ("prefill", "decode", "router")


@dataclass(frozen=True)
class ServerConfig:
    name: str
    base_url: str
    kind: str = "llm"
    engine: str = "sglang"  # collectors/engines.py names the engines; an unknown one is reported by the runner
    managed: bool = False
    log_path: str | None = None
    gpu_indices: list[int] | None = None
    gpu_hourly_usd: float | None = None
    python: str | None = None
    profile: str | None = None
    api_key: str | None = None
    host: str | None = None  # the runner host that owns it (None: the runner reading this file)
    prometheus_url: str | None = None  # None: prometheus.url; "": scrape /metrics directly
    prometheus_selector: str | None = None  # None: prometheus.selector
    service: str | None = None  # the disaggregated service it is part of
    role: str | None = None  # its part there: SERVICE_ROLES
    metrics_url: str | None = None  # its Prometheus text, when not at {base_url}/metrics


def parse_servers(raw: Any) -> list[ServerConfig]:
    if not isinstance(raw, list):
        raise SettingsError("Setting servers must be a list of [[servers]] tables.")
    out: list[ServerConfig] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"servers[{i}]"
        if not isinstance(item, dict):
            raise SettingsError(f"Setting {where} must be a table with at least name and base_url.")
        for key, value in item.items():
            if key not in SERVER_KEYS:
                raise SettingsError(
                    f"Setting {where}.{key} is unknown; expected one of {', '.join(SERVER_KEYS)}."
                )
            want = SERVER_KEYS[key]
            if isinstance(value, bool) and want is not bool:
                raise SettingsError(f"Setting {where}.{key} is {value!r}; expected {form_of(want)}.")
            if not isinstance(value, want):  # type: ignore[arg-type]
                raise SettingsError(f"Setting {where}.{key} is {value!r}; expected {form_of(want)}.")
        for key in ("name", "base_url"):
            if not item.get(key):
                raise SettingsError(f"Setting {where}.{key} is missing; every server needs one.")
        if not str(item["base_url"]).startswith(("http://", "https://")):
            raise SettingsError(
                f"Setting {where}.base_url is {item['base_url']!r}; expected a URL such as "
                "http://127.0.0.1:30000."
            )
        purl = item.get("prometheus_url")
        if purl and not str(purl).startswith(("http://", "https://")):
            raise SettingsError(f"Setting {where}.prometheus_url is {purl!r}; expected a URL such as "
                                "http://127.0.0.1:9090, or \"\" to scrape this server directly.")
        _check_service(item, where)
        if item.get("kind", "llm") not in ("llm", "image"):
            raise SettingsError(f"Setting {where}.kind is {item['kind']!r}; expected llm or image.")
        gpus = item.get("gpu_indices")
        if gpus is not None and not all(isinstance(g, int) and g >= 0 for g in gpus):
            raise SettingsError(f"Setting {where}.gpu_indices is {gpus!r}; expected e.g. [0, 1].")
        price = item.get("gpu_hourly_usd")
        if price is not None and price < 0:
            raise SettingsError(f"Setting {where}.gpu_hourly_usd is {price}; expected >= 0 USD.")
        if item["name"] in seen:
            raise SettingsError(f"Setting {where}.name {item['name']!r} is used twice.")
        seen.add(item["name"])
        fields: dict[str, Any] = {k: (float(v) if k == "gpu_hourly_usd" else v) for k, v in item.items()}
        out.append(ServerConfig(**fields))
    return out


def _check_service(item: dict[str, Any], where: str) -> None:
    """A service member names its service and its role together; metrics_url is a URL."""
    murl = item.get("metrics_url")
    if murl and not str(murl).startswith(("http://", "https://")):
        raise SettingsError(f"Setting {where}.metrics_url is {murl!r}; expected a URL such as "
                            "http://127.0.0.1:29000/metrics (a router's metrics port).")
    role, service = item.get("role"), item.get("service")
    if role is not None and role not in SERVICE_ROLES:
        raise SettingsError(f"Setting {where}.role is {role!r}; expected one of {', '.join(SERVICE_ROLES)}.")
    if role == "router" and not murl:
        raise SettingsError(f"Setting {where} is a router without metrics_url: the router serves its metrics on its "
                            "own port (--prometheus-port, 29000 by default); set e.g. "
                            'metrics_url = "http://127.0.0.1:29000/metrics".')
    if bool(role) != bool(service):
        raise SettingsError(f"Setting {where} has {'role' if role else 'service'} without "
                            f"{'service' if role else 'role'}; a disaggregated service's member names "
                            'both, e.g. service = "chat" and role = "decode".')


def form_of(want: Any) -> str:
    return {bool: "true or false", list: "a list", (int, float): "a number"}.get(want, "a string")
