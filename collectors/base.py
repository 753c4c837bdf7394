"""The collector protocol, the row types collectors emit, CollectorError (defined with Pitwall's
other error families in storage/errors.py) and the Engine description (what one inference engine
provides to the runner and the launcher).

A collector is a small object with a `name`, an `interval_s` and a `poll(ctx)` method that returns
a `PollResult` (samples + events). The runner (runner/loop.py) calls `poll` on the collector's
interval in a worker thread, writes the rows in batches, and turns an exception into one
`collector_error` event while the other collectors carry on. Collectors never touch the database
directly: persistent state (a tailer's offset) goes through `ctx.load_state` / `ctx.save_state`.

An engine is one folder (collectors/<engine>/) exposing `ENGINE = Engine(...)`; the registry of
engines is collectors/engines.py. Everything engine-specific is reached through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from storage.errors import CollectorError as CollectorError  # its home; importable from here too
from storage.kinds import EVENT_KINDS

if TYPE_CHECKING:
    from collectors.native_api import NativeApi
    from collectors.tuning import TuningRules


@dataclass(slots=True)
class SampleRow:
    """One value of one metric; `metric` is a Pitwall key (units in the name, base units)."""

    ts: float
    server_id: int
    metric: str
    value: float
    source: str
    launch_id: int | None = None


@dataclass(slots=True)
class EventRow:
    """One event of storage/kinds.py's EVENT_KINDS (`kind`), with the raw excerpt it came from.

    `severity` is storage/kinds.py EVENT_KINDS's for the kind, filled in here; a collector
    passes it only to override the table, together with `severity_reason` (why; not stored).
    """

    ts: float
    server_id: int | None
    kind: str
    message: str
    severity: str | None = None
    raw: str | None = None
    launch_id: int | None = None
    severity_reason: str | None = None

    def __post_init__(self) -> None:
        # an unknown kind keeps None: the writer sets the row aside for its kind (runner/writer_rows.py)
        if self.severity is None and isinstance(self.kind, str) and self.kind in EVENT_KINDS:
            self.severity = EVENT_KINDS[self.kind][0]


@dataclass(slots=True)
class PollResult:
    samples: list[SampleRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)

    def extend(self, other: PollResult) -> None:
        self.samples.extend(other.samples)
        self.events.extend(other.events)


@dataclass(slots=True)
class ServerTarget:
    """What a collector needs to know about one server (a read-only view of storage.Server)."""

    id: int
    name: str
    base_url: str
    kind: str = "llm"
    managed: bool = False
    log_path: str | None = None
    gpu_indices: list[int] | None = None
    api_key: str | None = None
    launch_id: int | None = None  # the current Launch row, when known
    pids: list[int] = field(default_factory=list)  # processes of a managed server (for NVML)
    #: status of the current Launch of a managed server (starting | ready | stopping | stopped | exited |
    #: failed), None for watched servers. Request-sending collectors skip a managed server that
    #: is not "ready", so a start or a stop is not reported as errors.
    launch_status: str | None = None
    host: str | None = None  # the runner host that owns it (fleet)
    #: storage's Server.engine; the runner hands an engine's collectors only its own servers
    #: (engine_of). None: a target built outside the runner, read by whichever collector polls it.
    engine: str | None = None
    #: read the engine's series from this Prometheus instead of scraping /metrics (None: scrape directly)
    prometheus_url: str | None = None
    prometheus_selector: str | None = None  # label matchers naming this server there
    service: str | None = None  # the disaggregated service it is part of (storage's Server.service)
    role: str | None = None  # prefill | decode | router there; None for a whole server
    metrics_url: str | None = None  # its Prometheus text when not at {base_url}/metrics

    @property
    def metrics_endpoint(self) -> str:
        return self.metrics_url or self.base_url.rstrip("/") + "/metrics"

    @property
    def serving(self) -> bool:
        return not self.managed or self.launch_status == "ready"


@dataclass(slots=True)
class CollectorContext:
    """Handed to every poll: the servers to watch, the clock, and persistent state access."""

    servers: list[ServerTarget]
    load_state: Callable[[str], dict[str, Any] | None]
    save_state: Callable[[str, dict[str, Any]], None]
    now: Callable[[], float] = time.time
    #: called by collectors that learn facts about a launch (server args, version)
    update_launch: Callable[[int, dict[str, Any]], None] | None = None


class Collector(Protocol):
    name: str
    interval_s: float

    def poll(self, ctx: CollectorContext) -> PollResult: ...

    def close(self) -> None: ...


def engine_of(collector: Collector) -> str | None:
    """The engine whose servers `collector` reads (set by Engine.collector); None for an
    engine-neutral collector (GPU, canary, Prometheus source), which reads every server."""
    engine = getattr(collector, "engine", None)
    return engine if isinstance(engine, str) else None


@dataclass(frozen=True)
class Issue:
    """One finding of a launch check (an engine's flags or env, the sandbox, guardrails,
    preflight); an "error" blocks a launch."""

    severity: str  # error | warning | note
    flag: str | None  # the flag (no dashes) or env var it is about; None for the profile
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"


@dataclass(frozen=True)
class FlagParser:
    """How to ask an engine's own argument parser about a profile's flags, in the server's Python.

    The launcher runs `python -c script *args(entrypoint, model_path, flags)` (secret values
    already replaced) with a deadline of `timeout_s` seconds, and hands the exit code and stderr
    to `verdict(python, entrypoint, flags, returncode, stderr)` -> (issues, what checked the
    flags), or None when the engine cannot be imported there (the bundled table judges alone).
    `applies(flags)`: whether this parser judges these flags at all.
    """

    script: str
    args: Callable[[str, str, dict[str, Any]], list[str]]
    applies: Callable[[dict[str, Any]], bool]
    verdict: Callable[[str, str, dict[str, Any], int | None, str], tuple[list[Issue], str] | None]


class PromReader(Protocol):
    """How the Prometheus source (collectors/prometheus_source.py) reads one engine's series back
    from a Prometheus; one per collector (it may remember limit episodes between polls).

    names: the PromQL `__name__` matcher of the engine's series; series_label: how messages name
    them (e.g. "<prefix>:*"); no_series_hint: what to do when Prometheus holds none for a live target;
    max_series / max_rank_keys: the defaults of runner.metrics_max_series / _max_rank_keys.
    convert(server, raw API series, labels Prometheus added, after (s), state, now (s), max_series,
    max_rank_keys) -> (rows and events, the new state, the newest scrape time read or None).
    For a window read with `query_range` (the Server page): range_names(metrics.* keys) -> the
    matcher of only the series they need (ValueError: none); steps(series, labels Prometheus
    added) -> {step time (s): that step's samples}; values_at(step, state, ts) -> ({key: value},
    the next state).
    """

    names: str
    series_label: str
    no_series_hint: str
    max_series: int
    max_rank_keys: int

    def convert(self, server: ServerTarget, series: list[Any], strip: set[str], after: float, state: Any,
                now: float, max_series: int, max_rank_keys: int) -> tuple[PollResult, Any, float | None]: ...

    def range_names(self, metrics: list[str]) -> str: ...

    def steps(self, series: list[Any], strip: set[str]) -> dict[float, Any]: ...

    def values_at(self, step: Any, state: Any, ts: float) -> tuple[dict[str, float], Any]: ...


@dataclass(frozen=True)
class Preflight:
    """What the launch preflight (launching/preflight.py) checks of an engine on a host.

    wheel_cuda: (engine version from, CUDA (major, minor) of the torch wheel it installs), newest
    first; min_sm: the oldest compute capability it runs on, and `old_card` what it says when it
    refuses an older card; default_mem_fraction: the share of a GPU's memory its static pool
    (weights + KV cache) takes when a profile sets none, 0-1; no_kv_cache: what it says when
    that pool leaves no room for the KV cache.
    """

    wheel_cuda: tuple[tuple[tuple[int, ...], tuple[int, int]], ...]
    min_sm: tuple[int, int]
    old_card: str
    default_mem_fraction: float
    no_kv_cache: str


def _no_issues(*args: Any, **kwargs: Any) -> list[Issue]:
    return []


def _no_rule(name: str) -> str | None:
    return None


def _llm_only(flags: dict[str, Any]) -> str:
    return "llm"


def _no_secrets(flags: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    return dict(flags), {}


def _no_config(secrets: dict[str, str]) -> str:
    raise CollectorError("This engine reads no config file of secret flags; put none in the profile.")


def _other_stage(name: str) -> str:
    return "other"


@dataclass(frozen=True)
class ImageStages:
    """How an image engine names its pipeline stages in its log and /metrics stage labels (the
    scorecard's image figures and the GPU-wall stage verdicts read them).

    denoise: the stage that is the denoising loop ("" when the engine reports none); step: the
    pseudo-stage its /metrics observe once per denoising step (seconds per step, already inside
    `denoise`, so never a stage of its own; "" when it exports none); group(stage name) ->
    "encode" | "denoise" | "decode" | "other", where a request's time goes.
    """

    denoise: str = ""
    step: str = ""
    group: Callable[[str], str] = _other_stage


#: The collector roles every engine fills; the registry names them "<engine>_<role>".
ENGINE_ROLES = ("log", "metrics", "api")


@dataclass(frozen=True)
class Engine:
    """What the runner, the launcher and the scorecards need of one inference engine.

    collectors: role ("log", "metrics", "api") -> a factory of that collector; factories import
    their module when called, so describing an engine stays cheap.
    build_argv(python, entrypoint, model_path, host, port, flags, config_path=None) -> the server's
    argv (config_path: a file of secret flags, passed as the engine reads one).
    ready_line: the log line that says the server is ready; startup_progress(log text) ->
    (fraction 0-1, what it is doing). health_path answers 200 when serving; server_info_paths
    are tried in order (newest first) for the server's args and version; version_of(server info)
    -> the version the server reports, None when it says none (stored as Launch.engine_version).
    check_flags / check_env: a profile's [flags] / [env] -> issues, against the engine's bundled
    flag table of version `flags_version`. parse_line: one log line -> a record or None.
    entrypoints: the launch entrypoints a profile may name (the launch sandbox's allow-list).
    flag_parser: how to ask the engine's own parser (FlagParser); None: the bundled table only.
    """

    name: str
    display_name: str  # how pages, exports and messages name the engine
    collectors: Mapping[str, Callable[[], Collector]]
    build_argv: Callable[..., list[str]]
    ready_line: str
    startup_progress: Callable[[str], tuple[float, str]]
    health_path: str
    server_info_paths: tuple[str, ...]
    version_of: Callable[[dict[str, Any]], str | None]
    check_flags: Callable[..., Sequence[Issue]]  # (flags, *, known_by_parser=False)
    check_env: Callable[..., Sequence[Issue]]
    flags_version: str
    parse_line: Callable[[str], object | None]
    entrypoints: tuple[str, ...] = ()  # what a profile's `entrypoint` may name for this engine
    flag_parser: FlagParser | None = None  # the engine's own parser, asked before the bundled table
    #: flags -> (flags for argv, secret flags); the secrets go into a 0600 file of config_text(secrets)
    #: whose path build_argv passes as the engine reads one (argv is visible to every local user)
    split_secrets: Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, str]]] = _no_secrets
    config_text: Callable[[dict[str, str]], str] = _no_config
    #: a profile's [flags] -> the server kind it starts, in Server.kind's words ("llm" | "image"), or
    #: "router" for a service's router (it loads no model: no model or memory checks)
    profile_kind: Callable[[dict[str, Any]], str] = _llm_only
    preflight: Preflight | None = None  # None: the driver, card and memory are not checked
    #: the launch sandbox's engine part (launching/sandbox.py): check_options(entrypoint,
    #: model_path, flags) -> issues of option values and shapes; check_profile(model_path, flags,
    #: env, *, allowed, data_dir, reserved_ports, server, own_port) -> its deny table's refusals;
    #: deny_reason(flag or env name) -> why its deny table refuses it, None without a rule
    check_options: Callable[[str, str, dict[str, Any]], Sequence[Issue]] = _no_issues
    check_profile: Callable[..., Sequence[Issue]] = _no_issues
    #: a router profile against the server it starts: check_router(flags, metrics_url) -> issues
    #: (the metrics port the profile opens is the one Pitwall reads)
    check_router: Callable[[dict[str, Any], str | None], Sequence[Issue]] = _no_issues
    deny_reason: Callable[[str], str | None] = _no_rule
    #: a new PromReader of the engine's series (None: its servers cannot be read through Prometheus)
    prometheus: Callable[[], PromReader] | None = None
    #: how its image servers name their pipeline stages (the default: it names none)
    image_stages: ImageStages = ImageStages()
    #: its offline commands: `pitwall <name> [--engine NAME] ARGS` -> entry(ARGS) -> exit code
    #: ("parse-log": a saved log as records, "parse-metrics": a saved /metrics payload)
    commands: Mapping[str, Callable[[list[str]], int]] = field(default_factory=dict)
    #: the doctor's rules from the engine's tuning guidance (collectors/tuning.py); None: no doctor rules
    tuning_rules: TuningRules | None = None
    #: its native generation API as the probe speaks it (collectors/native_api.py); None: the probe
    #: reaches its servers through the OpenAI API only
    native_api: NativeApi | None = None
    #: its own request records as trace formats (`pitwall trace import`): () -> {name: reader
    #: with sniff(head) and read(lines, options), collectors/trace/model.py TraceFormat}; None: none
    trace_formats: Callable[[], Mapping[str, Any]] | None = None
    #: the flags that make a server write its own request records into a folder (a profile's
    #: `record_requests = true`; Pitwall's own flags, after the profile's): folder -> argv items;
    #: None: its servers cannot record them
    record_flags: Callable[[str], list[str]] | None = None
    #: scorecard figure key -> how this engine defines the quantity behind it, where engines
    #: differ (a hit rate of tokens or of whole blocks): the scorecard says it next to the figure,
    #: and Compare gives two engines' figures of different definitions no verdict
    definitions: Mapping[str, str] = field(default_factory=dict)

    @property
    def bundled_table(self) -> str:
        """What checked the flags when the engine's own parser could not:
        "bundled <display_name> <flags_version> flag table"."""
        return f"bundled {self.display_name} {self.flags_version} flag table"

    def collector(self, role: str) -> Collector:
        """A new collector of `role`; CollectorError naming the roles this engine has."""
        factory = self.collectors.get(role)
        if factory is None:
            known = ", ".join(sorted(self.collectors))
            raise CollectorError(f"Engine {self.name!r} has no {role!r} collector; it has: {known}.")
        collector = factory()
        collector.engine = self.name  # type: ignore[attr-defined]  # engine_of: only its servers
        return collector
