"""Test helpers shared across test folders (import as `from pwtest import ...`).

Kept out of conftest.py because several conftest.py files exist and `from conftest import`
would be ambiguous between them. `pythonpath = ["tests"]` in pyproject makes this importable.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def wait_for(cond, timeout: float = 60.0, what: str = "condition", poll_s: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll `cond()` until it is truthy and return it; AssertionError naming `what` after
    `timeout` seconds (a generous deadline for a busy 2-core CI machine, never a speed claim)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")
