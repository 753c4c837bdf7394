"""Pure parsing of streaming responses (the OpenAI API, and an engine's native API through its
NativeApi: collectors/native_api.py), one SSE line at a time.

`StreamParser.feed(line)` takes one raw line of a `text/event-stream` body and returns how many
new output tokens it carried (0 for keep-alives, usage-only chunks, `[DONE]`). The client stamps
the time around it; nothing here reads a clock or a socket.

Shapes handled (the streaming endpoints the probe calls):
- an engine's native API (`--api` named by a registered engine: collectors/engines.py
  `native_apis()`): each chunk is read by the engine's chunk reader (the text so far, whether it is
  new, token counts) and its abort reader (a refused request inside a 200 stream). Token counts
  come from the cumulative completion count the chunk reports (so a chunk carrying several tokens
  counts them all), falling back to 1 per chunk with new text; prompt / cached tokens as it says.
- `/v1/completions` (`choices[0].text`) and `/v1/chat/completions` (`choices[0].delta.content`,
  and the reasoning channel `delta.reasoning_content` / `delta.reasoning`): one token per chunk
  with new text unless per-chunk usage (`continuous_usage_stats`) gives cumulative counts. The final
  usage chunk (`stream_options.include_usage`) gives prompt / completion / cached tokens
  (`usage.prompt_tokens_details.cached_tokens`, only with `--enable-cache-report`).
- `data: [DONE]` ends the stream; `data: {"error": ...}` is a server error mid-stream.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from collectors.engines import native_apis
from collectors.native_api import ChunkReader, NativeApi, as_int
from storage.errors import CollectorError


class InvalidResponse(CollectorError, ValueError):
    """The body is not the SSE / JSON shape the API promises."""


class ServerStreamError(CollectorError, RuntimeError):
    """The server reported an error inside a 200 stream; `kind` is the error kind to record."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


#: the OpenAI API's endpoints the probe speaks itself, by `--api` name (a native API of the same
#: name never shadows them)
OPENAI_PATHS = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
    "images": "/v1/images/generations",
}


def native_api(api: str) -> NativeApi | None:
    """The registered engine's native API called `api`; None for an OpenAI name or an unknown one."""
    return None if api in OPENAI_PATHS else native_apis().get(api)


