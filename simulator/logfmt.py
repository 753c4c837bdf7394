"""SGLang 0.5.23 log line formats (pure functions) and the line writer.

Forms (SGLang's log prefix, Prefill/Decode batch lines and lifecycle lines):

- prefix ``[YYYY-MM-DD HH:MM:SS] `` (``.mmm`` with env SGLANG_LOG_MS=1), scheduler lines add
  rank tags ``[... DPd TPn]`` (DP only when dp > 1, TP only when tp > 1);
- ``Prefill batch, #new-seq: N, #new-token: N, #cached-token: N, token usage: 0.00,
  #running-req: N, #queue-req: N, #pending-token: N, cuda graph: False,
  input throughput (token/s): X.XX``;
- ``Decode batch, #running-req: N, #token: N, token usage: 0.00, cuda graph: True,
  gen throughput (token/s): X.XX, #queue-req: N`` (no trailing comma); with speculative
  decoding ``accept len: X.XX, accept rate: X.XX, `` after the token usage;
- uvicorn ``INFO:     ...`` lines and access lines
  ``INFO:     127.0.0.1:PORT - "POST /generate HTTP/1.1" 200 OK``;
- diffusion server prefix ``[MM-DD HH:MM:SS] `` (to stdout); WARNING lines wrapped in
  ``\\033[93m...\\033[0;0m``, ERROR in ``\\033[91m``; numbers in the request-done lines in GREEN
  (sglang 0.5.23 runtime/utils/logging_utils.py).

``#pending-token`` is modelled as the prompt tokens still waiting to be prefilled (queue plus
the unfinished part of a chunked prompt).
"""

from __future__ import annotations

import os
import sys
import time
from http import HTTPStatus
from typing import TextIO

GREEN, RED, YELLOW, RESET = "\033[92m", "\033[91m", "\033[93m", "\033[0;0m"
DIFFUSION_COLOURS = {"warning": YELLOW, "error": RED, "critical": RED}
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def timestamp(now: float, *, with_ms: bool, diffusion: bool = False) -> str:
    lt = time.localtime(now)
    if diffusion:
        return time.strftime("%m-%d %H:%M:%S", lt)
    s = time.strftime("%Y-%m-%d %H:%M:%S", lt)
    if with_ms:
        s += f".{int(now * 1000) % 1000:03d}"
    return s


def rank_tags(*, dp_rank: int | None, tp_rank: int, tp_size: int) -> str:
    """`` DP1 TP0`` style tags: DP only with a dp rank, TP only when tp_size > 1."""
    tags = ""
    if dp_rank is not None:
        tags += f" DP{dp_rank}"
    if tp_size > 1:
        tags += f" TP{tp_rank}"
    return tags


def prefill_line(*, new_seq: int, new_token: int, cached_token: int, token_usage: float,
                 running_req: int, queue_req: int, pending_token: int, cuda_graph: bool,
                 input_throughput: float, pd: str = "") -> str:
    """`pd`: a PD prefill server's queues (simulator/disagg.py log_extra)."""
    return (f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, "
            f"#cached-token: {cached_token}, token usage: {token_usage:.2f}, "
            f"#running-req: {running_req}, #queue-req: {queue_req}, "
            f"#pending-token: {pending_token}, {pd}cuda graph: {cuda_graph}, "
            f"input throughput (token/s): {input_throughput:.2f}")


def decode_line(*, running_req: int, num_token: int, token_usage: float, cuda_graph: bool,
                gen_throughput: float, queue_req: int, spec: tuple[float, float] | None = None,
                pd: str = "") -> str:
    """`spec`: (accept len, accept rate) of a server with speculative decoding; `pd`: a PD
    decode server's queues (simulator/disagg.py log_extra)."""
    accept = f"accept len: {spec[0]:.2f}, accept rate: {spec[1]:.2f}, " if spec is not None else ""
    return (f"Decode batch, #running-req: {running_req}, #token: {num_token}, "
            f"token usage: {token_usage:.2f}, {accept}{pd}cuda graph: {cuda_graph}, "
            f"gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queue_req}")


def retract_line(*, retracted: int, tokens_gained: int, old_ratio: float, new_ratio: float) -> str:
    return (f"KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, "
            f"#new_tokens_gained: {tokens_gained}, "
            f"#new_token_ratio: {old_ratio:.4f} -> {new_ratio:.4f}")


def uvicorn_msg(level: str, message: str) -> str:
    """Uvicorn's ``%(levelprefix)s %(message)s``: ``INFO:`` padded to 9 chars, then a space."""
    return f"{(level.upper() + ':'):<9} {message}"


def access_msg(client: str, method: str, path: str, status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return uvicorn_msg("info", f'{client} - "{method} {path} HTTP/1.1" {status} {phrase}'.rstrip())


class LogWriter:
    """Writes prefixed lines and flushes each one (operators tail the file)."""

    def __init__(self, *, level: str = "info", http_level: str | None = None,
                 stream: TextIO | None = None, access_stream: TextIO | None = None,
                 diffusion: bool = False) -> None:
        self.level = LEVELS.get(level.lower(), 20)
        self.http_level = LEVELS.get((http_level or level).lower(), 20)
        self.stream = stream or sys.stderr
        self.access_stream = access_stream or sys.stdout
        self.with_ms = os.environ.get("SGLANG_LOG_MS", "") in ("1", "true", "True")
        self.diffusion = diffusion

    def _prefix(self, tags: str) -> str:
        return f"[{timestamp(time.time(), with_ms=self.with_ms, diffusion=self.diffusion)}{tags}] "

    def log(self, message: str, *, level: str = "info", tags: str = "") -> None:
        if LEVELS[level] < self.level:
            return
        text = "\n".join(self._prefix(tags) + part if i == 0 else part
                         for i, part in enumerate(message.split("\n")))
        if self.diffusion and level in DIFFUSION_COLOURS:
            # SGLang's diffusion ColoredFormatter wraps the whole WARNING/ERROR record.
            text = f"{DIFFUSION_COLOURS[level]}{text}{RESET}"
        self.stream.write(text + "\n")
        self.stream.flush()

    def raw(self, text: str) -> None:
        """A line written without prefix (PyTorch/C++ output, tracebacks)."""
        self.stream.write(text + "\n")
        self.stream.flush()

    def uvicorn(self, message: str, *, level: str = "info") -> None:
        if LEVELS[level] < self.http_level:
            return
        self.stream.write(self._prefix("") + uvicorn_msg(level, message) + "\n")
        self.stream.flush()

    def access(self, client: str, method: str, path: str, status: int) -> None:
        if LEVELS["info"] < self.http_level:
            return
        self.access_stream.write(self._prefix("") + access_msg(client, method, path, status)
                                 + "\n")
        self.access_stream.flush()
