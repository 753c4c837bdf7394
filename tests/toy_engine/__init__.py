"""A toy inference engine, to prove the engine seam: one folder (this one) and one line in
collectors/engines.py's ENGINES (the test adds it), and the runner, the supervisor, the
scorecards and the pages run it unchanged.

Its own log line (`toy: served=<n>`), metric name (`toy_served_total` at /toy_metrics), launch
command (`python server.py --host H --port P`), ready line, health path, version field and native
generation API (`--api toygen`: POST /toy_generate, see TOYGEN), in shapes unlike SGLang's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import httpx

from collectors.base import CollectorContext, Engine, PollResult, SampleRow
from collectors.native_api import NativeApi, NativeChunk, NativeRequest, as_int

SERVER = Path(__file__).with_name("server.py")
LINE = re.compile(r"^toy: served=(\d+)$")
LOG_KEY = "log.toy_served"  # what the log collector writes
METRICS_KEY = "metrics.toy_served_total"  # what the metrics collector writes


class ToyLogCollector:
    """Reads each toy server's log from the offset it saved; one sample per `toy:` line."""

    name = "toy_log"
    interval_s = 0.2

    def poll(self, ctx: CollectorContext) -> PollResult:
        out = PollResult()
        for server in ctx.servers:
            if not server.log_path or not Path(server.log_path).exists():
                continue
            key = f"{self.name}:{server.id}"
            offset = int((ctx.load_state(key) or {}).get("offset", 0))
            with open(server.log_path, "rb") as f:
                f.seek(offset)
                data = f.read()
            done = data.rfind(b"\n") + 1  # whole lines only
            for raw in data[:done].decode("utf-8", "replace").splitlines():
                if (m := parse_line(raw)) is not None:
                    out.samples.append(SampleRow(ctx.now(), server.id, LOG_KEY, float(m), "log",
                                                 server.launch_id))
            ctx.save_state(key, {"offset": offset + done})
        return out

    def close(self) -> None:
        pass


class ToyMetricsCollector:
    """Scrapes /toy_metrics of each serving toy server."""

    name = "toy_metrics"
    interval_s = 0.2

    def poll(self, ctx: CollectorContext) -> PollResult:
        out = PollResult()
        for server in ctx.servers:
            if not server.serving:
                continue
            try:
                text = httpx.get(server.base_url + "/toy_metrics", timeout=2.0).text
            except httpx.HTTPError:
                continue
            for line in text.splitlines():
                name, _, value = line.partition(" ")
                if name == "toy_served_total":
                    out.samples.append(SampleRow(ctx.now(), server.id, METRICS_KEY, float(value),
                                                 "metrics", server.launch_id))
        return out

    def close(self) -> None:
        pass


def parse_line(line: str) -> int | None:
    m = LINE.match(line.strip())
    return int(m.group(1)) if m else None


def build_argv(python: str, entrypoint: str, model_path: str, host: str, port: int,
               flags: dict[str, Any], config_path: str | None = None) -> list[str]:
    return [python or sys.executable, str(SERVER), "--host", host, "--port", str(port)]


def toygen_body(req: NativeRequest) -> dict[str, Any]:
    """`{"prompt", "limit", "knobs": {sampling}, "stream": true}`: not SGLang's field names."""
    return {"prompt": req.text, "limit": req.max_new_tokens, "knobs": req.sampling, "stream": True}


class ToygenReader:
    """Chunks `{"piece": <new text>, "emitted": <tokens so far>, "end": <reason>?}`: incremental
    text, a cumulative count, no meta object."""

    def __init__(self) -> None:
        self.text = ""

    def __call__(self, chunk: dict[str, Any]) -> NativeChunk | None:
        piece = chunk.get("piece")
        if not isinstance(piece, str):
            return None
        self.text += piece
        end = chunk.get("end")
        return NativeChunk(text=self.text, new=bool(piece), prompt_tokens=as_int(chunk.get("read")),
                           completion_tokens=as_int(chunk.get("emitted")),
                           finish_reason=end if isinstance(end, str) else None)


def toygen_abort(chunk: dict[str, Any]) -> tuple[int, str] | None:
    """A refusal is `{"end": "refused", "status": <code>, "why": <message>}`."""
    if chunk.get("end") != "refused":
        return None
    return int(chunk.get("status") or 500), str(chunk.get("why") or "refused")


TOYGEN = NativeApi(name="toygen", path="/toy_generate", build_body=toygen_body,
                   chunk_reader=ToygenReader, read_abort=toygen_abort, chunk_fields="'piece'")

ENGINE = Engine(
    name="toy",
    display_name="Toy",
    collectors={"log": ToyLogCollector, "metrics": ToyMetricsCollector},
    build_argv=build_argv,
    ready_line="TOY READY",
    startup_progress=lambda text: (1.0, "ready") if "TOY READY" in text else (0.2, "process started"),
    health_path="/healthz",
    server_info_paths=("/about",),
    version_of=lambda info: info.get("toy_version") if isinstance(info.get("toy_version"), str) else None,
    check_flags=lambda flags, **kwargs: [],
    check_env=lambda env, *args, **kwargs: [],
    flags_version="9.9",
    parse_line=parse_line,
    entrypoints=("toy",),
    native_api=TOYGEN,
)
