"""SGLang 0.5.23's request records: the `--log-requests` lines and the `--export-metrics-to-file`
JSON lines, in the forms its tokenizer manager writes them (srt/utils/request_logger.py,
srt/observability/request_metrics_exporter.py).

- `Receive: obj=GenerateReqInput(...)` when a request arrives, `Finish: obj=GenerateReqInput(...),
  out={...}` when it ends; every field of the request in SGLang's order
  (`sglang_0_5_23_request_fields.json`, read from the real server's line), after a
  `[YYYY-mm-dd HH:MM:SS] ` prefix that never carries milliseconds (the request logger's own
  handler ignores SGLANG_LOG_MS).
- `--log-requests-level` 0: the obj leaves out text, input_ids, input_embeds, image_data,
  video_data, audio_data, lora_path and sampling_params, the out text, output_ids and embedding;
  1: the same but sampling_params stays; 2 (the default): nothing left out, a string longer than
  2048 characters printed as its first and last 1024 (`'…' ... '…'`), a list longer than 2048
  items as its first and last 1024 (`[…] ... […]`); 3: everything whole.
- The Receive obj is the request as received (no input_ids for a text prompt); the Finish obj is
  printed with the level's fields left out as well.
- The metrics export: one JSON object per finished request in
  `<dir>/sglang-request-metrics-YYYYMMDD_HH.log` (local hour, appended): `request_parameters`,
  a JSON string of the obj's fields that are not None (the level's obj fields and image_data,
  video_data, audio_data, input_embeds left out), then every meta_info key.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

_TABLE = json.loads((Path(__file__).with_name("sglang_0_5_23_request_fields.json")).read_text())
FIELDS: list[tuple[str, str | None]] = [(k, v) for k, v in _TABLE["fields"]]
_SKIP_OBJ = {"text", "input_ids", "input_embeds", "image_data", "video_data", "audio_data", "lora_path"}
SKIP_OBJ = {0: _SKIP_OBJ | {"sampling_params"}, 1: _SKIP_OBJ, 2: set(), 3: set()}
SKIP_OUT = {0: {"text", "output_ids", "embedding"}, 1: {"text", "output_ids", "embedding"}, 2: set(), 3: set()}
MAX_LENGTH = {2: 2048}
_EXPORT_SKIP = {"image_data", "video_data", "audio_data", "input_embeds"}


def _render(value: Any, max_length: int | None) -> str:
    if isinstance(value, str):
        if max_length is not None and len(value) > max_length:
            half = max_length // 2
            return f"{value[:half]!r} ... {value[-half:]!r}"
        return repr(value)
    if isinstance(value, (list, tuple)):
        if max_length is not None and len(value) > max_length:
            half = max_length // 2
            return f"{list(value[:half])} ... {list(value[-half:])}"
        return str(list(value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_render(v, max_length)}" for k, v in value.items()) + "}"
    return str(value)


def obj_repr(values: dict[str, Any], level: int) -> str:
    """`GenerateReqInput(...)` of a request: its own values over the table's defaults."""
    skip, max_length = SKIP_OBJ.get(level, set()), MAX_LENGTH.get(level)
    parts = []
    for name, default in FIELDS:
        if name in skip:
            continue
        parts.append(f"{name}={_render(values[name], max_length) if name in values else default}")
    return "GenerateReqInput(" + ", ".join(parts) + ")"


def out_repr(out: dict[str, Any], level: int) -> str:
    skip = SKIP_OUT.get(level, set())
    return _render({k: v for k, v in out.items() if k not in skip}, MAX_LENGTH.get(level))


def receive_line(values: dict[str, Any], level: int) -> str:
    return f"Receive: obj={obj_repr(values, level)}"


def finish_line(values: dict[str, Any], out: dict[str, Any], level: int) -> str:
    return f"Finish: obj={obj_repr(values, level)}, out={out_repr(out, level)}"


def prefix(now: float | None = None) -> str:
    return time.strftime("[%Y-%m-%d %H:%M:%S] ", time.localtime(now))


def _default(raw: str | None) -> Any:
    """A table default as a value (its repr read back: None, True/False, numbers, quoted text)."""
    if raw is None or raw == "None":
        return None
    if raw in ("True", "False"):
        return raw == "True"
    try:
        return json.loads(raw.replace("'", '"'))
    except ValueError:
        return raw


class MetricsExport:
    """`--export-metrics-to-file`: one JSON line per finished request, one file per local hour."""

    def __init__(self, folder: str, level: int) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.level = level

    def write(self, values: dict[str, Any], meta: dict[str, Any]) -> None:
        skip = SKIP_OBJ.get(self.level, set()) | _EXPORT_SKIP
        params = {}
        for name, default in FIELDS:
            if name in skip:
                continue
            value = values[name] if name in values else _default(default)
            if value is not None:
                params[name] = value
        record = {"request_parameters": json.dumps(params), **meta}
        path = self.folder / time.strftime("sglang-request-metrics-%Y%m%d_%H.log")
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
