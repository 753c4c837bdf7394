"""Alert rules as data: the `[[alerts]]` tables of pitwall.toml, validated into `Rule`s, and the
defaults that are on out of the box.

```toml
[[alerts]]                      # SLO burn rate (SRE workbook, multi-window multi-burn-rate)
name = "ttft-burn-fast"
kind = "burn_rate"
slo = "ttft_p99_s"              # success_rate | ttft_p99_s | image_p99_s (targets from [slo])
speed = "fast"                  # fast: 5 min and 1 h both > 14.4x; slow: 30 min and 6 h both > 6x
severity = "critical"

[[alerts]]                      # threshold on a stored series
name = "kv-full"
kind = "threshold"
metric = "log.token_usage"      # or a metric-table alias: queue_max, radix_hit_rate, kv_usage
op = ">"                        # > >= < <=
value = 0.95
agg = "avg"                     # last | avg | max | min over window_s
window_s = 60
for_s = 300

[[alerts]]                      # event
name = "crash"
kind = "event"
event = "crash"                 # see EVENT_RULES
servers = ["prod-a"]            # optional: only these servers
enabled = false                 # switches a default (same name) off
```

A rule whose `name` equals a default replaces it. Units are base units (seconds, ratios).

Page edits (the Alerts page, by a signed-in operator) lie over these tables: `merge_edits` gives
the `[[alerts]]` list with them applied, which `build_rules` validates like the file's own. They are
stored as CollectorState `alerts:rules` (EDITS_KEY), {"changed": {name: {field: value}}, "added":
{name: table}}, and read by the runner at every evaluation pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from sqlalchemy.engine import Engine

from storage import repo
from storage import series_keys as sk
from storage.errors import ConfigError
from storage.kinds import ALERT_RULE_KINDS

SEVERITIES = ("info", "warning", "error", "critical")

#: speed -> (short window s, long window s, burn-rate factor): SRE workbook ch. 5, table 5-8
BURN_SPEEDS: dict[str, tuple[float, float, float]] = {
    "fast": (300.0, 3600.0, 14.4),  # 2 % of a 30-day budget in one hour
    "slow": (1800.0, 21600.0, 6.0),  # 5 % of a 30-day budget in six hours
}

#: slo key -> (which servers, what makes a request bad); success_rate's budget is 1 - target,
#: the p99 targets' budget is the 1 % of requests allowed above the target
BURN_SLOS: dict[str, str] = {
    "success_rate": "any",
    "ttft_p99_s": "llm",
    "image_p99_s": "image",
}

#: metric-table keys a threshold may name, mapped to the stored series and its aggregate
THRESHOLD_ALIASES: dict[str, tuple[str, str]] = {
    "queue_max": (sk.LOG_QUEUE_REQ, "max"),
    "radix_hit_rate": (sk.LOG_CACHE_HIT_RATE, "avg"),
    "kv_usage": (sk.LOG_TOKEN_USAGE, "avg"),
    # every GPU of the server: the hottest or fullest one decides
    "gpu_mem_used_bytes": (sk.gpu_pattern("mem_used_bytes"), "max"),
    "gpu_temp_c": (sk.gpu_pattern("temp_c"), "max"),
}
_METRIC_FORMS = (f"name a stored series ({sk.LOG_QUEUE_REQ}, {sk.gpu_key(0, 'temp_c')}), a field on every GPU "
                 f"({sk.gpu_pattern('temp_c')}) or one of {', '.join(THRESHOLD_ALIASES)}.")
OPS = (">", ">=", "<", "<=")
AGGS = ("last", "avg", "max", "min")

#: event rule -> (event kinds that raise it, event kinds that clear it, inhibited during a
#: relaunch or tune that Pitwall started). `decode_retract` counts a rate (`rate_per_min`);
#: `health_down` reads api.health_ok samples; `no_sample` is the dead man's switch (no sample
#: from a server for `intervals` x `interval_s`).
EVENT_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    "crash": (("crash", "server_exit"), ("server_ready", "relaunch_done"), True),
    "oom": (("oom", "prefill_oom"), ("server_ready", "relaunch_done"), True),
    "nccl_timeout": (("nccl_timeout",), ("server_ready", "relaunch_done"), True),
    "restart_budget_exhausted": (("restart_budget_exhausted",), ("server_ready", "relaunch_done"), False),
    "relaunch_failed": (("relaunch_failed", "rollback"), ("relaunch_done",), False),
    "decode_retract": (("decode_retract",), (), False),
    # a family a figure read went away after a relaunch or an upgrade (a known rename, an info
    # event, raises nothing); nothing clears it but time (EVENT_WINDOW_S)
    "metric_drift": (("metric_drift",), (), False),
    "health_down": ((), (), True),
    "no_sample": ((), (), True),
}


class AlertRuleError(ConfigError, ValueError):
    """An [[alerts]] entry has the wrong form; the message names it and the expected form."""


@dataclass(frozen=True)
class Rule:
    name: str
    kind: str  # storage/kinds.py ALERT_RULE_KINDS
    severity: str = "warning"
    for_s: float = 0.0  # the condition holds this long before the alert fires
    servers: tuple[str, ...] = ()  # empty: every server
    labels: dict[str, str] = field(default_factory=dict)
    summary: str = ""  # a sentence of your own before the figure and the target
    enabled: bool = True
    # burn_rate
    slo: str = ""
    speed: str = "fast"
    # threshold
    metric: str = ""
    op: str = ">"
    value: float = 0.0
    agg: str = "last"
    window_s: float = 60.0
    # event
    event: str = ""
    rate_per_min: float = 0.0  # decode_retract: events per minute over window_s
    intervals: float = 5.0  # no_sample: poll intervals without a sample
    interval_s: float = 30.0

    def applies_to(self, server: str, server_kind: str) -> bool:
        if self.servers and server not in self.servers:
            return False
        if self.kind == "burn_rate":
            want = BURN_SLOS[self.slo]
            return want in ("any", server_kind)
        return True

    def series(self) -> tuple[str, str]:
        """(stored metric, aggregate) of a threshold rule, aliases resolved."""
        if self.metric in THRESHOLD_ALIASES:
            metric, agg = THRESHOLD_ALIASES[self.metric]
            return metric, self.agg if self.agg != "last" else agg
        return self.metric, self.agg


DEFAULT_RULES: tuple[Rule, ...] = (
    *(Rule(f"{slo.replace('_p99_s', '').replace('_rate', '')}-burn-{speed}", "burn_rate", slo=slo, speed=speed,
           severity="critical" if speed == "fast" else "warning")
      for slo in BURN_SLOS for speed in BURN_SPEEDS),
    Rule("crash", "event", event="crash", severity="critical"),
    Rule("oom", "event", event="oom", severity="critical"),
    Rule("nccl-timeout", "event", event="nccl_timeout", severity="critical"),
    Rule("restart-budget-exhausted", "event", event="restart_budget_exhausted", severity="critical"),
    Rule("relaunch-failed", "event", event="relaunch_failed", severity="error"),
    Rule("decode-retractions", "event", event="decode_retract", rate_per_min=10.0, window_s=300.0),
    Rule("health-down", "event", event="health_down", for_s=60.0, severity="error"),
    Rule("metric-drift", "event", event="metric_drift", severity="warning"),
    Rule("no-samples", "event", event="no_sample", intervals=5.0, interval_s=30.0, severity="error"),
    Rule("kv-cache-full", "threshold", metric="kv_usage", op=">=", value=0.98, window_s=60.0, for_s=300.0),
)

_FIELD_TYPES = {f.name: f.type for f in fields(Rule)}
_NUMBERS = ("for_s", "value", "window_s", "rate_per_min", "intervals", "interval_s")


def _check(rule: Rule, where: str) -> Rule:
    if rule.kind not in ALERT_RULE_KINDS:
        raise AlertRuleError(f"{where}.kind is {rule.kind!r}; expected one of {', '.join(ALERT_RULE_KINDS)}.")
    if rule.severity not in SEVERITIES:
        raise AlertRuleError(f"{where}.severity is {rule.severity!r}; expected one of {', '.join(SEVERITIES)}.")
    if any(getattr(rule, k) < 0 for k in _NUMBERS if k != "value"):
        raise AlertRuleError(f"{where}: durations, rates and counts must be >= 0.")
    if rule.kind == "burn_rate":
        if rule.slo not in BURN_SLOS:
            raise AlertRuleError(f"{where}.slo is {rule.slo!r}; expected one of {', '.join(BURN_SLOS)}.")
        if rule.speed not in BURN_SPEEDS:
            raise AlertRuleError(f"{where}.speed is {rule.speed!r}; expected fast or slow.")
    elif rule.kind == "threshold":
        if not rule.metric:
            raise AlertRuleError(f"{where}.metric is missing; {_METRIC_FORMS}")
        if rule.metric not in THRESHOLD_ALIASES and sk.entry(rule.metric) is None \
                and rule.metric not in sk.SERIES_KEYS:
            raise AlertRuleError(f"{where}.metric {rule.metric!r} is not a series Pitwall writes, so the "
                                 f"rule could never see a value; {_METRIC_FORMS}")
        if rule.op not in OPS or rule.agg not in AGGS:
            raise AlertRuleError(f"{where}: op must be one of {' '.join(OPS)} and agg one of {', '.join(AGGS)}.")
        if rule.window_s <= 0:
            raise AlertRuleError(f"{where}.window_s must be > 0 seconds.")
    elif rule.event not in EVENT_RULES:
        raise AlertRuleError(f"{where}.event is {rule.event!r}; expected one of {', '.join(EVENT_RULES)}.")
    return rule


def parse_rule(raw: Any, where: str) -> Rule:
    """One [[alerts]] table -> Rule; AlertRuleError names the bad key and the expected form."""
    if not isinstance(raw, dict):
        raise AlertRuleError(f"{where} must be a table ([[alerts]] with name and kind).")
    unknown = set(raw) - set(_FIELD_TYPES)
    if unknown:
        raise AlertRuleError(f"{where}.{sorted(unknown)[0]} is unknown; expected some of {', '.join(_FIELD_TYPES)}.")
    if not raw.get("name") or not isinstance(raw["name"], str):
        raise AlertRuleError(f"{where}.name is missing; every rule needs a name.")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _NUMBERS:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise AlertRuleError(f"{where}.{key} is {value!r}; expected a number in base units.")
            values[key] = float(value)
        elif key == "servers":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise AlertRuleError(f"{where}.servers is {value!r}; expected a list of server names.")
            values[key] = tuple(value)
        elif key == "labels":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise AlertRuleError(f"{where}.labels must be a table of strings.")
            values[key] = dict(value)
        elif key == "enabled":
            if not isinstance(value, bool):
                raise AlertRuleError(f"{where}.enabled is {value!r}; expected true or false.")
            values[key] = value
        else:
            if not isinstance(value, str):
                raise AlertRuleError(f"{where}.{key} is {value!r}; expected a string.")
            values[key] = value
    default = next((r for r in DEFAULT_RULES if r.name == values["name"]), None)
    if "kind" not in values and default is None:
        raise AlertRuleError(f"{where}.kind is missing; expected one of {', '.join(ALERT_RULE_KINDS)}.")
    base = {f: getattr(default, f) for f in _FIELD_TYPES} if default is not None else {}
    return _check(Rule(**{**base, **values}), f"{where} ({values['name']})")


def build_rules(raw: list[Any] | None, *, defaults: bool = True, disabled: bool = False) -> list[Rule]:
    """The effective rules: the defaults (when on), each replaced or switched off by a user rule
    of the same name, then the user's other rules; disabled rules are left out unless `disabled`."""
    user = [parse_rule(item, f"alerts[{i}]") for i, item in enumerate(raw or [])]
    names = [r.name for r in user]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise AlertRuleError(f"alerts: the rule name {dup!r} is used twice; give each rule its own name.")
    by_name = {r.name: r for r in user}
    out = [by_name.pop(r.name, r) for r in (DEFAULT_RULES if defaults else ())]
    out += by_name.values()
    return [r for r in out if r.enabled or disabled]


