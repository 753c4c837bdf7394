"""vLLM's log collector: follows each server's log file (collectors/log_tail.py: whole lines,
rotation, truncation, only a regular file, a read off the poll's thread under a deadline) and
turns vLLM's lines (log_parse.py) into Samples and Events.

Samples (source ``log``), from the periodic stats line (`Engine 000: Avg prompt throughput: ...`,
every 10 s while the engine is busy):

| key | unit | field | note |
|---|---|---|---|
| log.running_req | requests | `Running: N reqs` | |
| log.queue_req | requests | `Waiting: N reqs` (V0 `Pending`) | |
| log.token_usage | 0-1 | `<device> KV cache usage: X%` (GPU, CPU, XPU, TPU...) | KV *blocks* in use (vLLM's definition) |
| log.gen_throughput_tok_s | tok/s | `Avg generation throughput` | over the 10 s since the last line |
| log.input_throughput_tok_s | tok/s | `Avg prompt throughput` | same |
| log.prefix_cache_hit_rate | 0-1 | `Prefix cache hit rate: X%` | vLLM's: hits ÷ queries over the last 1,000 requests' lookups, not the interval |
| log.retracted_req | requests | `Preemptions: N` (0.32+, only when N > 0) | requests preempted since the last stats line; with a `decode_retract` event |

With data parallelism each engine prints its own line (`Engine 001: ...`): once an engine other
than 0 has printed (remembered in the saved state, so a restart keeps it), each line's values go
under `<key>.dp<i>`, and the server figure under the plain key is written with it: the sum over
every engine's latest line within 60 s (the mean for usage and hit rate); an aggregated line
(`2 Engines Aggregated: ...`) is the server figure as it is.

Events: server_ready (a watched server only: the supervisor reports the ones it starts), oom,
crash (`EngineDeadError`, an engine core that died: the lines several processes write about one
death within 30 s are one event; a ready line starts over), decode_retract (a stats line's
`Preemptions: N`, 0.32+, or V0's preemption warning; `metrics.retracted_requests_per_s` counts
every preemption whatever the release).

Following the file, isolation and the rewind are collectors/log_follow.py's; here the offset past
the last line handed over is saved in the poll and committed with the rows (no grouped event is
held back, so nothing is read twice after a restart and nothing is lost).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from collectors.base import CollectorContext, EventRow, PollResult, SampleRow, ServerTarget
from collectors.log_follow import FollowedLog, LogFollowCollector
from collectors.log_tail import Line, LogTailer
from collectors.vllm.log_parse import VllmRecord, parse_line
from storage import series_keys as sk

#: stats field -> Pitwall key
GAUGES: dict[str, str] = {
    "running_req": sk.LOG_RUNNING_REQ,
    "queue_req": sk.LOG_QUEUE_REQ,
    "kv_cache_usage": sk.LOG_TOKEN_USAGE,
    "gen_throughput": sk.LOG_GEN_THROUGHPUT_TOK_S,
    "prompt_throughput": sk.LOG_INPUT_THROUGHPUT_TOK_S,
    "prefix_cache_hit_rate": sk.LOG_PREFIX_CACHE_HIT_RATE,
}
MEAN_FIELDS = frozenset({"kv_cache_usage", "prefix_cache_hit_rate"})
#: record kind -> event kind
EVENTS = {"server_ready": "server_ready", "oom": "oom", "engine_dead": "crash", "preempt": "decode_retract"}
DP_STALE_S = 60.0  # an engine's last line older than this (log time) is left out of the sum
#: an engine's death is logged by several processes (the API server's output handler, each
#: request's stream): lines of it within this many seconds (log time) are one `crash` event
CRASH_FOLD_S = 30.0


@dataclass
class Memory:
    """One server's memory across polls: each engine's latest values, the last crash line's time."""

    engines: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)  # (field, engine) -> (ts, v)
    last_crash: float | None = None
    several: bool = False  # an engine other than 0 has printed: data parallel, per-engine keys


@dataclass
class _Tail(FollowedLog):
    memory: Memory = field(default_factory=Memory)


