"""SGLang's native `/generate` API as the probe speaks it (`GENERATE`, a NativeApi of
collectors/native_api.py; the probe's `--api generate`).

Request body (one streamed request):
`{"text": ..., "sampling_params": {<sampling>, "max_new_tokens": n, <constraint>, "ignore_eos": true}, "stream": true}`;
a structured run's constraint goes inside `sampling_params`: `json_schema` (the schema as a JSON
string), `regex` or `ebnf`. (SGLang also takes `input_ids` in place of `text`; the probe sends text.)

Stream chunks: `data: {"text": ..., "output_ids": [...], "meta_info": {...}}`. `text` is
**cumulative** by default and incremental with `--incremental-streaming-output`. The mode is read
from `output_ids` (all ids so far when cumulative, only the new ones when incremental, compared
with the cumulative `completion_tokens`), else from whether the text extends the text so far.
`meta_info` carries `prompt_tokens`, the cumulative `completion_tokens`, `cached_tokens` and
`finish_reason` (`{"type": "stop" | "length" | "abort", ...}` once finished).

A refused request (e.g. a grammar that does not compile) can arrive as a 200 stream whose chunk
says `finish_reason: {"type": "abort", "status_code": 4xx/5xx, "message": ...}`: `read_abort`
returns that code and message.
"""

from __future__ import annotations

from typing import Any

from collectors.native_api import NativeApi, NativeChunk, NativeRequest, as_int

#: a structured run's constraint kind -> its sampling_params key
CONSTRAINT_KEYS = {"json-schema": "json_schema", "regex": "regex", "ebnf": "ebnf"}
MAX_MESSAGE = 200  # characters of an abort's message kept


def build_body(req: NativeRequest) -> dict[str, Any]:
    """The `/generate` body of one streamed request (see the module docstring)."""
    sp = req.sampling | {"max_new_tokens": req.max_new_tokens}
    if req.constraint is not None:
        kind, wire = req.constraint
        sp[CONSTRAINT_KEYS[kind]] = wire
    if req.ignore_eos:
        sp["ignore_eos"] = True
    return {"text": req.text, "sampling_params": sp, "stream": True}


class GenerateReader:
    """Reads one `/generate` stream: keeps the text so far and whether the chunks are cumulative."""

    __slots__ = ("text", "mode")

    def __init__(self) -> None:
        self.text = ""
        self.mode: str | None = None  # "cum" | "inc" once known

    def __call__(self, chunk: dict[str, Any]) -> NativeChunk | None:
        text = chunk.get("text")
        meta = chunk.get("meta_info")
        if not isinstance(text, str) or not isinstance(meta, dict):
            return None
        fin = meta.get("finish_reason")
        cum = as_int(meta.get("completion_tokens"))
        ids = chunk.get("output_ids")
        if self.mode is None and isinstance(ids, list) and cum is not None and cum > 1:
            # cumulative chunks carry every output id so far, incremental ones only the new ids
            self.mode = "cum" if len(ids) == cum else "inc"
        mode = self.mode or ("cum" if text.startswith(self.text) else "inc")
        if mode == "cum":
            new = text != self.text and bool(text)
            self.text = text  # replaces: a held-back partial character may be rewritten
        else:
            new = bool(text)
            self.text += text
        return NativeChunk(
            text=self.text, new=new, prompt_tokens=as_int(meta.get("prompt_tokens")),
            completion_tokens=cum, cached_tokens=as_int(meta.get("cached_tokens")),
            cached_said="cached_tokens" in meta,
            finish_reason=fin["type"] if isinstance(fin, dict) and isinstance(fin.get("type"), str) else None,
        )


def read_abort(chunk: dict[str, Any]) -> tuple[int, str] | None:
    """(status code, message) of a chunk whose finish_reason is an abort with a 4xx/5xx
    `status_code`; None for any other chunk."""
    meta = chunk.get("meta_info")
    finish = meta.get("finish_reason") if isinstance(meta, dict) else None
    if not isinstance(finish, dict) or finish.get("type") != "abort":
        return None
    code = as_int(finish.get("status_code"))
    if code is None or not 400 <= code < 600:
        return None
    return code, str(finish.get("message", "aborted"))[:MAX_MESSAGE]


GENERATE = NativeApi(
    name="generate",
    path="/generate",
    build_body=build_body,
    chunk_reader=GenerateReader,
    read_abort=read_abort,
    chunk_fields="'text' or 'meta_info'",
)
