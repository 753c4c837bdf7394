"""What the supervisor starts, as data: LaunchPlan, PlanError, and the engine-neutral readers of
a launch's log text (excerpts, the line that says why it failed). The engine-specific parts (argv,
ready line, startup milestones) come from collectors/engines.py.

Pure and Streamlit-free; launching/launcher.py builds LaunchPlans (after validation),
runner/lifecycle.py runs them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from collectors.engines import DEFAULT_ENGINE
from storage.errors import LaunchRefused
from storage.models import Server

EXCERPT_LINES = 30


class PlanError(LaunchRefused):
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
    engine: str = DEFAULT_ENGINE  # collectors/engines.py: ready line, startup milestones, endpoints


# (server, profile name or None for the server's own, replacing a running process) -> plan
Planner = Callable[[Server, str | None, bool], LaunchPlan]


# ---------------------------------------------------------------------------------------------
# pure helpers


def tail_lines(text: str, n: int = EXCERPT_LINES) -> str:
    return "\n".join(text.splitlines()[-n:])


# What a failing launch's log says, strongest evidence first: an exception line
# ("RuntimeError: CUDA error: ...", "torch.OutOfMemoryError: ..."), then any error line, then the
# generic "failed" notices (e.g. "Received sigquit from a child process").
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