def _gauges(rec: VllmRecord, ts: float, memory: Memory, add: Callable[[float, str, float], None]) -> None:
    """One stats line's samples. One engine (or the aggregated line): each value is the server's.
    Data parallel (an engine other than 0 has printed, remembered in the saved state): the line's
    values go under `<key>.dp<i>` and the plain key is the sum (mean for ratios) over every
    engine's latest line within DP_STALE_S, at this line's time."""
    engine = rec.fields.get("engine")
    memory.several = memory.several or (isinstance(engine, int) and engine != 0)
    for name, key in GAUGES.items():
        v = rec.fields.get(name)
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
            continue
        if isinstance(engine, int):
            memory.engines[(name, engine)] = (ts, float(v))
        if not isinstance(engine, int) or not memory.several:
            add(ts, key, float(v))
            continue
        add(ts, f"{key}.dp{engine}", float(v))
        vals = [x for (n, _), (t, x) in memory.engines.items() if n == name and ts - DP_STALE_S <= t <= ts]
        add(ts, key, sum(vals) / len(vals) if name in MEAN_FIELDS else sum(vals))


def records_to_rows(records: list[VllmRecord], server: ServerTarget, now: float,
                    memory: Memory | None = None) -> PollResult:
    """Samples and events of one poll's records of one server (see the module table). Pure
    apart from `memory`, what the server's earlier polls left."""
    memory = Memory() if memory is None else memory
    res = PollResult()
    sid, lid = server.id, server.launch_id

    def add(ts: float, key: str, value: float) -> None:
        res.samples.append(SampleRow(ts, sid, key, value, "log", lid))

    for rec in records:
        ts = rec.timestamp if rec.timestamp is not None else now
        if rec.kind == "stats":
            _gauges(rec, ts, memory, add)
            n = rec.fields.get("preemptions")
            if isinstance(n, int | float) and not isinstance(n, bool) and n > 0:
                add(ts, sk.LOG_RETRACTED_REQ, float(n))
                res.events.append(EventRow(ts, sid, "decode_retract", f"{n:g} requests preempted since the last "
                                           "stats line (their KV blocks taken back; recomputed later)",
                                           raw=rec.raw[:4000], launch_id=lid))
            continue
        if rec.kind == "server_ready":
            memory.last_crash = None  # a new start: its death is news
        kind = EVENTS.get(rec.kind)
        if kind is None or (kind == "server_ready" and server.managed):
            continue  # the supervisor owns lifecycle events of the servers it starts
        if kind == "crash":
            if memory.last_crash is not None and 0 <= ts - memory.last_crash <= CRASH_FOLD_S:
                continue  # another process's line about the same death
            memory.last_crash = ts
        res.events.append(EventRow(ts, sid, kind, rec.message or rec.kind, raw=rec.raw[:4000], launch_id=lid))
    return res


class VLLMLogCollector(LogFollowCollector):
    """vLLM's log on the engine-neutral follower (collectors/log_follow.py: the poll loop, the
    stuck read, the refused path, the rewind); the rows and the saved offset are here."""

    name = "vllm_log"

    def _follow(self, path: str, tailer: LogTailer, saved: dict[str, Any] | None) -> _Tail:
        t = _Tail(path, tailer)
        t.memory.several = bool(saved and saved.get("dp"))  # data parallel, as the last run knew
        return t

    def _rows(self, ctx: CollectorContext, server: ServerTarget, t: _Tail, lines: list[Line]) -> PollResult:
        now = ctx.now()
        stamp = datetime.fromtimestamp(now)
        records = [r for ln in lines if (r := parse_line(ln.data.decode("utf-8", "replace"), stamp))]
        res = records_to_rows(records, server, now, t.memory)
        # a line is one record (no grouped event to hold back): the offset past every line read
        if t.tailer.state is not None:
            state = {**t.tailer.state.to_dict(), "path": t.path, "dp": t.memory.several}
            if state != t.last_saved:
                ctx.save_state(self.state_key(server.id), state)
                t.last_saved = state
        return res
