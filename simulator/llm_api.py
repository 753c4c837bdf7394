"""Request parsing and response shaping of the LLM HTTP API (pure functions, 0.5.23 shapes).

Native ``/generate``: ``{"text", "output_ids", "meta_info"}`` with meta_info as meta_info()
builds it (stream chunks: cumulative ``text`` and ``output_ids``; ``finish_reason`` null until
the last chunk). OpenAI ``/v1/completions`` and
``/v1/chat/completions`` objects and stream chunks with ``usage`` (``prompt_tokens_details``
``{"cached_tokens": N}`` only with --enable-cache-report, else null).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from simulator import tokenizer

DEFAULT_MAX_NEW_TOKENS = 128
DEFAULT_COMPLETION_MAX_TOKENS = 16


class BadRequest(ValueError):
    """The request cannot be served; the message goes to the client with status 400."""


@dataclass
class GenInput:
    input_ids: list[int]
    text: str | None
    max_new_tokens: int
    seed: int | None
    rid: str | None
    grammar_key: tuple[str, str] | None = None
    priority: int | None = None  # the request's `priority` (honoured with --enable-priority-scheduling)  # ("json" | "regex" | "ebnf", spec), SGLang's key
    grammar: Any = None  # the compiled simulator.grammar.Grammar, set by the route
    #: the request log's view of it (simulator/reqlog.py): the client's sampling_params as sent,
    #: and the fields an OpenAI adapter sets (return_text_in_logprobs, modalities, ...)
    logged: dict[str, Any] | None = None
    #: PD: (bootstrap_host, bootstrap_port, bootstrap_room) as the router sent them
    bootstrap: tuple[Any, Any, Any] = (None, None, None)


def grammar_key(sp: dict[str, Any]) -> tuple[str, str] | None:
    """SGLang's grammar key of sampling params (json_schema / regex / ebnf; at most one)."""
    keys = [(k, sp[k]) for k in ("json_schema", "regex", "ebnf") if sp.get(k)]
    if len(keys) > 1:
        raise BadRequest("Only one of json_schema, regex, ebnf, or structural_tag can be set.")
    if not keys:
        return None
    name, value = keys[0]
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string.")
    return ("json" if name == "json_schema" else name, value)


def openai_grammar_key(body: dict[str, Any]) -> tuple[str, str] | None:
    """The grammar key of an OpenAI request: response_format json_schema / json_object, or the
    SGLang extensions `regex` / `ebnf` (protocol.py's to_sampling_params)."""
    sp: dict[str, Any] = {"regex": body.get("regex"), "ebnf": body.get("ebnf")}
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        js = rf.get("json_schema")
        schema = js.get("schema", js.get("schema_")) if isinstance(js, dict) else None
        if schema is None:
            raise BadRequest("schema_ is required for json_schema response format request.")
        sp["json_schema"] = schema if isinstance(schema, str) else json.dumps(schema)
    elif isinstance(rf, dict) and rf.get("type") == "json_object":
        sp["json_schema"] = '{"type": "object"}'
    return grammar_key(sp)


def chat_prompt(messages: list[dict[str, Any]]) -> str:
    """Llama-3-style chat template: shared system prompts give shared token prefixes."""
    out = "<|begin_of_text|>"
    for m in messages:
        content = m.get("content", "")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out += f"<|start_header_id|>{m.get('role', 'user')}<|end_header_id|>\n\n{content}<|eot_id|>"
    return out + "<|start_header_id|>assistant<|end_header_id|>\n\n"


