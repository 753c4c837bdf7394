"""An engine's native generation API as the probe speaks it: `NativeApi` (an Engine's
`native_api`, collectors/base.py), what one request asks (`NativeRequest`) and what one stream
chunk says (`NativeChunk`), in the probe's words.

The probe (collectors/probe/) speaks the OpenAI API itself and an engine's native API only
through this description: `name` is the probe's `--api` value, `path` the URL path it POSTs to,
`build_body(request)` the JSON body of one streamed request, `chunk_reader()` a new reader for
one stream, and `read_abort(chunk)` the error a chunk reports in place of output. Readers return
values and never raise for a bad chunk (the probe turns None into its own `invalid_response`), so
an engine's folder never imports the probe. The engines' native APIs by name:
collectors/engines.py `native_apis()`.

A stream is server-sent events (`data: <JSON object>` lines, `data: [DONE]` at the end); the
probe splits the lines, decodes the JSON and hands each object to the reader. Token counts are
output tokens of the request as the engine counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class NativeRequest:
    """One streamed generation request, in the probe's terms.

    sampling: the workload's sampling parameters as set (temperature, and top_p / top_k / stop
    when given), in that order; constraint: (kind, the constraint as sent) of a structured run,
    kind one of "json-schema" | "regex" | "ebnf" (collectors/probe/structured.py), else None.
    """

    text: str
    max_new_tokens: int
    sampling: dict[str, Any] = field(default_factory=dict)
    ignore_eos: bool = False
    constraint: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class NativeChunk:
    """What one chunk of a native stream says.

    text: the whole output text so far, after this chunk (an engine that resends the text may
    rewrite its tail, e.g. a partial character held back); new: whether the chunk carried new
    output text. prompt_tokens / completion_tokens: the request's input tokens and its output
    tokens so far (cumulative), None when the chunk does not say; cached_tokens: input tokens
    served from the prefix cache, meaningful only when `cached_said` (None there: unknown).
    finish_reason: why generation ended ("stop", "length", "abort", ...), None while it goes on.
    """

    text: str
    new: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cached_said: bool = False
    finish_reason: str | None = None


class ChunkReader(Protocol):
    """Reads one stream's chunks in order (it may keep what earlier chunks said); None for a
    chunk that is not of the API's shape."""

    def __call__(self, chunk: dict[str, Any]) -> NativeChunk | None: ...


@dataclass(frozen=True, slots=True)
class NativeApi:
    """An engine's native generation API (see the module docstring).

    read_abort(chunk) -> (HTTP status code, message) when the chunk reports a refused or failed
    request in place of output, else None. chunk_fields: what a chunk must carry, for the probe's
    message about one that does not (e.g. "'text' or 'meta_info'").
    """

    name: str
    path: str
    build_body: Callable[[NativeRequest], dict[str, Any]]
    chunk_reader: Callable[[], ChunkReader]
    read_abort: Callable[[dict[str, Any]], tuple[int, str] | None]
    chunk_fields: str


def as_int(value: Any) -> int | None:
    """An integer a chunk reports (an int, or a float the JSON encoder wrote), else None."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
