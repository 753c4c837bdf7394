"""What the supervisor starts, as data: LaunchPlan, PlanError, the argv of a profile, and the
pure readers of a launch's log text (startup progress, excerpts).

Pure and Streamlit-free; dashboard/services/launcher.py builds LaunchPlans (after validation),
runner/lifecycle.py runs them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from storage.models import Server

READY_LINE = "The server is fired up and ready to roll!"
EXCERPT_LINES = 30

# Log milestones of SGLang startup (sglang-interfaces.md §2), in order, with the fraction of the
# startup they roughly mark; only used to draw a progress bar.
MILESTONES: tuple[tuple[str, float, str], ...] = (
    ("Load weight begin", 0.3, "loading weights"),
    ("Load weight end", 0.5, "weights loaded"),
    ("Memory pool end", 0.6, "KV cache allocated"),
    ("CUDA graph begin", 0.7, "capturing CUDA graphs"),
    ("cuda graph begin", 0.7, "capturing CUDA graphs"),
    ("max_total_num_tokens=", 0.8, "scheduler ready"),
    ("Uvicorn running on", 0.9, "HTTP up, warming up"),
    (READY_LINE, 1.0, "ready"),
)


class PlanError(Exception):
    """The planner refused to start (bad flag, port in use, ...): one sentence + event kind."""

    def __init__(self, message: str, kind: str = "bad_cli_flag", detail: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to start one server process; built and validated by the planner."""

    server_id: int
    server_name: str
    base_url: str
    argv: list[str]
    env: dict[str, str]  # the profile's [env] only; merged over os.environ at spawn
    log_path: str
    profile_name: str | None = None
    profile_id: int | None = None
    profile_hash: str | None = None
    cwd: str | None = None
    api_key: str | None = None
    ready_timeout_s: float = 600.0
    notes: list[str] = field(default_factory=list)


# (server, profile name or None for the server's own, replacing a running process) -> plan
Planner = Callable[[Server, str | None, bool], LaunchPlan]


# ---------------------------------------------------------------------------------------------
# pure helpers


def flag_args(flags: dict[str, Any]) -> list[str]:
    """A profile's [flags] -> argv items: `true` is a bare switch, `false` leaves it out, a list
    becomes several values, a table becomes JSON text."""
    out: list[str] = []
    for name, value in flags.items():
        opt = f"--{name}"
        if value is True:
            out.append(opt)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            out.append(opt)
            out.extend(_fmt(v) for v in value)
        elif isinstance(value, dict):
            out.extend([opt, json.dumps(value, separators=(",", ":"))])
        else:
            out.extend([opt, _fmt(value)])
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def build_argv(
    python: str, entrypoint: str, model_path: str, host: str, port: int, flags: dict[str, Any]
) -> list[str]:
    """`python -m <entrypoint> --model-path M --host H --port P <flags>`.

    "sglang serve" is SGLang's console script (`sglang.cli.main:main`, 0.5.5+); it is started as
    `python -m sglang.cli.main serve` so the server's own interpreter runs it.
    """
    head = [python, "-m", "sglang.cli.main", "serve"] if entrypoint == "sglang serve" else [python, "-m", entrypoint]
    return [*head, "--model-path", model_path, "--host", host, "--port", str(port), *flag_args(flags)]


def startup_progress(text: str) -> tuple[float, str]:
    """(fraction 0-1, what it is doing) from the log text a launch wrote so far."""
    best, detail = 0.2, "process started"
    for needle, frac, what in MILESTONES:
        if needle in text and frac >= best:
            best, detail = frac, what
    return best, detail


def tail_lines(text: str, n: int = EXCERPT_LINES) -> str:
    return "\n".join(text.splitlines()[-n:])


# What a failing launch's log says, strongest evidence first: an exception line
# ("RuntimeError: CUDA error: ...", "torch.OutOfMemoryError: ..."), then any error line, then the
# generic "failed" notices (SGLang's "Received sigquit from a child process").
_REASON_TIERS = (
    re.compile(r"\b\w*(Error|Exception)\b:|out of memory|CUDA error", re.IGNORECASE),
    re.compile(r"error|traceback|killed", re.IGNORECASE),
    re.compile(r"fail|exception|abort", re.IGNORECASE),
)


def reason_line(excerpt: str) -> str:
    """The line of a failing launch's log that most likely says why (the last line of the
    strongest tier above, else the last line), cut to 300 characters."""
    lines = [ln.strip() for ln in excerpt.splitlines() if ln.strip()]
    for tier in _REASON_TIERS:
        for ln in reversed(lines):
            if tier.search(ln):
                return ln[:300]
    return lines[-1][:300] if lines else "(no output)"


def read_from(path: str, offset: int, limit: int = 1 << 20) -> str:
    """The log text written since `offset` (at most the last `limit` bytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            start = max(offset, end - limit)
            f.seek(start)
            return f.read(end - start).decode("utf-8", "replace")
    except OSError:
        return ""
