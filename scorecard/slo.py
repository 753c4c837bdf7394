"""SLO targets: their shape in pitwall.toml, UI overrides in storage, and pass/warn/fail grading.

`[slo]` table of pitwall.toml (every key optional; metric keys are METRIC_SPECS keys):

```toml
[slo]
warn_margin = 0.10          # a value up to 10 % worse than its target is "warn", beyond is "fail"
queue_threshold = 16        # queue length above which time counts as a queue spike
ttft_p99_s = 0.5            # a bare number is the target
success_rate = { target = 0.99, warn = 0.95 }   # or an explicit warn bound
crash_count = "off"         # "off" drops a default (or a global target, in a server table)

[slo.servers.prod-a]        # per-server targets override the global ones
ttft_p99_s = 0.3
```

Targets are in base units (seconds, 0-1 ratios, USD). A metric is graded against its target by
its direction in METRIC_SPECS: for `lower` metrics, value <= target passes, value <= warn (default
target × (1 + warn_margin)) warns, anything else fails; `higher` mirrors it (warn default target ×
(1 - warn_margin)). Metrics without a target, or without a value, get no grade. A dimension's
grade is its worst metric grade (`none` when none of its metrics is graded).

Precedence (lowest first): DEFAULT_TARGETS, `[slo]` globals, UI global edits, `[slo.servers.X]`,
UI edits for server X. UI edits are stored as CollectorState key `scorecard:slo` (a JSON dict
{"global": {...}, "servers": {name: {...}}}) through storage.repo load_state/save_state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from scorecard.metric_specs import DIMENSIONS, SPECS_BY_KEY
from storage import repo
from storage.errors import ConfigError

STATE_KEY = "scorecard:slo"
DEFAULT_WARN_MARGIN = 0.10
DEFAULT_QUEUE_THRESHOLD = 16.0
OPTION_KEYS = ("warn_margin", "queue_threshold")
GRADE_ORDER = {"none": 0, "pass": 1, "warn": 2, "fail": 3}

#: Targets that hold for most deployments out of the box: an interactive TTFT, a tolerable
#: per-image latency, and no failures. Throughput and cost depend on the model, the hardware and
#: the price, so they have no default: set them under [slo] (or in the UI) to grade them.
DEFAULT_TARGETS: dict[str, dict[str, float]] = {
    "ttft_p99_s": {"target": 1.0, "warn": 2.0},
    "image_p99_s": {"target": 30.0, "warn": 60.0},
    "success_rate": {"target": 0.99, "warn": 0.95},
    "crash_count": {"target": 0, "warn": 0},
    "oom_count": {"target": 0, "warn": 0},
    "nccl_timeout_count": {"target": 0, "warn": 0},
}


class SloError(ConfigError, ValueError):
    """An [slo] entry has the wrong form; the message names it and the expected form."""


@dataclass(frozen=True)
class Target:
    key: str
    target: float
    warn: float  # the bound between warn and fail
    origin: str  # "default" | "pitwall.toml" | "ui" | "pitwall.toml (server)" | "ui (server)"


@dataclass(frozen=True)
class SloSet:
    targets: dict[str, Target] = field(default_factory=dict)
    warn_margin: float = DEFAULT_WARN_MARGIN
    queue_threshold: float = DEFAULT_QUEUE_THRESHOLD


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SloError(f"SLO {where} is {value!r}; expected a number in base units (e.g. 0.5).")
    return float(value)


def _entries(table: dict[str, Any], where: str) -> dict[str, dict[str, float]]:
    """Validate one flat table of targets; {key: {"target": x, "warn"?: y}} plus options."""
    out: dict[str, dict[str, float]] = {}
    for key, value in table.items():
        if key in OPTION_KEYS:
            out[key] = {"value": _number(value, f"{where}.{key}")}
            continue
        if key not in SPECS_BY_KEY:
            raise SloError(
                f"SLO {where}.{key} is not a known metric; use a key of the metric table "
                "(e.g. ttft_p99_s, success_rate)."
            )
        if SPECS_BY_KEY[key].better == "none":
            raise SloError(f"SLO {where}.{key} is informational and cannot have a target.")
        if value == "off":  # drops a default or a broader target for this scope
            out[key] = {"off": 1.0}
            continue
        if isinstance(value, dict):
            unknown = set(value) - {"target", "warn"}
            if unknown or "target" not in value:
                raise SloError(
                    f"SLO {where}.{key} is {value!r}; expected a number, "
                    '{target = x, warn = y} or "off".'
                )
            entry = {"target": _number(value["target"], f"{where}.{key}.target")}
            if "warn" in value:
                entry["warn"] = _number(value["warn"], f"{where}.{key}.warn")
            out[key] = entry
        else:
            out[key] = {"target": _number(value, f"{where}.{key}")}
    margin = out.get("warn_margin", {}).get("value")
    if margin is not None and not 0 <= margin < 1:
        raise SloError(f"SLO {where}.warn_margin is {margin}; expected a fraction from 0 to 1.")
    return out


def validate_slo(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Check the raw [slo] table (Settings.slo) and return it normalised:
    {"global": {key: {...}}, "servers": {name: {key: {...}}}}. Raises SloError."""
    raw = dict(raw or {})
    servers = raw.pop("servers", {}) or {}
    if not isinstance(servers, dict):
        raise SloError("SLO servers must be tables: [slo.servers.NAME].")
    out: dict[str, Any] = {"global": _entries(raw, "slo"), "servers": {}}
    for name, table in servers.items():
        if not isinstance(table, dict):
            raise SloError(f"SLO servers.{name} must be a table of targets.")
        out["servers"][name] = _entries(table, f"slo.servers.{name}")
    return out