@dataclass(slots=True)
class StreamParser:
    """Accumulates one streamed response; `feed` returns new tokens per line."""

    api: str
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    native_text: str = ""  # a native API: the output text so far
    counted: int = 0  # tokens counted so far from chunks
    count_cum: int | None = None  # last cumulative completion count seen in a chunk
    tokens_in: int | None = None
    tokens_out: int | None = None  # authoritative total from meta_info / usage
    tokens_cached: int | None = None
    done: bool = False
    visible: bool = False  # some non-empty text arrived
    finish_reason: str | None = None  # "stop" | "length" | "abort" | ... once the server says
    native: NativeApi | None = field(default=None, init=False)  # `api` is an engine's native API
    reader: ChunkReader | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.native = native_api(self.api)
        if self.native is not None:
            self.reader = self.native.chunk_reader()

    def feed(self, line: bytes | str) -> int:
        if isinstance(line, str):
            line = line.encode()
        if not line.startswith(b"data:"):
            return 0  # blank separator, comment, `event:` / `id:` fields
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return 0
        try:
            obj = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise InvalidResponse(f"SSE data is not JSON: {data[:80]!r}") from None
        if not isinstance(obj, dict):
            raise InvalidResponse(f"SSE data is not a JSON object: {data[:80]!r}")
        return self.feed_obj(obj)

    def feed_obj(self, obj: dict[str, Any]) -> int:
        err = obj.get("error")
        if err:
            code = as_int(err.get("code")) if isinstance(err, dict) else None
            msg = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            raise ServerStreamError(f"http_{code}" if code else "server_error", str(msg)[:200])
        if self.native is not None:
            return self._native(self.native, obj)
        return self._openai(obj)

    def _tokens(self, new_text: bool, cumulative: int | None) -> int:
        if cumulative is not None:
            prev = self.count_cum if self.count_cum is not None else self.counted
            self.count_cum = cumulative
            n = max(cumulative - prev, 0)
        else:
            n = 1 if new_text else 0
        self.counted += n
        return n

    def _native(self, api: NativeApi, obj: dict[str, Any]) -> int:
        assert self.reader is not None
        chunk = self.reader(obj)
        if chunk is None:
            raise InvalidResponse(f"{api.path} chunk lacks {api.chunk_fields}.")
        abort = api.read_abort(obj)
        if abort is not None:
            raise ServerStreamError(f"http_{abort[0]}", abort[1][:200])
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason
        self.native_text = chunk.text
        if chunk.new:
            self.visible = True
        self.tokens_in = chunk.prompt_tokens or self.tokens_in
        if chunk.cached_said:
            self.tokens_cached = chunk.cached_tokens
        if chunk.completion_tokens is not None:
            self.tokens_out = chunk.completion_tokens
        return self._tokens(chunk.new, chunk.completion_tokens)

    def _openai(self, obj: dict[str, Any]) -> int:
        choices = obj.get("choices")
        if not isinstance(choices, list):
            raise InvalidResponse("OpenAI chunk lacks a 'choices' list.")
        usage = obj.get("usage")
        cum: int | None = None
        if isinstance(usage, dict):
            self.tokens_in = as_int(usage.get("prompt_tokens")) or self.tokens_in
            cum = as_int(usage.get("completion_tokens"))
            if cum is not None:
                self.tokens_out = cum
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and as_int(details.get("cached_tokens")) is not None:
                self.tokens_cached = as_int(details.get("cached_tokens"))
        new = False
        for ch in choices[:1]:
            if not isinstance(ch, dict):
                raise InvalidResponse("OpenAI choice is not an object.")
            if isinstance(ch.get("finish_reason"), str):
                self.finish_reason = ch["finish_reason"]
            if self.api == "chat":
                delta = ch.get("delta") or ch.get("message") or {}
                content = delta.get("content") if isinstance(delta, dict) else None
                reasoning = (
                    (delta.get("reasoning_content") or delta.get("reasoning"))
                    if isinstance(delta, dict) else None
                )
            else:
                content, reasoning = ch.get("text"), None
            if isinstance(content, str) and content:
                self.content.append(content)
                new = True
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                new = True
        if new:
            self.visible = True
        if not choices:  # usage-only final chunk: totals, no new tokens
            return 0
        return self._tokens(new, cum)

    def output_text(self) -> str:
        if self.native is not None:
            return self.native_text
        return "".join(self.content)

    def output_hash(self) -> str:
        return hash_output(self.output_text(), "".join(self.reasoning))


def hash_output(content: str, reasoning: str = "") -> str:
    """16-hex SHA-256 of the visible output (content, then reasoning after a separator).

    A generation that ends inside a multi-byte character leaves an incomplete UTF-8 sequence:
    one engine holds those bytes back, another shows U+FFFD for them (measured: two engines'
    CPU builds on the same weights, same greedy tokens). Trailing U+FFFD are left out of the
    hash, so the same tokens hash the same on either engine."""
    h = hashlib.sha256(content.rstrip("\ufffd").encode())
    if reasoning:
        h.update(b"\x1e" + reasoning.rstrip("\ufffd").encode())
    return h.hexdigest()[:16]


def parse_image_response(obj: Any) -> tuple[int, str]:
    """(images, output hash) of a `/v1/images/generations` JSON body."""
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list) or not data:
        raise InvalidResponse("Image response lacks a non-empty 'data' list.")
    parts = []
    for item in data:
        if not isinstance(item, dict):
            raise InvalidResponse("Image 'data' item is not an object.")
        parts.append(str(item.get("b64_json") or item.get("url") or item.get("file_path") or ""))
    return len(data), hash_output("\n".join(parts))


def parse_full_response(api: str, obj: Any) -> StreamParser:
    """A non-streamed JSON answer (a server that ignored `stream`), parsed as one chunk."""
    p = StreamParser(api)
    if not isinstance(obj, dict):
        raise InvalidResponse("Response body is not a JSON object.")
    if p.native is None:
        choices = obj.get("choices")
        if isinstance(choices, list):
            obj = obj | {"choices": [
                (c | {"delta": c.get("message")}) if isinstance(c, dict) and "message" in c else c
                for c in choices
            ]}
    p.feed_obj(obj)
    p.done = True
    return p