EDITS_KEY = "alerts:rules"
#: the fields the Alerts page may change on a rule of pitwall.toml or a default
EDITABLE = ("value", "for_s", "severity", "enabled")


def merge_edits(raw: list[Any] | None, edits: dict[str, Any] | None, *, defaults: bool = True) -> list[Any]:
    """pitwall.toml's `[[alerts]]` with the page's edits laid over: a changed field replaces the
    table's (or, for a default not in the file, is given with its name so the default fills the
    rest); added rules follow. Edits of rules no longer in the file or the defaults are skipped,
    as are added rules whose name the file now uses: the file wins over a stale edit."""
    tables = [dict(t) if isinstance(t, dict) else t for t in raw or []]
    by_name = {t.get("name"): t for t in tables if isinstance(t, dict)}
    known = set(by_name) | ({r.name for r in DEFAULT_RULES} if defaults else set())
    edits = edits or {}
    for name, change in (edits.get("changed") or {}).items():
        if name in by_name:
            by_name[name].update(change)
        elif name in known:
            tables.append({"name": name, **change})
    tables += [dict(t) for name, t in (edits.get("added") or {}).items() if name not in known]
    return tables


def load_edits(engine: Engine) -> dict[str, Any]:
    """The page's stored edits, {"changed": {}, "added": {}} when there are none."""
    value = repo.load_state(engine, key=EDITS_KEY) or {}
    return {"changed": dict(value.get("changed") or {}), "added": dict(value.get("added") or {})}


def rule_source(engine: Engine, raw: list[Any] | None, *, defaults: bool = True) -> Callable[[], list[Rule]]:
    """The effective rules as the runner reads them at every pass: the file's with the stored edits."""
    def current() -> list[Rule]:
        return build_rules(merge_edits(raw, load_edits(engine), defaults=defaults), defaults=defaults)

    return current
