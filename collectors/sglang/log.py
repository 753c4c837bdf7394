"""SGLang scheduler-log collector: follows each server's log file, writes Samples and Events.

Owns turning log records into Pitwall rows. The grammar is in log_parse.py (one line),
log_stream.py (grouped events) and the file following in collectors/log_tail.py; this module
re-exports the public parsing API: `parse_line`, `parse_stream`, `LogRecord`, `LogTailer`.

Samples (source ``log``; one per record unless said otherwise; missing field = no sample):

| key | unit | meaning | cross-check |
|---|---|---|---|
| log.running_req | requests | `#running-req` (decode and prefill lines); avg/max batch size come from its rollup | `grep -o '#running-req: [0-9]*'` |
| log.queue_req | requests | `#queue-req` (0.1.14 `#remaining_req`) | `grep -o '#queue-req: [0-9]*'` |
| log.token_usage | ratio 0-1 | `token usage`: KV pool fraction in use | `/metrics` `sglang:token_usage` |
| log.num_token | tokens | `#token`: KV tokens in use | `token usage` × pool size |
| log.gen_throughput_tok_s | tokens/s | `gen throughput (token/s)` since the previous decode line | `/metrics` `sglang:gen_throughput` |
| log.input_throughput_tok_s | tokens/s | `input throughput (token/s)` (0.4.8 PD, 0.5.9+) | |
| log.pending_token | tokens | `#pending-token` (0.5.11+) | |
| log.accept_len | tokens/step | speculative `accept len` | `/metrics` `sglang:spec_accept_length` |
| log.accept_rate | ratio 0-1 | speculative `accept rate` (0.5.4+) | |
| log.full_token_usage, log.swa_token_usage, log.mamba_usage | ratio 0-1 | hybrid-model pools | |
| log.prealloc_req, log.transfer_req, log.inflight_req, log.bootstrap_req, log.unbootstrapped_req, log.transferring_req | requests | PD-disaggregation queues | |
| log.retracted_queue_req | requests | PD-decode `#retracted-req` (a queue length) | |
| log.prefill_new_token | tokens | `#new-token` of one prefill batch (computed tokens) | |
| log.prefill_cached_token | tokens | `#cached-token` of one prefill batch (radix-cache hits) | |
| log.prefill_new_seq | requests | `#new-seq` of one prefill batch | |
| log.cache_hit_rate | ratio 0-1 | Σcached ÷ Σ(cached + new) over the prefill lines of one poll, split into windows of at most 10 s of log time; only when the sum > 0; ts = last line of the window | recompute from the two series above |
| log.cache_hit_rate_lifetime | ratio 0-1 | `cache hit rate: X%` ÷ 100 as printed ≤ 0.4.3 (cumulative since start) | |
| log.retracted_req | requests | requests retracted by one `decode_retract` event | `grep -c 'Retract requests\\|out of memory happened'` |
| log.fsm_cache_hit_rate, log.ff_cache_hit_rate | ratio 0-1 | 0.1.x FSM / fast-forward cache hit rate (% ÷ 100, cumulative) | `grep fsm_cache_hit_rate` |
| log.fsm_cache_avg_init_s, log.ff_cache_avg_init_s | s | 0.1.x mean FSM / fast-forward cache init time | |
| log.diffusion.stage_s.<Stage> | s | one request's time in pipeline stage `<Stage>` (name as written: TextEncodingStage, DenoisingStage, DecodingStage, ...) | `grep '] finished in'` |
| log.diffusion.step_s | s/step | average denoising step time of one request (`average time per step`) | `DenoisingStage` seconds ÷ steps |
| log.diffusion.request_s | s | `Pixel data generated successfully in X seconds` (one request, forward + output) | response `inference_time_s` |
| log.diffusion.batch_s, log.diffusion.batch_outputs | s, outputs | `Completed batch processing. Generated N outputs in X seconds` | |
| log.diffusion.warmed_request_s | s | `Warmed-up request processed in X seconds (with warmup excluded)` | |
| log.diffusion.peak_mem_gb | GiB | `Peak GPU memory: X GB` (older `Peak memory usage: X MB` ÷ 1024) — peak CUDA memory of one request | response `peak_memory_mb` ÷ 1024 |
| log.diffusion.remaining_mem_gb | GiB | `Remaining GPU memory at peak: Y GB` (card total − peak; the headroom) | `nvidia-smi --query-gpu=memory.total` − peak |
| log.diffusion.peak_allocated_gb | GiB | `Peak allocated: A GB` (newer form; reserved − allocated = pool overhead) | |
| log.diffusion.batch_max_peak_mem_gb, log.diffusion.batch_avg_peak_mem_gb | GiB | `Memory usage - Max peak: X MB, Avg peak: Y MB` ÷ 1024 (offline `sglang generate`) | |

**Multi-DP logs** (``[... DP1 TP8]``: each DP rank prints its own lines): a gauge from a line
with a DP rank is written per rank with suffix ``.dp<d>`` (``log.running_req.dp1``), and once
per poll the server figure under the plain key: the sum over DP ranks of each rank's latest
value (seen within the last 60 s of log time) for counts and throughputs, the mean for ratios
(``token_usage``, ``*_usage``, ``accept_*``). Per-batch token counts (``log.prefill_*``) are
additive and always go under the plain key. Other ranks (TP/PP/EP) do not split series.

Warm-up requests: SGLang logs no stage/step lines for them (`req.suppress_logs`) and the lines
carry no warm-up marker, so every diffusion sample above is a user request as far as the log
can tell; /metrics splits warm-up by its `is_warmup` label (metrics.py).

Events (EventRow, raw excerpt included): server_ready, oom, prefill_oom, decode_retract,
nccl_timeout, crash (a traceback grouped into one event; an OOM that ends it is also an `oom`),
warmup_failed, bad_cli_flag, port_in_use, health_check_failed.

**Timestamps**: a prefix with a date (``YYYY-MM-DD HH:MM:SS[.mmm]``) is SGLang's asctime, the
server host's local time; it is read as the local time of the runner (same host, or same TZ —
the assumption). An ISO time with ``Z``/offset is read as such. The diffusion form
``MM-DD HH:MM:SS`` takes the year of ctx.now() (last year if that puts it > 1 day ahead).
Time-only prefixes (0.2.14-0.3.3) and lines without prefix get ctx.now().

**No loss, no double count.** The state saved per server (key ``sglang_log:<id>:tail``) is the
file identity and the offset just past the last line whose rows this poll returns — or, while a
grouped event is still open, the offset of its first line, so a restart re-reads the group
instead of losing it. save_state is called inside poll with exactly that offset; the runner
commits it in the same transaction as the rows. So a kill before the commit loses both and the
lines are read again; a kill after loses neither. Each poll also compares ctx.load_state with
what it last saved and, if the runner did not commit it, rewinds to the stored offset. Lines
are lost only if a file is rotated AND the rotated file is gone (not next to the path) while the
runner was down; an unterminated last line is read when its newline arrives (or when rotation
ends the file).

**What a log path may be, and isolation**: only a regular file, opened without following a
symlink at its last component and never blocking (collectors/log_tail.py says why and what is refused). A
refused path, an unreadable one, a read slower than `read_deadline_s` (2 s; a hung mount) or a
failure while parsing one server's lines is ONE `collector_error` per server per episode (again
only after a clean read, or when the problem changes), naming the server, the path and what to
do; the other servers' rows come back in the same poll. Each server's read runs in its own
daemon thread, so a read stuck in the kernel holds only that server.

**Drift**: a relaunch or an upgrade whose batch lines lost a field the previous launch wrote in
every one of them (a renamed `#running-req`), or whose batch lines no longer parse at all, is one
`metric_drift` event for the launch naming the field and what read it (collectors/sglang/log_forms.py).

**Backfill**: a server seen for the first time (no saved state) is read from the start of its
log (`start_at_end=True` reads only new lines), at most `max_bytes_per_poll` (4 MiB, ~30k
lines) per poll, so a large existing log is ingested over several polls without stalling others.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from collectors.base import CollectorContext, EventRow, PollResult, SampleRow, ServerTarget
from collectors.log_follow import READ_DEADLINE_S, FollowedLog, LogFollowCollector
from collectors.log_tail import Line, LogTailer, TailState
from collectors.sglang import log_forms
from collectors.sglang.log_parse import LogRecord, parse_line
from collectors.sglang.log_stream import ParseStats, StreamParser, parse_stream
from storage import series_keys as sk

__all__ = ["LogRecord", "LogTailer", "SGLangLogCollector", "parse_line", "parse_stream",
           "log_ts", "records_to_rows"]

GAUGES: dict[str, str] = {
    "running_req": sk.LOG_RUNNING_REQ,
    "queue_req": sk.LOG_QUEUE_REQ,
    "token_usage": sk.LOG_TOKEN_USAGE,
    "num_token": sk.LOG_NUM_TOKEN,
    "gen_throughput": sk.LOG_GEN_THROUGHPUT_TOK_S,
    "input_throughput": sk.LOG_INPUT_THROUGHPUT_TOK_S,
    "pending_token": sk.LOG_PENDING_TOKEN,
    "accept_len": sk.LOG_ACCEPT_LEN,
    "accept_rate": sk.LOG_ACCEPT_RATE,
    "full_token_usage": sk.LOG_FULL_TOKEN_USAGE,
    "swa_token_usage": sk.LOG_SWA_TOKEN_USAGE,
    "mamba_usage": sk.LOG_MAMBA_USAGE,
    "prealloc_req": sk.LOG_PREALLOC_REQ,
    "transfer_req": sk.LOG_TRANSFER_REQ,
    "inflight_req": sk.LOG_INFLIGHT_REQ,
    "bootstrap_req": sk.LOG_BOOTSTRAP_REQ,
    "unbootstrapped_req": sk.LOG_UNBOOTSTRAPPED_REQ,
    "transferring_req": sk.LOG_TRANSFERRING_REQ,
    "retracted_req": sk.LOG_RETRACTED_QUEUE_REQ,
}
#: DP aggregation by mean instead of sum.
MEAN_FIELDS = frozenset({"token_usage", "accept_len", "accept_rate", "full_token_usage",
                         "swa_token_usage", "mamba_usage"})
PREFILL_COUNTS = {"new_token": sk.LOG_PREFILL_NEW_TOKEN, "cached_token": sk.LOG_PREFILL_CACHED_TOKEN,
                  "new_seq": sk.LOG_PREFILL_NEW_SEQ}
#: diffusion record kind -> ((field, metric, scale), ...); `stage` names the stage metric
DIFFUSION_SAMPLES: dict[str, tuple[tuple[str, str, float], ...]] = {
    "diffusion_stage": (("seconds", sk.LOG_DIFFUSION_STAGE_PREFIX, 1.0),),
    "diffusion_step": (("avg_step_s", sk.LOG_DIFFUSION_STEP_S, 1.0),),
    "diffusion_request": (("seconds", sk.LOG_DIFFUSION_REQUEST_S, 1.0),),
    "diffusion_batch": (("seconds", sk.LOG_DIFFUSION_BATCH_S, 1.0),
                        ("outputs", sk.LOG_DIFFUSION_BATCH_OUTPUTS, 1.0)),
    "diffusion_warmed_up": (("seconds", sk.LOG_DIFFUSION_WARMED_REQUEST_S, 1.0),),
    "diffusion_memory": (("peak_gb", sk.LOG_DIFFUSION_PEAK_MEM_GB, 1.0),
                         ("peak_mb", sk.LOG_DIFFUSION_PEAK_MEM_GB, 1 / 1024),
                         ("remaining_gb", sk.LOG_DIFFUSION_REMAINING_MEM_GB, 1.0),
                         ("peak_allocated_gb", sk.LOG_DIFFUSION_PEAK_ALLOCATED_GB, 1.0)),
    "diffusion_batch_memory": (("max_peak_mb", sk.LOG_DIFFUSION_BATCH_MAX_PEAK_MEM_GB, 1 / 1024),
                               ("avg_peak_mb", sk.LOG_DIFFUSION_BATCH_AVG_PEAK_MEM_GB, 1 / 1024)),
    "fsm_cache": (("fsm_cache_hit_rate", sk.LOG_FSM_CACHE_HIT_RATE, 0.01),
                  ("ff_cache_hit_rate", sk.LOG_FF_CACHE_HIT_RATE, 0.01),
                  ("fsm_cache_avg_init_time_s", sk.LOG_FSM_CACHE_AVG_INIT_S, 1.0),
                  ("ff_cache_avg_init_time_s", sk.LOG_FF_CACHE_AVG_INIT_S, 1.0)),
}
HIT_WINDOW_S = 10.0
DP_STALE_S = 60.0
#: Polls without new lines after which an open traceback group is closed.
IDLE_FLUSH_POLLS = 2

_ts_cache: dict[str, float | None] = {}


def log_ts(ts: str | None, now: float) -> float | None:
    """Epoch seconds of a prefix timestamp (see the module docstring), None when it has no date."""
    if not ts or len(ts) < 14:
        return None  # time only: no date
    hit = _ts_cache.get(ts)
    if hit is not None:
        return hit
    try:
        if ts[2] == "-":  # diffusion MM-DD HH:MM:SS
            year = time.localtime(now).tm_year
            v = datetime.strptime(f"{year}-{ts}", "%Y-%m-%d %H:%M:%S").timestamp()
            if v > now + 86400:
                v = datetime.strptime(f"{year - 1}-{ts}", "%Y-%m-%d %H:%M:%S").timestamp()
            return v  # not cached: depends on now
        iso = ts.replace(",", ".").replace(" ", "T", 1)
        if iso.endswith("Z"):
            iso = iso[:-1] + "+00:00"
        v = datetime.fromisoformat(iso).timestamp()  # naive = local time
    except (ValueError, OverflowError, OSError):
        return None
    if len(_ts_cache) > 4096:
        _ts_cache.clear()
    _ts_cache[ts] = v
    return v


@dataclass(slots=True)
class _Aggregates:
    """Per-server memory across polls: latest value per (field, dp rank)."""

    dp_last: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)


def records_to_rows(records: list[LogRecord], server: ServerTarget, now: float,
                    agg: _Aggregates | None = None) -> PollResult:
    """Samples and events for one poll's records of one server (pure; see the module table)."""
    agg = agg if agg is not None else _Aggregates()
    res = PollResult()
    sid, lid = server.id, server.launch_id
    samples = res.samples
    hit: dict[int, list[float]] = {}  # window -> [cached, new, last ts]
    dirty: set[str] = set()

    def add(ts: float, metric: str, value: float) -> None:
        samples.append(SampleRow(ts, sid, metric, float(value), "log", lid))

    for rec in records:
        ts = log_ts(rec.timestamp, now) or now
        f = rec.fields
        if rec.kind in ("prefill", "decode"):
            dp = rec.ranks.get("dp")
            for name, metric in GAUGES.items():
                v = f.get(name)
                if v is None or isinstance(v, bool):
                    continue
                if dp is None:
                    add(ts, metric, v)
                else:
                    add(ts, f"{metric}.dp{dp}", v)
                    agg.dp_last[(name, dp)] = (ts, float(v))
                    dirty.add(name)
            if rec.kind == "prefill":
                for name, metric in PREFILL_COUNTS.items():
                    v = f.get(name)
                    if v is not None and not isinstance(v, bool):
                        add(ts, metric, v)
                cached, new = f.get("cached_token"), f.get("new_token")
                if isinstance(cached, int) and isinstance(new, int):
                    w = hit.setdefault(int(ts // HIT_WINDOW_S), [0.0, 0.0, ts])
                    w[0] += cached
                    w[1] += new
                    w[2] = max(w[2], ts)
                life = f.get("cache_hit_rate")
                if isinstance(life, (int, float)) and not isinstance(life, bool):
                    add(ts, sk.LOG_CACHE_HIT_RATE_LIFETIME, life / 100.0)
            continue
        table = DIFFUSION_SAMPLES.get(rec.kind)
        if table is not None:
            for name, metric, scale in table:
                v = f.get(name)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    if rec.kind == "diffusion_stage":
                        metric = sk.stage_key(f"{f.get('stage')}")
                    add(ts, metric, v * scale)
            continue
        if rec.kind == "decode_retract" and "retracted_req" in f:
            add(ts, sk.LOG_RETRACTED_REQ, f["retracted_req"])
        if rec.kind == "server_ready" and server.managed:
            continue  # the supervisor owns lifecycle events of the servers it starts (one per start)
        res.events.append(EventRow(ts, sid, rec.kind, rec.message or rec.kind, raw=rec.raw, launch_id=lid))
    for cached, new, last in hit.values():
        if cached + new > 0:
            add(last, sk.LOG_CACHE_HIT_RATE, cached / (cached + new))
    for name in sorted(dirty):
        latest = max(t for (n, _), (t, _) in agg.dp_last.items() if n == name)
        vals = [v for (n, _), (t, v) in agg.dp_last.items()
                if n == name and t >= latest - DP_STALE_S]
        value = sum(vals) / len(vals) if name in MEAN_FIELDS else sum(vals)
        if math.isfinite(value):
            add(latest, GAUGES[name], value)
    return res


@dataclass
class _ServerTail(FollowedLog):
    parser: StreamParser = field(default_factory=lambda: StreamParser(ParseStats()))
    agg: _Aggregates = field(default_factory=_Aggregates)
    idle_polls: int = 0


class SGLangLogCollector(LogFollowCollector):
    """SGLang's log on the engine-neutral follower (collectors/log_follow.py: the poll loop, the
    stuck read, the refused path, the rewind); the rows and the committed offset are here."""

    name = "sglang_log"

    def __init__(self, *, max_bytes_per_poll: int = 4 << 20, start_at_end: bool = False,
                 read_deadline_s: float = READ_DEADLINE_S) -> None:
        #: a server seen for the first time is read from its beginning (backfill with the
        #: prefix timestamps) unless start_at_end
        super().__init__(max_bytes_per_poll=max_bytes_per_poll, start_at_end=start_at_end,
                         read_deadline_s=read_deadline_s)
        self.dependents: Callable[[Iterable[str]], list[str]] | None = None

    def set_dependents(self, resolve: Callable[[Iterable[str]], list[str]]) -> None:
        """What reads a Pitwall key (present/dependents.py), for the log-form drift event."""
        self.dependents = resolve

    def _follow(self, path: str, tailer: LogTailer, saved: dict[str, Any] | None) -> _ServerTail:
        return _ServerTail(path, tailer)

    def _rows(self, ctx: CollectorContext, server: ServerTarget, s: _ServerTail,
              lines: list[Line]) -> PollResult:
        records: list[LogRecord] = []
        parser = s.parser
        for ln in lines:
            recs = parser.feed_raw(ln.data, ln.line_no, ln)
            if recs:
                records.extend(recs)
        if lines:
            s.idle_polls = 0
        elif parser.busy:
            s.idle_polls += 1
            if s.idle_polls >= IDLE_FLUSH_POLLS:
                records.extend(parser.flush())  # the writer went quiet: the group is whole
        now = ctx.now()
        res = records_to_rows(records, server, now, s.agg)
        self._forms(ctx, server, records, lines, now, res)
        state = self._committed_state(s)
        if state is not None and state != s.last_saved:
            ctx.save_state(self.state_key(server.id), state)
            s.last_saved = state
        return res

    def _forms(self, ctx: CollectorContext, server: ServerTarget, records: list[LogRecord], lines: list[Line],
               now: float, res: PollResult) -> None:
        """The log-form drift guard (log_forms.py): this poll's batch records into the launch's
        catalogue; one `metric_drift` event when a relaunch lost a steady field."""
        batch = log_forms.batch_records(records)
        unread = log_forms.unread_lines(log_forms.batch_lines([ln.data for ln in lines]), batch)
        key = f"{self.name}:{server.id}:forms"
        before = ctx.load_state(key)
        after, drift = log_forms.step(before, server.launch_id, batch, unread)
        if after != before:
            ctx.save_state(key, after)
        if drift:
            res.events.append(log_forms.form_event(server, drift, now, self.dependents, {**GAUGES, **PREFILL_COUNTS}))

    def _committed_state(self, s: _ServerTail) -> dict[str, Any] | None:
        """The offset matching the rows returned: before a held group, else after all lines."""
        pending = s.parser.pending_pos
        if isinstance(pending, Line):
            st = TailState(pending.dev, pending.ino, pending.start,
                           s.tailer.head_of(pending.dev, pending.ino), pending.line_no - 1)
        else:
            cur = s.tailer.state
            if cur is None:
                return None
            st = TailState(cur.dev, cur.ino, cur.offset, cur.head, cur.line_no, cur.skipping)
        d = st.to_dict()
        d["path"] = s.path
        return d
