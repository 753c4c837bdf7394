"""Fixtures for the `real_sglang` tier: the real SGLang 0.5.23 server on CPU.

The environment comes from `make sglang-cpu` (scripts/sglang_cpu/build_env.sh). Without it every
test here SKIPS with the reason shown in `-ra`; with `PITWALL_REQUIRE_REAL_SGLANG=1` (CI) a missing
environment FAILS instead, so CI can never pass by skipping.

Each test module gets ONE server (startup is about a minute): the module-scoped `real_server`
fixture. A module may set `REAL_SERVER_FLAGS = [...]` for extra launch flags. The start itself is
the single function `start_real_server()`, so Pitwall's launcher can replace it in one place.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from real_sglang_helpers import rs


@pytest.fixture(scope="session")
def sglang_cpu_env() -> dict[str, str]:
    env = rs.load_env()
    if env is None:
        where = rs.default_env_dir() / rs.ENV_FILE_NAME
        reason = (
            f"real SGLang CPU environment not built ({where} missing): run `make sglang-cpu` "
            "or scripts/sglang_cpu/build_env.sh"
        )
        if os.environ.get("PITWALL_REQUIRE_REAL_SGLANG") == "1":
            pytest.fail(reason + " (PITWALL_REQUIRE_REAL_SGLANG=1 forbids skipping)")
        pytest.skip(reason)
    return dict(env)


def start_real_server(env: dict[str, str], log_path: Path, extra_flags: list[str]) -> Any:
    """THE one place the real server starts (swap for Pitwall's launcher later).

    Returns an object with `base_url`, `log_path`, `log_text()`, `ready_s` and `stop() -> int | None`.
    """
    return rs.RealServer(env=env, log_path=log_path, extra_flags=list(extra_flags)).start()


@pytest.fixture(scope="module")
def real_server(
    request: pytest.FixtureRequest, sglang_cpu_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    flags = list(getattr(request.module, "REAL_SERVER_FLAGS", []))
    log_path = tmp_path_factory.mktemp("real-sglang") / "server.log"
    server = start_real_server(sglang_cpu_env, log_path, flags)
    try:
        yield server
    finally:
        server.stop()
