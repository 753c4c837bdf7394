"""One Settings object from `pitwall.toml` plus `PITWALL_*` environment variables.

Read by entry points only (CLI, app.py, runner); everything else receives values. Precedence:
environment variable > pitwall.toml > default. The file is `PITWALL_CONFIG`, else `./pitwall.toml`,
else (for the real environment only) the checkout's (what `make run` reads), so every command
reads the page's database; a relative `data_dir`, `profiles_dir` or sqlite path in it is relative
to the file. Every setting is declared once in SETTINGS (the README's table is checked against it
by a meta-test). An invalid value raises SettingsError naming the key and the expected form.
"""

from __future__ import annotations

import os
import socket
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.servers import SERVER_KEYS as SERVER_KEYS
from config.servers import SERVICE_ROLES as SERVICE_ROLES
from config.servers import ServerConfig, SettingsError, parse_servers

REPO_ROOT = Path(__file__).resolve().parents[1]


#: Per demo server, the targets with no default (throughput, cost): both grade all four dimensions
DEMO_SLO: dict[str, dict[str, Any]] = {"demo": {"output_tok_s": 400.0, "usd_per_1m_output_tok": 5.0},
                                       "demo-image": {"images_per_min": 10.0, "usd_per_image": 0.02}}
#: The demo servers' dcgm-exporter look-alikes listen at their server's port + this (the demo
#: profiles set SGLANG_SIM_DCGM_PORT = "+100"): demo_port + 100 (demo, GPU 0) and + 101
#: (demo-image, GPU 1). Read when the demo runs and gpu.dcgm_url is unset.
DEMO_DCGM_PORT_OFFSET = 100


#: the demo service's servers (demo_pd): name -> (port offset from demo_port, role, GPU index, profile)
DEMO_PD_SERVERS: dict[str, tuple[int, str, int | None, str]] = {
    "demo-router": (12, "router", None, "demo-pd-router"),
    "demo-prefill": (10, "prefill", 2, "demo-pd-prefill"),
    "demo-decode": (11, "decode", 3, "demo-pd-decode"),
}
DEMO_PD_SERVICE = "demo-pd"
DEMO_PD_METRICS_OFFSET = 13  # the demo router's metrics port, from demo_port


def demo_dcgm_urls(demo_port: int, pd: bool = False) -> list[str]:
    """The demo's exporters: LLM demo (port demo_port), image demo (demo_port + 1) and, with the
    demo service, its prefill and decode servers' (+ 10, + 11)."""
    offsets = (0, 1, 10, 11) if pd else (0, 1)
    return [f"http://127.0.0.1:{demo_port + i + DEMO_DCGM_PORT_OFFSET}/metrics" for i in offsets]


@dataclass(frozen=True)
class SettingSpec:
    key: str  # key in pitwall.toml (dotted for tables)
    env: str | None  # PITWALL_* variable, when one exists
    kind: str  # "str" | "int" | "float" | "bool" | "path" | "list[int]" | "list[str]" | "list[url]" | "servers"
    default: Any
    help: str


SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("data_dir", "PITWALL_DATA_DIR", "path", "~/.local/share/pitwall",
                "Folder for the database, launch logs and exports."),
    SettingSpec("database_url", "PITWALL_DATABASE_URL", "str", None,
                "SQLAlchemy URL; default `sqlite:///<data_dir>/pitwall.db`. PostgreSQL URLs work too."),
    SettingSpec("host", "PITWALL_HOST", "str", "127.0.0.1",
                "Address the dashboard binds to. Anything but loopback requires a password."),
    SettingSpec("port", "PITWALL_PORT", "int", 8501, "Dashboard port."),
    SettingSpec("demo", "PITWALL_DEMO", "str", "auto",
                "`auto` starts the bundled simulator when no server is configured; `on`; `off`."),
    SettingSpec("demo_port", "PITWALL_DEMO_PORT", "int", 30100, "Port of the demo server (the bundled simulator) when the demo runs."),
    SettingSpec("demo_pd", "PITWALL_DEMO_PD", "bool", False,
                "`true` adds a disaggregated service to the demo: demo-prefill and demo-decode behind "
                "demo-router (ports demo_port + 10, 11, 12; the router's metrics + 13; its profiles are "
                "written for demo_port 30100)."),
    SettingSpec("profiles_dir", "PITWALL_PROFILES_DIR", "path", None,
                "Folder of launch profiles (one TOML each); default: the repository's `profiles/`."),
    SettingSpec("password", "PITWALL_PASSWORD", "str", None,
                "Operator password: when set, every control (relaunch, stop, sweeps, validation, "
                "profile and SLO edits) needs a sign-in, from any address. Required when not on loopback."),
    SettingSpec("viewer_password", "PITWALL_VIEWER_PASSWORD", "str", None,
                "When set, every page needs a sign-in; this password shows the pages without controls."),
    SettingSpec("session_ttl_s", "PITWALL_SESSION_TTL_S", "float", 8 * 3600.0,
                "A sign-in lasts this many seconds, then the person signs in again."),
    SettingSpec("allowed_hosts", "PITWALL_ALLOWED_HOSTS", "list[str]", [],
                "Host names the dashboard answers to besides loopback, IP addresses and `host` "
                "(a reverse proxy's name); any other Host header is refused (DNS rebinding)."),
    SettingSpec("read_only", "PITWALL_READ_ONLY", "bool", False,
                "Hide every control that changes a server or a profile; the CLI refuses launch, stop and relaunch."),
    SettingSpec("electricity_usd_per_kwh", "PITWALL_ELECTRICITY_USD_PER_KWH", "float", None,
                "Electricity price; enables energy cost on scorecards."),
    SettingSpec("probe.concurrency", None, "list[int]", [1, 4, 8, 16],
                "Default closed-loop concurrency levels of a sweep."),
    SettingSpec("probe.max_new_tokens", None, "int", 128, "Default output length of probe requests."),
    SettingSpec("probe.timeout_s", None, "float", 120.0, "Per-request timeout of probes, seconds."),
    SettingSpec("probe.canary_interval_s", "PITWALL_CANARY_INTERVAL_S", "float", 30.0,
                "Seconds between canary requests to each server (0 turns the canary off)."),
    SettingSpec("compare.ssim_min", None, "float", 0.95,
                "Compare's image check: a pair of images (same prompt and seed in two runs) with "
                "SSIM below this reads \"different picture\" (0-1; 1 = identical pixels)."),
    SettingSpec("runner.auto_restart", "PITWALL_AUTO_RESTART", "bool", False,
                "Start a managed server again when it exits on its own (crash, OOM), with backoff."),
    SettingSpec("runner.restart_budget", None, "int", 3,
                "Auto-restarts allowed per server within `runner.restart_window_s`; past it the server stays down."),
    SettingSpec("runner.restart_window_s", None, "float", 3600.0, "Window of the restart budget, seconds."),
    SettingSpec("runner.host", "PITWALL_RUNNER_HOST", "str", None,
                "Name of this runner's host in a fleet (default: the machine's host name). The "
                "runner supervises, collects from and carries out the requests of the servers of "
                "this host only; a `[[servers]]` table's `host` says which runner owns it."),
    SettingSpec("runner.lease_ttl_s", None, "float", 15.0,
                "Seconds without a heartbeat (renewed every 2 s) after which a runner's host lease, or "
                "the `db` housekeeping lease, counts as dead and may be taken over; at least 5."),
    SettingSpec("runner.intent_expiry_s", None, "float", 900.0,
                "A request (relaunch, stop, sweep, validation) not started within this many seconds expires."),
    SettingSpec("runner.metrics_max_series", None, "int", 20000, "Samples read from one server's `/metrics` per scrape; a family that would pass it is skipped whole (one event)."),
    SettingSpec("runner.metrics_max_rank_keys", None, "int", 256, "Per-rank / per-stage keys kept per figure of one scrape (`metrics.token_usage.tp3`); the aggregate is always kept."),
    SettingSpec("runner.metrics_drift_settle_s", None, "float", 120.0, "Seconds after a launch's first request by which the /metrics families it exports are judged against the launch before (the drift guard: a family gone, retyped or missing a label is a metric_drift event)."),
    SettingSpec("runner.metrics_parse_budget_s", None, "float", 2.0, "CPU seconds spent parsing one server's `/metrics` per scrape; the rest is skipped (one event)."),
    SettingSpec("runner.metrics_deadline_s", None, "float", 10.0, "Seconds one `/metrics` poll of every server (scraped at once) may take; a server past it gets its own event."),
    SettingSpec("retention.samples_days", None, "float", 7.0,
                "Days of raw samples kept (only minutes already rolled up are deleted); 0 keeps them forever."),
    SettingSpec("retention.rollups_days", None, "float", 90.0,
                "Days of minute rollups kept (only quarters already written are deleted); 0 keeps them forever."),
    SettingSpec("retention.quarters_days", None, "float", 730.0, "Days of 15-minute rollups kept; 0 keeps them forever."),
    SettingSpec("retention.probes_days", None, "float", 365.0,
                "Days of probe runs and their requests kept (by the run's created_at); 0 keeps them forever."),
    SettingSpec("retention.events_days", None, "float", 365.0, "Days of events kept; 0 keeps them forever."),
    SettingSpec("retention.launch_logs_mb", None, "float", 1024.0, "MB of managed servers' launch logs kept in the data folder's logs/ (each launch starts a fresh file; the oldest ended ones go first, never a live one); 0 keeps them all."),
    SettingSpec("retention.request_records_days", None, "float", 7.0, "Days of request records kept in the data folder's requests/ (a profile's record_requests); 0 keeps them forever."),
    SettingSpec("gpu.dcgm_url", "PITWALL_GPU_DCGM_URL", "list[url]", [],
                "dcgm-exporter /metrics URLs (one, or a list: one per node or per simulator; "
                "comma-separated in the variable) to read GPUs from instead of NVML, where Pitwall "
                "cannot load NVML (containers, Kubernetes nodes); their GPU indices must not clash. "
                "Unset while the demo runs: the demo servers' exporters (demo_port + 100 and + 101)."),
    SettingSpec("gpu.poll_interval_s", "PITWALL_GPU_POLL_INTERVAL_S", "float", None,
                "Seconds between GPU reads. Unset: 1 s over NVML (one H100 read, GPM included, took 50 ms and 10 ms of CPU: about 1 % of a core per GPU), 2 s from a dcgm-exporter (it refreshes every 30 s by default)."),
    SettingSpec("gpu.prometheus_selector", "PITWALL_GPU_PROMETHEUS_SELECTOR", "str", None,
                "Read this host's GPUs from its dcgm-exporter series in `prometheus.url` (label "
                "matchers such as `Hostname=\"node-1\"`) instead of NVML or gpu.dcgm_url; a "
                "sample older than 60 s counts as missing."),
    SettingSpec("launch.allowed_entrypoints", None, "list[str]", [],
                "Entrypoints a profile may name beside `sglang.launch_server`, `sglang serve` and the bundled simulator."),
    SettingSpec("launch.allowed_env", None, "list[str]", [],
                "[env] names a profile may set beside the built-in allow-list of SGLang/CUDA/NCCL/PyTorch/HF names; never LD_*, PYTHON*, PATH or PITWALL_*, and never a name the sandbox refuses (see launch.allow_unsandboxed). A `PREFIX_*` entry is still read, with a warning: list names instead."),
    SettingSpec("launch.allow_unsandboxed", None, "list[str]", [],
                "Flags and [env] names the launch sandbox refuses by default that profiles may use anyway, each by name, e.g. `[\"trust-remote-code\", \"CUDA_INJECTION64_PATH\"]` (code loaders, remote services, paths outside the data folder or in system folders); the Profiles page lists them in a warning. Only pitwall.toml can set it."),
    SettingSpec("alerting.defaults", None, "bool", True,
                "Turn on the default alert rules (SLO burn rates, crash, OOM, NCCL, restart budget, health down, no samples, KV full)."),
    SettingSpec("alerting.eval_interval_s", None, "float", 15.0, "Seconds between alert rule evaluations in the runner."),
    SettingSpec("alerting.repeat_interval_s", None, "float", 4 * 3600.0,
                "A firing alert is notified again (a reminder) after this many seconds."),
    SettingSpec("alerting.alertmanager_url", "PITWALL_ALERTMANAGER_URL", "str", None,
                "Prometheus Alertmanager base URL (e.g. http://127.0.0.1:9093); alerts go to its API v2."),
    SettingSpec("alerting.webhook_url", "PITWALL_ALERT_WEBHOOK_URL", "str", None,
                "A webhook that receives alerts as JSON (or Slack-compatible text); a secret, never shown."),
    SettingSpec("alerting.webhook_format", None, "str", "json", "`json` (Pitwall's body) or `slack` ({\"text\": ...})."),
    SettingSpec("alerting.webhook_token", "PITWALL_ALERT_WEBHOOK_TOKEN", "str", None,
                "Sent as `Authorization: Bearer <token>` to the webhook; a secret, never shown."),
    SettingSpec("alerting.send_deadline_s", None, "float", 10.0, "Total deadline of one call to a receiver, seconds."),
    SettingSpec("alerting.outbox_max", None, "int", 10000,
                "Notifications kept per receiver while it is down; beyond it the oldest are dropped (an `alert_dropped` event says how many)."),
    SettingSpec("alerting.inhibit_grace_s", None, "float", 120.0,
                "Seconds after a launch, stop or relaunch Pitwall carried out during which its crash, OOM and down alerts stay quiet."),
    SettingSpec("prometheus.url", "PITWALL_PROMETHEUS_URL", "str", None,
                "A Prometheus that already scrapes the servers (e.g. http://prom:9090): their "
                "`sglang:*` series are read through its HTTP API instead of scraping them again "
                "(a server's own `prometheus_url` overrides it; `prometheus_url = \"\"` scrapes it directly)."),
    SettingSpec("prometheus.selector", None, "str", 'instance="{instance}"',
                "Label matchers naming one server in that Prometheus; `{instance}` (host:port of "
                "its base_url) and `{name}` are filled in. A server's `prometheus_selector` overrides it."),
    SettingSpec("metrics.port", "PITWALL_METRICS_PORT", "int", 0,
                "Port of the runner's own Prometheus `/metrics` (0 turns it off; 9108 is customary)."),
    SettingSpec("metrics.host", "PITWALL_METRICS_HOST", "str", "127.0.0.1", "Address the runner's `/metrics` binds to."),
    SettingSpec("alerts", None, "alerts", [],
                "`[[alerts]]` rule tables: name, kind (burn_rate, threshold, event) and their keys (README \"Alerts\")."),
    SettingSpec("servers", None, "servers", [],
                "`[[servers]]` tables: name, base_url, kind, managed, log_path, gpu_indices, "
                "gpu_hourly_usd, python, profile, api_key, host, prometheus_url, prometheus_selector, "
                "service, role (prefill, decode or router of a disaggregated service), metrics_url."),
)

