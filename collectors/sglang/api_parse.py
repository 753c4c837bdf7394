"""SGLang's HTTP endpoints as data: their paths (newest first), the pure shape parsing of what
/server_info, /model_info, /v1/loads and /get_load answer; collectors/sglang/api.py does the I/O
around them (the health state machine is every engine's: collectors/health.py).

Shapes by version (SGLang's route decorators):

- `/server_info` (0.5.6+) = `/get_server_info` (0.4.0+) = every server arg at top level, plus
  `version`, `internal_states` (one dict per DP rank) and, in 0.5.23, `startup_time` (a dict of
  startup phase durations) and `launch_command`; `/get_server_args` (<= 0.3.6) is the args alone.
- `/v1/loads` (0.5.8+): `{timestamp, version, loads: [{dp_rank, num_running_reqs, ...}]}`;
  `/get_load` (0.4.7-0.5.20): a list (or one dict) of `{dp_rank, num_reqs, num_waiting_reqs,
  num_tokens, ...}`.

Secrets in server args (`api_key`, `admin_api_key`, passwords, tokens) are masked by
storage/redact.py (`***`) before anything is stored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from storage import series_keys as sk
from storage.redact import MASK, redact_obj

HEALTH_PATH = "/health"
#: Newest first: /server_info 0.5.6+, /get_server_info 0.4.0+ (an alias
#: since 0.5.6), /get_server_args 0.3.6 and older. The supervisor reads the same order at ready.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info", "/get_server_args")
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")
LOAD_PATHS = ("/v1/loads", "/get_load")

REDACTED = MASK
_NOT_ARGS = frozenset({"version", "internal_states", "startup_time", "launch_command", "status"})
#: server args whose change means another process, even when the version is the same
_IDENTITY_ARGS = ("model_path", "served_model_name", "port", "random_seed", "tp_size", "dp_size")


def redact(args: dict[str, Any]) -> dict[str, Any]:
    """A copy of `args` with secret values (non-empty) masked (storage/redact.py)."""
    redacted: dict[str, Any] = redact_obj(args)
    return redacted


@dataclass(slots=True)
class ServerInfo:
    version: str | None
    server_args: dict[str, Any]
    launch_command: str | None = None
    startup_time: Any = None
    internal_states: list[dict[str, Any]] = field(default_factory=list)

    @property
    def identity(self) -> str:
        """A digest that changes when a different server process answers (a restart).

        SGLang draws `random_seed` per launch unless set, and 0.5.23's startup phase timings
        differ run to run, so a fresh process almost always gets a new identity.
        """
        ident = {
            "version": self.version,
            "launch_command": self.launch_command,
            "startup_time": self.startup_time,
            **{k: self.server_args.get(k) for k in _IDENTITY_ARGS},
        }
        blob = json.dumps(ident, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def version_of(data: dict[str, Any]) -> str | None:
    """The version a server-info JSON names (its `version` string), None when it names none."""
    version = data.get("version")
    return version if isinstance(version, str) else None


def parse_server_info(data: Any) -> ServerInfo:
    """ServerInfo from any era's server-info JSON; raises ValueError if it is not an object."""
    if not isinstance(data, dict):
        raise ValueError("server info is not a JSON object; is this an SGLang server?")
    version = data.get("version")
    states = data.get("internal_states")
    args = {k: v for k, v in data.items() if k not in _NOT_ARGS}
    launch = data.get("launch_command")
    return ServerInfo(
        version=str(version) if version is not None else None,
        server_args=redact(args),
        launch_command=str(launch) if isinstance(launch, str) else None,
        startup_time=data.get("startup_time"),
        internal_states=[s for s in states if isinstance(s, dict)]
        if isinstance(states, list)
        else [],
    )


_MODEL_FIELDS = (
    "model_path",
    "served_model_name",
    "tokenizer_path",
    "is_generation",
    "weight_version",
    "model_type",
    "architectures",
)


def parse_model_info(data: Any) -> dict[str, Any]:
    """The identifying model fields (whatever the version carries)."""
    if not isinstance(data, dict):
        raise ValueError("model info is not a JSON object")
    return {k: data[k] for k in _MODEL_FIELDS if k in data}


#: /v1/loads field -> (series key, aggregation over DP ranks)
_LOAD_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("num_running_reqs", sk.API_NUM_RUNNING_REQS, "sum"),
    ("num_waiting_reqs", sk.API_NUM_WAITING_REQS, "sum"),
    ("num_used_tokens", sk.API_NUM_USED_TOKENS, "sum"),
    ("max_total_num_tokens", sk.API_MAX_TOTAL_NUM_TOKENS, "sum"),
    ("token_usage", sk.API_TOKEN_USAGE, "mean"),
    ("gen_throughput", sk.API_GEN_THROUGHPUT_TOK_S, "sum"),
    ("cache_hit_rate", sk.API_CACHE_HIT_RATE, "mean"),
    ("utilization", sk.API_UTILIZATION, "mean"),
    # /get_load (0.4.7-0.5.20)
    ("num_reqs", sk.API_NUM_REQS, "sum"),
    ("num_tokens", sk.API_NUM_USED_TOKENS, "sum"),
    ("num_pending_tokens", sk.API_NUM_PENDING_TOKENS, "sum"),
)


def parse_loads(data: Any) -> dict[str, float]:
    """`api.*` load values from /v1/loads or /get_load JSON; per-DP detail when DP > 1.

    Counts and tok/s sum over DP ranks, ratios average; `api.<key>.dp<i>` keeps each rank.
    """
    if isinstance(data, dict) and isinstance(data.get("loads"), list):
        ranks = data["loads"]
    elif isinstance(data, list):
        ranks = data
    elif isinstance(data, dict):
        ranks = [data]
    else:
        raise ValueError("load info is neither a list nor an object")
    ranks = [r for r in ranks if isinstance(r, dict)]
    out: dict[str, float] = {}
    for src, key, agg in _LOAD_FIELDS:
        vals = []
        for i, r in enumerate(ranks):
            v = r.get(src)
            if isinstance(v, int | float) and not isinstance(v, bool):
                vals.append((r.get("dp_rank", i), float(v)))
        if not vals:
            continue
        total = sum(v for _, v in vals)
        out[key] = total / len(vals) if agg == "mean" else total
        if len(vals) > 1:
            for rank, v in vals:
                out[f"{key}.dp{rank}"] = v
    return out
