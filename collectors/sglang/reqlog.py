"""SGLang's own request records as a trace: the `--log-requests` lines of a server log (every
level 0–3, every version 0.4 → 0.5.23) and the per-request JSON lines of
`--export-metrics-to-file` (0.5.6+, `sglang-request-metrics-YYYYMMDD_HH.log`, hourly files).

One request is one `Finish` record (a batch's Receive line names every rid, `rid=['a', 'b']`; each
element finishes on a line of its own); Receive lines add the arrival time and the API where the
Finish record lacks them. Per request:

- **arrival**, best first: `meta_info.request_received_ts` (epoch; with `--enable-metrics` from
  0.5.6, always in 0.5.5); `obj.received_time` when it is an epoch (0.5.7–0.5.9; from 0.5.10 it
  is a monotonic clock value and is ignored); `response_sent_to_client_ts` (`response_sent_ts` in
  0.5.5) minus `e2e_latency` (non-streaming requests, 0.5.6+); the JSON record's `timestamp` of
  the Receive event (0.5.7+, microseconds, local time); the Receive line's bracketed time (whole
  seconds, local time); the Finish line's time minus `e2e_latency`. Local times are read in the
  import's `--tz` (default: this machine's zone). The note says how many requests each source timed.
- **lengths**: `prompt_tokens`, `completion_tokens`, `cached_tokens` of `meta_info` (every version).
- **prefix blocks**: from `input_ids` where the line shows them whole (level 3, or short prompts
  at level 2): a chain hash per block of `block_size` tokens (64 unless `--block-size`); text alone
  (another tokenizer's words) is never turned into blocks.
- **session**: `session_id` (0.5.15+), `session_params['id']`, `conversation_id`, `routing_key`.
- **API**: the `Receive OpenAI:` line before the Receive (0.5.10+, level 2+: `messages` -> chat,
  `prompt` -> completions); else the obj's shape (OpenAI-adapted objs set
  `return_text_in_logprobs=True`; chat ones carry templated `input_ids` and no `text`); else
  generate.
- **sampling**: `sampling_params` where the level keeps it (level 0 drops it).
- **status**: `finish_reason.type == 'abort'` -> aborted (the scheduler aborted it; still traffic).

The server's own warm-up request (sent before its ready line; in the metrics export, known by its
text and parameters) is left out and counted. A Receive that never finishes (the client left, or the request was refused before scheduling) is
counted and left out; a Finish without its Receive (a log begun mid-run) is kept.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from collectors.sglang.launch import READY_LINE
from collectors.sglang.reqlog_repr import (
    ElidedList,
    ElidedStr,
    ReprError,
    parse_call,
    parse_value,
    split_line,
)
from collectors.trace.formats import json_rows
from collectors.trace.model import BadRow, ReadOptions, ReadResult, TraceError, TraceRecord

DEFAULT_BLOCK = 64
WARMUP_TEXT = "The capital city of France is"  # SGLang's own warm-up request (http_server.py)
_SAMPLING_KEYS = ("max_new_tokens", "min_new_tokens", "temperature", "top_p", "top_k", "min_p", "ignore_eos",
                  "stop", "n", "presence_penalty", "frequency_penalty", "repetition_penalty", "json_schema",
                  "regex", "ebnf")
_EPOCH_MIN = 1e9  # 2001: a `received_time` below it is a monotonic clock, not an epoch


def _zone(name: str | None) -> Any:
    if not name:
        return None  # astimezone() with no zone: this machine's local zone
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TraceError(f"--tz {name!r} is not a time zone name (e.g. UTC, Europe/Berlin).") from None


def _local_epoch(stamp: str | None, zone: Any) -> float | None:
    if not stamp:
        return None
    try:
        naive = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return (naive.replace(tzinfo=zone) if zone is not None else naive.astimezone()).timestamp()


def block_hashes(ids: list[int], block: int) -> list[int]:
    """A chain hash per `block` tokens (the last block may be partial): two prompts share the
    first k hashes exactly when they share their first k blocks."""
    out, h = [], b""
    for start in range(0, len(ids), block):
        h = hashlib.blake2b(h + json.dumps(ids[start:start + block]).encode(), digest_size=8).digest()
        out.append(int.from_bytes(h, "big") >> 1)
    return out


@dataclass(slots=True)
class _Received:
    when: float | None
    api: str | None
    obj: dict[str, Any]


@dataclass(slots=True)
class _State:
    options: ReadOptions
    zone: Any
    result: ReadResult
    received: dict[str, _Received] = field(default_factory=dict)
    pending_openai: str | None = None
    clocks: dict[str, int] = field(default_factory=dict)
    elided: int = 0
    ready: bool = True  # False from a server's start to its ready line: its own warm-up requests
    warmups: int = 0


def _api_of_openai(body: Any) -> str | None:
    if isinstance(body, dict):
        if "messages" in body:
            return "chat"
        if "prompt" in body:
            return "completions"
    return None


def _api_of_obj(obj: dict[str, Any]) -> str | None:
    if obj.get("__class__") == "EmbeddingReqInput":
        return "embeddings"
    if obj.get("return_text_in_logprobs") is True:  # set by the OpenAI adapters only
        if "text" not in obj and "input_ids" not in obj:
            return None  # level 0/1 dropped both: chat or completions cannot be told
        return "chat" if obj.get("text") is None else "completions"
    return "generate"


def _pick(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, list) and not isinstance(value, ElidedList) and index < len(value) else value


def _session(obj: dict[str, Any]) -> str | None:
    params = obj.get("session_params")
    for value in (obj.get("session_id"), params.get("id") if isinstance(params, dict) else None,
                  obj.get("conversation_id"), obj.get("routing_key")):
        if value not in (None, ""):
            return str(value)
    return None


def _sampling(obj: dict[str, Any]) -> dict[str, Any] | None:
    params = obj.get("sampling_params")
    if isinstance(params, list):
        params = params[0] if params else None
    if not isinstance(params, dict):
        return None
    kept = {k: params[k] for k in _SAMPLING_KEYS if params.get(k) is not None}
    return kept or None


def _arrival(obj: dict[str, Any], meta: dict[str, Any], received: _Received | None,
             finish_at: float | None, state: _State) -> float | None:
    e2e = meta.get("e2e_latency")
    sent = meta.get("response_sent_to_client_ts", meta.get("response_sent_ts"))
    rt = obj.get("received_time")
    candidates = (
        ("request_received_ts", meta.get("request_received_ts")),
        ("received_time", rt if isinstance(rt, (int, float)) and rt > _EPOCH_MIN else None),
        ("response sent - e2e_latency", sent - e2e if isinstance(sent, (int, float)) and isinstance(e2e, (int, float)) else None),
        ("Receive line time", received.when if received else None),
        ("Finish line time - e2e_latency", finish_at - e2e if finish_at is not None and isinstance(e2e, (int, float)) else None),
        ("Finish line time", finish_at),
    )
    for name, value in candidates:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            state.clocks[name] = state.clocks.get(name, 0) + 1
            return float(value)
    return None


def _record(number: int, obj: dict[str, Any], out: dict[str, Any], finish_at: float | None, state: _State) -> None:
    meta = out.get("meta_info") if isinstance(out, dict) else None
    if not isinstance(meta, dict):
        state.result.bad.append(BadRow(number, "a Finish record without meta_info"))
        return
    prompt = meta.get("prompt_tokens")
    if not isinstance(prompt, int):
        state.result.bad.append(BadRow(number, "a Finish record without prompt_tokens"))
        return
    rid = obj.get("rid", meta.get("id"))
    rid = rid if isinstance(rid, str) else str(meta.get("id"))
    received = state.received.pop(rid, None)
    if not state.ready or _is_warmup(obj):
        state.warmups += 1
        return
    # the Finish obj's fields, with the Receive obj's where the Finish line lacks them or cut them
    source = {**(received.obj if received else {}),
              **{k: v for k, v in obj.items() if not isinstance(v, (ElidedList, ElidedStr))}}
    ids = source.get("input_ids") if isinstance(source.get("input_ids"), list) else None
    if isinstance(ids, ElidedList):
        state.elided += 1
        ids = None
    block = state.options.block_size or DEFAULT_BLOCK
    reason = meta.get("finish_reason")
    completion = meta.get("completion_tokens")
    cached = meta.get("cached_tokens")
    text = source.get("text") if state.options.keep_text and isinstance(source.get("text"), str) else None
    state.result.records.append(TraceRecord(
        line=number, input_tokens=prompt, output_tokens=completion if isinstance(completion, int) else None,
        arrival=_arrival(obj, meta, received, finish_at, state),
        hash_ids=block_hashes(ids, block) if ids and all(isinstance(i, int) for i in ids) else None,
        session=_session(source), api=(received.api if received else None) or _api_of_obj(source),
        sampling=_sampling(source), cached_tokens=cached if isinstance(cached, int) else None,
        status="aborted" if isinstance(reason, dict) and reason.get("type") == "abort" else "ok",
        text=text if type(text) is str else None,  # a prompt printed cut is not kept
        source_latency_s=meta.get("e2e_latency") if isinstance(meta.get("e2e_latency"), (int, float)) else None))


def _is_warmup(obj: dict[str, Any]) -> bool:
    """The request SGLang sends itself before its ready line (http_server's warm-up): this text,
    temperature 0 and max_new_tokens only, not streamed (a record of the metrics export, which
    has no ready line to go by)."""
    text = obj.get("text")
    texts = text if isinstance(text, list) else [text]
    params = obj.get("sampling_params")
    return (bool(texts) and all(t == WARMUP_TEXT for t in texts) and isinstance(params, dict)
            and set(params) == {"temperature", "max_new_tokens"} and params.get("temperature") == 0
            and obj.get("stream") is False)


def _receive(obj: dict[str, Any], when: float | None, state: _State) -> None:
    api = state.pending_openai or _api_of_obj(obj)
    state.pending_openai = None
    rids = obj.get("rid")
    if not isinstance(rids, list):  # one request
        if isinstance(rids, str):
            state.received[rids] = _Received(when, api, obj)
        return
    for i, rid in enumerate(rids):  # a batch: element i of every per-request list
        if isinstance(rid, str):
            state.received[rid] = _Received(when, api, {k: _pick(v, i) for k, v in obj.items()})


def _json_event(number: int, body: str, when: float | None, state: _State) -> None:
    try:
        event = json.loads(body)
    except json.JSONDecodeError as exc:
        state.result.bad.append(BadRow(number, f"a JSON request record that does not parse ({exc.msg})"))
        return
    kind = event.get("event")
    stamp = _local_epoch(event.get("timestamp"), state.zone) if isinstance(event.get("timestamp"), str) else None
    obj = event.get("obj") if isinstance(event.get("obj"), dict) else {}
    if kind == "request.received.openai":
        state.pending_openai = _api_of_openai(obj)
    elif kind == "request.received":
        _receive({**obj, "rid": event.get("rid", obj.get("rid"))}, stamp or when, state)
    elif kind == "request.finished":
        _record(number, {**obj, "rid": event.get("rid", obj.get("rid"))}, event.get("out") or {}, stamp or when, state)


class _RequestLog:
    name = "sglang-log"
    description = "SGLang server log with --log-requests (Receive/Finish lines, any level, 0.4 to 0.5.23)"

    def sniff(self, head: list[str]) -> bool:
        return any(split_line(t)[1] is not None for t in head) or any(
            "server_args=ServerArgs(" in t or " TP0] " in t for t in head)

    def read(self, lines: Iterable[tuple[int, str]], options: ReadOptions) -> ReadResult:
        result = ReadResult(format=self.name, clock="epoch", block_size=options.block_size or DEFAULT_BLOCK)
        state = _State(options=options, zone=_zone(options.tz or os.environ.get("PITWALL_TRACE_TZ")), result=result)
        for number, text in lines:
            result.lines_read = number
            stamp, kind, rest = split_line(text)
            if kind is None:
                if "server_args=ServerArgs(" in rest:
                    state.ready = False  # a server (re)starts: requests until its ready line are its warm-up
                elif READY_LINE in rest:
                    state.ready = True
                continue
            if options.max_requests is not None and len(result.records) >= options.max_requests:
                result.cut_at = number
                break
            when = _local_epoch(stamp, state.zone)
            if kind == "json":
                _json_event(number, rest, when, state)
                continue
            try:
                if kind == "openai":
                    state.pending_openai = _api_of_openai(parse_value(rest.removeprefix("obj=")))
                    continue
                fields = parse_call(rest)
            except ReprError as exc:
                result.bad.append(BadRow(number, f"a {kind.capitalize()} line that cannot be read: {exc}"))
                continue
            obj = fields.get("obj", fields.get("in_"))
            if not isinstance(obj, dict):
                result.bad.append(BadRow(number, f"a {kind.capitalize()} line without obj="))
            elif kind == "receive":
                _receive(obj, when, state)
            else:
                _record(number, obj, fields.get("out") or {}, when, state)
        _finish_notes(state)
        return result


def _finish_notes(state: _State) -> None:
    result = state.result
    if state.warmups:
        result.notes.append(f"{state.warmups} warm-up request(s) the server sent itself before it was ready: left out")
    if state.received:
        result.notes.append(f"{len(state.received)} request(s) received but never finished (the client left, "
                            "or the log ends first): left out")
    if state.clocks:
        result.notes.append("arrival times from " + ", ".join(f"{k} ({v})" for k, v in state.clocks.items()))
    if state.elided:
        result.notes.append(f"{state.elided} prompt(s) printed cut (' ... ', level 2): no prefix blocks for them")
    if result.records and all(r.hash_ids is None for r in result.records):
        result.notes.append("no prompt token ids in the records (level 0-2 or text prompts): prefix sharing unknown, "
                            "cached_tokens kept as the server reported it")


class _MetricsExport:
    name = "sglang-metrics"
    description = "SGLang --export-metrics-to-file JSON lines (sglang-request-metrics-*.log, 0.5.6+)"

    def sniff(self, head: list[str]) -> bool:
        return any(t.startswith("{") and '"request_parameters"' in t[:200] for t in head)

    def read(self, lines: Iterable[tuple[int, str]], options: ReadOptions) -> ReadResult:
        result = ReadResult(format=self.name, clock="epoch", block_size=options.block_size or DEFAULT_BLOCK)
        state = _State(options=options, zone=_zone(options.tz), result=result)
        for number, row in json_rows(lines, result, options):
            params = row.get("request_parameters")
            try:
                obj = json.loads(params) if isinstance(params, str) else (params or {})
            except json.JSONDecodeError as exc:
                result.bad.append(BadRow(number, f"request_parameters is not JSON ({exc.msg})"))
                continue
            if not isinstance(obj, dict):
                result.bad.append(BadRow(number, "request_parameters is not an object"))
                continue
            meta = {k: v for k, v in row.items() if k != "request_parameters"}
            _record(number, obj, {"meta_info": meta}, None, state)
        _finish_notes(state)
        return result


TRACE_FORMATS = {"sglang-log": _RequestLog(), "sglang-metrics": _MetricsExport()}