@dataclass(frozen=True)
class Settings:
    data_dir: Path
    database_url: str
    host: str = "127.0.0.1"
    port: int = 8501
    demo: str = "auto"
    demo_port: int = 30100
    demo_pd: bool = False  # the demo runs a disaggregated service too (DEMO_PD_SERVERS)
    profiles_dir: Path = REPO_ROOT / "profiles"
    password: str | None = None
    viewer_password: str | None = None
    session_ttl_s: float = 8 * 3600.0
    allowed_hosts: tuple[str, ...] = ()
    read_only: bool = False
    electricity_usd_per_kwh: float | None = None
    probe: dict[str, Any] = field(default_factory=dict)
    runner: dict[str, Any] = field(default_factory=dict)  # auto_restart, restart_budget, ...
    launch: dict[str, Any] = field(default_factory=dict)  # allowed_entrypoints, allowed_env, allow_unsandboxed
    retention: dict[str, Any] = field(default_factory=dict)  # samples_days, rollups_days, ... (days)
    gpu: dict[str, Any] = field(default_factory=dict)  # dcgm_url: list of URLs
    compare: dict[str, Any] = field(default_factory=dict)  # ssim_min
    servers: list[ServerConfig] = field(default_factory=list)
    alerting: dict[str, Any] = field(default_factory=dict)  # alerting.* (receivers, intervals)
    metrics: dict[str, Any] = field(default_factory=dict)  # port, host of the runner's /metrics
    prometheus: dict[str, Any] = field(default_factory=dict)  # url, selector (Prometheus as a source)
    alerts: list[dict[str, Any]] = field(default_factory=list)  # raw [[alerts]]; runner/alerts/rules.py validates
    slo: dict[str, Any] = field(default_factory=dict)  # raw [slo] table; scorecard service validates
    config_path: Path | None = None

    @property
    def exposed(self) -> bool:
        """True when the dashboard listens on anything but loopback."""
        return self.host not in ("127.0.0.1", "localhost", "::1")

    @property
    def demo_active(self) -> bool:
        return self.demo == "on" or (self.demo == "auto" and not self.servers)

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def exports_dir(self) -> Path:
        return self.data_dir / "exports"

    @property
    def requests_dir(self) -> Path:  # a profile's record_requests: one folder per server
        return self.data_dir / "requests"


