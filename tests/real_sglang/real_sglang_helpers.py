"""Pure helpers of the `real_sglang` tier (SSE parsing, log-line shapes) plus the path-loaded
stdlib server helper scripts/sglang_cpu/real_server.py (`rs`).

Imported by the tier's conftest and test modules as `real_sglang_helpers` (pytest puts this
directory on sys.path; there is no package).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _load_real_server_module() -> ModuleType:
    # scripts/ is not a package; load the shared stdlib helper by path.
    path = REPO / "scripts" / "sglang_cpu" / "real_server.py"
    spec = importlib.util.spec_from_file_location("pitwall_sglang_cpu_real_server", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


rs = _load_real_server_module()


def parse_sse(raw: bytes) -> list[str]:
    """Payloads of `data: ...` events in order (including the final `[DONE]`)."""
    events = raw.decode().split("\n\n")
    out = []
    for ev in events:
        for line in ev.splitlines():
            if line.startswith("data: "):
                out.append(line[len("data: "):])
    return out


def sse_json(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(p) for p in parse_sse(raw) if p != "[DONE]"]


_PREFIX = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?(?P<ranks>(?: [A-Z_]+\d+)*)\] ")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_GRAPH = re.compile(r"\b(?:cuda|cpu|npu|musa) graph: (?:True|False)")


def line_shape(line: str) -> str:
    """A log line reduced to its form: timestamp -> [TS], numbers -> N, '<dev> graph: B'.

    `[2026-12-02 12:00:01 TP0] Decode batch, #running-req: 4, ..., cpu graph: False, ...`
    becomes `[TS TP0] Decode batch, #running-req: N, ..., <dev> graph: B, ...`.
    """
    m = _PREFIX.match(line)
    head = f"[TS{m.group('ranks')}] " if m else ""
    body = line[m.end():] if m else line
    body = _GRAPH.sub("<dev> graph: B", body)
    return head + _NUMBER.sub("N", body)


def log_shapes(text: str, needle: str) -> set[str]:
    return {line_shape(ln) for ln in text.splitlines() if needle in ln}


def kv_keys(line: str) -> list[str]:
    """Field names of a Prefill/Decode line, in order (`#new-seq`, `token usage`, ...)."""
    body = line.split("] ", 1)[-1]
    body = body.split(", ", 1)[1] if ", " in body else ""
    return [part.split(": ", 1)[0] for part in body.split(", ") if ": " in part]


parse_env_file = rs.parse_env_file