def load_overrides(engine: Engine) -> dict[str, Any]:
    """UI edits (validated form), {"global": {}, "servers": {}} when there are none."""
    value = repo.load_state(engine, key=STATE_KEY) or {}
    return {"global": dict(value.get("global") or {}), "servers": dict(value.get("servers") or {})}


def save_override(
    engine: Engine, *, server: str | None, key: str, target: float | None, warn: float | None = None,
    actor: str | None = None,
) -> None:
    """Set (or with target None, remove) one UI target, globally or for one server; with an
    `actor`, the edit is also recorded in the Audit table (action `slo_edit`)."""
    state = load_overrides(engine)
    scope = state["global"] if server is None else state["servers"].setdefault(server, {})
    if target is None:
        scope.pop(key, None)
    elif key in OPTION_KEYS:
        scope[key] = _entries({key: target}, "ui")[key]
    else:
        raw: dict[str, Any] = {"target": target} if warn is None else {"target": target, "warn": warn}
        scope[key] = _entries({key: raw}, "ui")[key]
    with engine.begin() as conn:
        repo.save_state(conn, key=STATE_KEY, value=state)
    if actor is not None:
        repo.add_audit(engine, actor=actor, action="slo_edit", target=server or "global",
                       detail={"metric": key, "target": target})


def resolve(server: str | None, settings_slo: dict[str, Any] | None,
            overrides: dict[str, Any] | None = None) -> SloSet:
    """The effective targets of a server (see the precedence in the module docstring)."""
    file = validate_slo(settings_slo)
    ui = overrides or {"global": {}, "servers": {}}
    layers: list[tuple[str, dict[str, Any]]] = [
        ("default", {k: dict(v) for k, v in DEFAULT_TARGETS.items()}),
        ("pitwall.toml", file["global"]),
        ("ui", ui.get("global") or {}),
    ]
    if server is not None:
        layers.append(("pitwall.toml (server)", file["servers"].get(server, {})))
        layers.append(("ui (server)", (ui.get("servers") or {}).get(server, {})))
    merged: dict[str, tuple[str, dict[str, float]]] = {}
    options: dict[str, float] = {}
    for origin, layer in layers:
        for key, entry in layer.items():
            if key in OPTION_KEYS:
                options[key] = entry["value"]
            else:
                merged[key] = (origin, entry)
    margin = options.get("warn_margin", DEFAULT_WARN_MARGIN)
    targets = {}
    for key, (origin, entry) in merged.items():
        if "off" in entry:
            continue
        t = entry["target"]
        higher = SPECS_BY_KEY[key].better == "higher"
        default_warn = t * (1 - margin) if higher else t * (1 + margin)
        targets[key] = Target(key, t, entry.get("warn", default_warn), origin)
    return SloSet(targets, margin, options.get("queue_threshold", DEFAULT_QUEUE_THRESHOLD))


def grade(key: str, value: float | None, target: Target | None) -> str:
    """pass / warn / fail of one value against its target; "none" without target or value."""
    if target is None or value is None:
        return "none"
    if SPECS_BY_KEY[key].better == "higher":
        if value >= target.target:
            return "pass"
        return "warn" if value >= target.warn else "fail"
    if value <= target.target:
        return "pass"
    return "warn" if value <= target.warn else "fail"


def worst(grades: list[str]) -> str:
    return max(grades, key=lambda g: GRADE_ORDER[g], default="none")


def dimension_grades(graded: dict[str, str], dims: dict[str, str]) -> dict[str, str]:
    """{dimension: worst grade} from {metric key: grade} and {metric key: dimension}."""
    out = {d: "none" for d in DIMENSIONS}
    for key, g in graded.items():
        d = dims[key]
        out[d] = worst([out[d], g])
    return out
