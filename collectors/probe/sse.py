"""Pure parsing of streaming responses (the OpenAI API and the engine's native `/generate`), one
SSE line at a time.

`StreamParser.feed(line)` takes one raw line of a `text/event-stream` body and returns how many
new output tokens it carried (0 for keep-alives, usage-only chunks, `[DONE]`). The client stamps
the time around it; nothing here reads a clock or a socket.

Shapes handled (the streaming endpoints the probe calls):
- `/generate`: `data: {"text": ..., "meta_info": {...}}`. `text` is **cumulative** by default and
  incremental with `--incremental-streaming-output`. The mode is read from `output_ids` (all ids
  so far when cumulative, only the new ones when incremental, compared with the cumulative
  `completion_tokens`), else from whether the text extends the text so far. Token counts come from the cumulative
  `meta_info.completion_tokens` (so a chunk carrying several tokens counts them all), falling back
  to 1 per chunk with new text. `prompt_tokens` / `cached_tokens` from `meta_info`.
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

from storage.errors import CollectorError


class InvalidResponse(CollectorError, ValueError):
    """The body is not the SSE / JSON shape the API promises."""


class ServerStreamError(CollectorError, RuntimeError):
    """The server reported an error inside a 200 stream; `kind` is the error kind to record."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _as_int(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


@dataclass(slots=True)
class StreamParser:
    """Accumulates one streamed response; `feed` returns new tokens per line."""

    api: str
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    gen_text: str = ""  # /generate: full text so far
    gen_mode: str | None = None  # /generate: "cum" | "inc" once known
    counted: int = 0  # tokens counted so far from chunks
    count_cum: int | None = None  # last cumulative completion count seen in a chunk
    tokens_in: int | None = None
    tokens_out: int | None = None  # authoritative total from meta_info / usage
    tokens_cached: int | None = None
    done: bool = False
    visible: bool = False  # some non-empty text arrived
    finish_reason: str | None = None  # "stop" | "length" | "abort" | ... once the server says

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
            code = _as_int(err.get("code")) if isinstance(err, dict) else None
            msg = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            raise ServerStreamError(f"http_{code}" if code else "server_error", str(msg)[:200])
        if self.api == "generate":
            return self._generate(obj)
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

    def _generate(self, obj: dict[str, Any]) -> int:
        text = obj.get("text")
        meta = obj.get("meta_info")
        if not isinstance(text, str) or not isinstance(meta, dict):
            raise InvalidResponse("/generate chunk lacks 'text' or 'meta_info'.")
        _abort_error(meta.get("finish_reason"))
        fin = meta.get("finish_reason")
        if isinstance(fin, dict) and isinstance(fin.get("type"), str):
            self.finish_reason = fin["type"]
        cum = _as_int(meta.get("completion_tokens"))
        ids = obj.get("output_ids")
        if self.gen_mode is None and isinstance(ids, list) and cum is not None and cum > 1:
            # cumulative chunks carry every output id so far, incremental ones only the new ids
            self.gen_mode = "cum" if len(ids) == cum else "inc"
        mode = self.gen_mode or ("cum" if text.startswith(self.gen_text) else "inc")
        if mode == "cum":
            new = text != self.gen_text and bool(text)
            self.gen_text = text  # replaces: a held-back partial character may be rewritten
        else:
            new = bool(text)
            self.gen_text += text
        if new:
            self.visible = True
        self.tokens_in = _as_int(meta.get("prompt_tokens")) or self.tokens_in
        self.tokens_cached = _as_int(meta.get("cached_tokens")) if "cached_tokens" in meta else self.tokens_cached
        if cum is not None:
            self.tokens_out = cum
        return self._tokens(new, cum)

    def _openai(self, obj: dict[str, Any]) -> int:
        choices = obj.get("choices")
        if not isinstance(choices, list):
            raise InvalidResponse("OpenAI chunk lacks a 'choices' list.")
        usage = obj.get("usage")
        cum: int | None = None
        if isinstance(usage, dict):
            self.tokens_in = _as_int(usage.get("prompt_tokens")) or self.tokens_in
            cum = _as_int(usage.get("completion_tokens"))
            if cum is not None:
                self.tokens_out = cum
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and _as_int(details.get("cached_tokens")) is not None:
                self.tokens_cached = _as_int(details.get("cached_tokens"))
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
        if self.api == "generate":
            return self.gen_text
        return "".join(self.content)

    def output_hash(self) -> str:
        return hash_output(self.output_text(), "".join(self.reasoning))


def _abort_error(finish: Any) -> None:
    """A /generate chunk whose finish_reason is an abort with a 4xx/5xx `status_code` (the native
    API's stream form of a refused request, e.g. a grammar that does not compile) -> ServerStreamError."""
    if not isinstance(finish, dict) or finish.get("type") != "abort":
        return
    code = _as_int(finish.get("status_code"))
    if code is not None and 400 <= code < 600:
        raise ServerStreamError(f"http_{code}", str(finish.get("message", "aborted"))[:200])


def hash_output(content: str, reasoning: str = "") -> str:
    """16-hex SHA-256 of the visible output (content, then reasoning after a separator)."""
    h = hashlib.sha256(content.encode())
    if reasoning:
        h.update(b"\x1e" + reasoning.encode())
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
    if api != "generate":
        choices = obj.get("choices")
        if isinstance(choices, list):
            obj = obj | {"choices": [
                (c | {"delta": c.get("message")}) if isinstance(c, dict) and "message" in c else c
                for c in choices
            ]}
    p.feed_obj(obj)
    p.done = True
    return p