def _convert(spec: SettingSpec, value: Any, origin: str) -> Any:
    where = f"{spec.key} ({origin})"
    try:
        if value is None:
            return None
        if spec.kind in ("str",):
            if not isinstance(value, str):
                raise TypeError
            return value
        if spec.kind == "path":
            if not isinstance(value, str | Path):
                raise TypeError
            return Path(os.path.expanduser(str(value)))
        if spec.kind == "int":
            if isinstance(value, bool):
                raise TypeError
            return int(value)
        if spec.kind == "float":
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        if spec.kind == "bool":
            if isinstance(value, bool):
                return value
            low = str(value).strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off", ""):
                return False
            raise ValueError
        if spec.kind in ("list[str]", "list[url]"):
            items = [x.strip() for x in value.split(",") if x.strip()] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(x, str) and x for x in items):
                raise ValueError
            if spec.kind == "list[url]" and not all(x.startswith(("http://", "https://")) for x in items):
                raise ValueError
            return list(items)
        if spec.kind == "list[int]":
            items = value.split(",") if isinstance(value, str) else value
            out = [int(x) for x in items]
            if not out or any(x <= 0 for x in out):
                raise ValueError
            return out
    except (TypeError, ValueError):
        forms = {
            "str": "a string",
            "path": "a folder path",
            "int": "a whole number, e.g. 8501",
            "float": "a number, e.g. 0.12",
            "bool": "true or false",
            "list[int]": "positive whole numbers, e.g. [1, 4, 8, 16] or 1,4,8,16",
            "list[str]": 'a list of names, e.g. ["MY_VAR", "MYLIB_*"] or NAME1,NAME2',
            "list[url]": ('a URL or a list of URLs, e.g. "http://node1:9400/metrics" or '
                          '["http://node1:9400/metrics", "http://node2:9400/metrics"] '
                          "(comma-separated in the environment variable)"),
        }
        raise SettingsError(f"Setting {where} is {value!r}; expected {forms[spec.kind]}.") from None
    return value