def _max_new(value: Any, default: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or value < 0:
        raise BadRequest(f"max_new_tokens must be a non-negative integer, got {value!r}.")
    return value


def parse_generate(body: Any) -> tuple[list[GenInput], bool, bool]:
    """Native request -> (inputs, is_batch, stream)."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    sp = body.get("sampling_params") or {}
    if isinstance(sp, list):
        sp = sp[0] if sp else {}
    max_new = _max_new(sp.get("max_new_tokens"), DEFAULT_MAX_NEW_TOKENS)
    seed = sp.get("sampling_seed")
    key = grammar_key(sp)
    stream = bool(body.get("stream", False))
    rid = body.get("rid")
    text, ids = body.get("text"), body.get("input_ids")
    if text is None and ids is None:
        raise BadRequest("Either text or input_ids should be provided.")
    items: list[GenInput] = []
    batch = False
    if text is not None:
        texts = text if isinstance(text, list) else [text]
        batch = isinstance(text, list)
        for t in texts:
            items.append(GenInput(tokenizer.encode(str(t)), str(t), max_new, seed, None))
    else:
        if ids and isinstance(ids[0], list):
            batch = True
            lists = ids
        else:
            lists = [ids]
        for li in lists:
            if not li or not all(isinstance(x, int) for x in li):
                raise BadRequest("input_ids must be a non-empty list of integers.")
            items.append(GenInput(list(li), None, max_new, seed, None))
    rids = rid if isinstance(rid, list) else [rid] * len(items)
    prio = body.get("priority")
    for it, r in zip(items, rids, strict=False):
        it.rid = r if isinstance(r, str) else None
        it.priority = prio if isinstance(prio, int) and not isinstance(prio, bool) else None
        it.grammar_key = key
        it.logged = {"sampling_params": dict(sp), "stream": stream}
    rooms = body.get("bootstrap_room")
    for i, it in enumerate(items):  # a batch's scalar room becomes room + i, as io_struct.py does
        room = rooms[i] if isinstance(rooms, list) and i < len(rooms) else (
            rooms + i if isinstance(rooms, int) and not isinstance(rooms, bool) else None)
        it.bootstrap = (body.get("bootstrap_host"), body.get("bootstrap_port"), room)
    return items, batch, stream


def meta_info(*, rid: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int,
              finish_reason: dict[str, Any] | None, num_retractions: int, final: bool,
              e2e_latency: float | None = None, timing: dict[str, float] | None = None,
              final_timing: dict[str, float] | None = None, host_cached: int = 0) -> dict[str, Any]:
    """meta_info in 0.5.23's key order (captured from a real server with --enable-metrics).

    ``timing`` (forward_entry_time, prefill_finished_time, queue_time) and ``final_timing``
    (request_received_ts, first_token_latency, ... on the last chunk; response_sent_to_client_ts
    alone on the first stream chunk) are given only when the server runs --enable-metrics.
    """
    m: dict[str, Any] = {"id": rid, "finish_reason": finish_reason,
                         "prompt_tokens": prompt_tokens, "weight_version": "default",
                         "num_retractions": num_retractions, "storage_prefetch_wait": 0.0,
                         "storage_staging_wait": 0.0}
    if timing:
        m.update(timing)
    m.update(reasoning_tokens=0, completion_tokens=completion_tokens, cached_tokens=cached_tokens)
    if final:
        m["weight_versions"] = [{"version": "default", "start": 0, "end": completion_tokens}]
    m["cached_tokens_details"] = ({"device": cached_tokens - host_cached, "host": host_cached}
                                  if cached_tokens else None)
    m["dp_rank"] = None
    if final and e2e_latency is not None:
        m["e2e_latency"] = e2e_latency
    if final_timing:
        m.update(final_timing)
    return m


def compact_dumps(obj: Any) -> str:
    """orjson-like compact JSON (SGLang answers with ORJSONResponse)."""
    return json.dumps(obj, separators=(",", ":"), default=str)


def json_response(data: Any, *, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=compact_dumps)


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def split_meta_json(meta: dict[str, Any]) -> tuple[str, str]:
    """compact_dumps(meta) cut around the completion_tokens value, for the per-chunk hot path:
    ``head + str(n) + tail`` is the JSON of the same dict with completion_tokens = n."""
    text = compact_dumps({**meta, "completion_tokens": -1})
    head, tail = text.split('"completion_tokens":-1', 1)
    return head + '"completion_tokens":', tail


def native_chunk(*, text: str, ids_json: str, meta_json: str, index: int | None) -> bytes:
    """One /generate stream chunk from pre-serialised parts (same bytes as sse() of the dict)."""
    tail = "" if index is None else f',"index":{index}'
    return (f'data: {{"text":{json.dumps(text)},"output_ids":[{ids_json}],'
            f'"meta_info":{meta_json}{tail}}}\n\n').encode()


def usage(prompt: int, completion: int, cached: int, cache_report: bool, *, chat: bool = False
          ) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": {"cached_tokens": cached} if cache_report else None,
        "reasoning_tokens": 0,
    }
    if chat:
        out["completion_tokens_details"] = None
    return out


def parse_openai(body: Any, *, chat: bool) -> tuple[GenInput, bool, bool, str | None]:
    """OpenAI request -> (input, stream, include_usage, model)."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("messages must be a non-empty list.")
        text = chat_prompt(msgs)
        ids = tokenizer.encode(text)
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        max_new = _max_new(limit, DEFAULT_MAX_NEW_TOKENS)
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            ids, text = list(prompt), None
        else:
            if isinstance(prompt, list):
                prompt = prompt[0] if prompt else ""
            if not isinstance(prompt, str):
                raise BadRequest("prompt must be a string or a list of token ids.")
            text, ids = prompt, tokenizer.encode(prompt)
        max_new = _max_new(body.get("max_tokens"), DEFAULT_COMPLETION_MAX_TOKENS)
    so = body.get("stream_options") or {}
    include_usage = bool(so.get("include_usage")) if isinstance(so, dict) else False
    stream = bool(body.get("stream"))
    # the adapter's sampling params (the keys the simulator acts on; SGLang's adapter sets more)
    sampling = {"temperature": body.get("temperature", 1.0), "max_new_tokens": max_new,
                "ignore_eos": bool(body.get("ignore_eos", False))}
    logged = {"text": None if chat else text, "input_ids": ids if chat or text is None else None,
              "sampling_params": sampling, "stream": stream, "return_text_in_logprobs": True,
              "modalities": [], "received_time": time.perf_counter()}
    prio = body.get("priority")
    return (GenInput(ids, text, max_new, body.get("seed"), None, openai_grammar_key(body), logged=logged,
                     priority=prio if isinstance(prio, int) and not isinstance(prio, bool) else None,
                     bootstrap=(body.get("bootstrap_host"), body.get("bootstrap_port"), body.get("bootstrap_room"))),
            stream, include_usage, body.get("model"))


def completion_obj(*, rid: str, model: str, text: str, finish: str | None,
                   use: dict[str, Any] | None, chat: bool, chunk: bool, first: bool = False
                   ) -> dict[str, Any]:
    """OpenAI object; chat stream chunks carry no ``usage`` key (completion chunks: null)."""
    created = int(time.time())
    if chat:
        if chunk:
            delta: dict[str, Any] = {"reasoning_content": None}
            if first:
                delta.update(role="assistant", content="")
            elif finish is None:
                delta["content"] = text
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                      "finish_reason": finish, "matched_stop": None}
        else:
            choice = {"index": 0,
                      "message": {"role": "assistant", "content": text,
                                  "reasoning_content": None, "tool_calls": None},
                      "logprobs": None, "finish_reason": finish, "matched_stop": None}
        obj = "chat.completion.chunk" if chunk else "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                  "matched_stop": None}
        obj = "text_completion"
    out: dict[str, Any] = {"id": rid, "object": obj, "created": created, "model": model,
                           "choices": [choice]}
    if not (chat and chunk):
        out["usage"] = use
    if not chunk:
        out["metadata"] = {"weight_version": "default"}
    return out


def usage_chunk(*, rid: str, model: str, use: dict[str, Any], chat: bool) -> dict[str, Any]:
    return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [], "usage": use}


def openai_error(message: str, status: int = 400) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": "BadRequestError", "param": None,
            "code": status}