def _alerts(raw: Any, alerting: dict[str, Any]) -> list[dict[str, Any]]:
    """The raw [[alerts]] tables, checked now so a bad rule stops `pitwall collect` with one line."""
    from runner.alerts.rules import AlertRuleError, build_rules

    if not isinstance(raw, list):
        raise SettingsError("Setting alerts must be a list of [[alerts]] tables.")
    try:
        build_rules(raw, defaults=bool(alerting["defaults"]))
    except AlertRuleError as exc:
        raise SettingsError(f"Setting {exc}") from None
    if alerting["webhook_format"] not in ("json", "slack"):
        raise SettingsError(f"Setting alerting.webhook_format is {alerting['webhook_format']!r}; expected json or slack.")
    if alerting["eval_interval_s"] <= 0 or alerting["outbox_max"] < 1 or alerting["send_deadline_s"] <= 0:
        raise SettingsError("Settings alerting.eval_interval_s and send_deadline_s must be > 0 and outbox_max >= 1.")
    return list(raw)


def _lookup(data: dict[str, Any], dotted: str) -> Any:
    cur: Any = data
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def load_settings(env: dict[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """Build Settings from the environment and the config file; raise SettingsError if invalid."""
    real_env = env is None  # the checkout's pitwall.toml is read only for the real environment
    env = dict(os.environ) if env is None else env
    cwd = cwd or Path.cwd()
    config_path: Path | None = None
    data: dict[str, Any] = {}
    if env.get("PITWALL_CONFIG"):
        config_path = Path(env["PITWALL_CONFIG"]).expanduser()
        if not config_path.exists():
            raise SettingsError(
                f"PITWALL_CONFIG points at {config_path}, which does not exist; fix the path or unset it."
            )
    elif (cwd / "pitwall.toml").exists():
        config_path = cwd / "pitwall.toml"
    elif real_env and "PITWALL_CONFIG" not in env and (REPO_ROOT / "pitwall.toml").exists():
        config_path = REPO_ROOT / "pitwall.toml"  # the checkout's: what `make run` reads
    if config_path is not None:
        try:
            data = tomllib.loads(config_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{config_path} is not valid TOML ({exc}); fix the file.") from None
    known_top = {s.key.split(".")[0] for s in SETTINGS} | {"slo"}
    for key in data:
        if key not in known_top:
            raise SettingsError(
                f"Setting {key} in {config_path} is unknown; expected one of {', '.join(sorted(known_top))}."
            )

    values: dict[str, Any] = {}
    for spec in SETTINGS:
        if spec.kind in ("servers", "alerts"):
            continue
        raw, origin = spec.default, "default"
        file_value = _lookup(data, spec.key)
        if file_value is not None:
            raw, origin = file_value, str(config_path.name if config_path else "file")
        if spec.env and env.get(spec.env) not in (None, ""):
            raw, origin = env[spec.env], spec.env
        values[spec.key] = _convert(spec, raw, origin)

    if values["demo"] not in ("auto", "on", "off"):
        raise SettingsError(f"Setting demo is {values['demo']!r}; expected auto, on or off.")
    if not (0 < values["port"] < 65536):
        raise SettingsError(f"Setting port is {values['port']}; expected 1-65535.")
    def base(key: str, var: str) -> Path:  # a relative path from the file is read from the file's folder
        return config_path.parent if config_path and not env.get(var) and _lookup(data, key) is not None else cwd
    data_dir = Path(values["data_dir"])
    data_dir = data_dir if data_dir.is_absolute() else (base("data_dir", "PITWALL_DATA_DIR") / data_dir).resolve()
    database_url = values["database_url"] or f"sqlite:///{data_dir / 'pitwall.db'}"
    db_file = database_url.removeprefix("sqlite:///")
    if db_file != database_url and db_file not in ("", ":memory:") and not Path(db_file).is_absolute():
        database_url = f"sqlite:///{(base('database_url', 'PITWALL_DATABASE_URL') / db_file).resolve()}"
    profiles_dir = Path(values["profiles_dir"] or (REPO_ROOT / "profiles"))
    if not profiles_dir.is_absolute():
        profiles_dir = (base("profiles_dir", "PITWALL_PROFILES_DIR") / profiles_dir).resolve()
    probe = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("probe.")}
    runner = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("runner.")}
    compare = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("compare.")}
    if not 0.0 <= compare["ssim_min"] <= 1.0:
        raise SettingsError(f"Setting compare.ssim_min is {compare['ssim_min']}; use a number "
                            "from 0 to 1 (0.95 flags visibly different pictures).")
    launch = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("launch.")}
    retention = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("retention.")}
    if any(v < 0 for v in retention.values()):
        raise SettingsError("Settings retention.* must be >= 0 (0 keeps rows and logs forever).")
    if values["session_ttl_s"] <= 0:
        raise SettingsError(f"Setting session_ttl_s is {values['session_ttl_s']}; expected seconds > 0, e.g. 28800.")
    if runner["restart_budget"] < 0 or runner["intent_expiry_s"] <= 0:
        raise SettingsError("Settings runner.restart_budget must be >= 0 and runner.intent_expiry_s > 0.")
    if runner["lease_ttl_s"] < 5:
        raise SettingsError(f"Setting runner.lease_ttl_s is {runner['lease_ttl_s']}; expected at least 5 "
                            "seconds (the lease is renewed every 2 s; 15 is the default).")
    servers = parse_servers(data.get("servers", []))
    alerting = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("alerting.")}
    alerts = _alerts(data.get("alerts", []), alerting)
    slo = dict(data.get("slo") or {})
    demo_active = values["demo"] == "on" or (values["demo"] == "auto" and not servers)
    if demo_active:
        per_server = dict(slo.get("servers") or {})
        per_server.update({n: {**t, **(per_server.get(n) or {})} for n, t in DEMO_SLO.items()})
        slo["servers"] = per_server
    gpu = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("gpu.")}
    runner["host"] = runner.get("host") or socket.gethostname()
    prometheus = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("prometheus.")}
    if prometheus["url"] and not str(prometheus["url"]).startswith(("http://", "https://")):
        raise SettingsError(f"Setting prometheus.url is {prometheus['url']!r}; expected a URL such as "
                            "http://127.0.0.1:9090.")
    if demo_active and not gpu["dcgm_url"]:  # dcgm_origin: where the URLs came from (registry's advice)
        gpu["dcgm_url"], gpu["dcgm_origin"] = demo_dcgm_urls(values["demo_port"], values["demo_pd"]), "demo"
    gpu.setdefault("dcgm_origin", "PITWALL_GPU_DCGM_URL" if env.get("PITWALL_GPU_DCGM_URL") else str(config_path))
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        host=values["host"],
        port=values["port"],
        demo=values["demo"],
        demo_port=values["demo_port"],
        demo_pd=values["demo_pd"],
        profiles_dir=Path(profiles_dir),
        password=values["password"],
        viewer_password=values["viewer_password"],
        session_ttl_s=values["session_ttl_s"],
        allowed_hosts=tuple(h.lower().rstrip(".") for h in values["allowed_hosts"]),
        read_only=values["read_only"],
        electricity_usd_per_kwh=values["electricity_usd_per_kwh"],
        probe=probe,
        runner=runner,
        compare=compare,
        launch=launch,
        retention=retention,
        gpu=gpu,
        servers=servers,
        alerting=alerting,
        metrics={k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("metrics.")},
        prometheus=prometheus,
        alerts=alerts,
        slo=slo,
        config_path=config_path,
    )
