"""Fixtures for the `real_sglang` tier: the real SGLang 0.5.23 server on CPU.

The environment comes from `make sglang-cpu` (scripts/sglang_cpu/build_env.sh). Without it every
test here SKIPS with the reason shown in `-ra`; with `PITWALL_REQUIRE_REAL_SGLANG=1` (CI) a missing
environment FAILS instead, so CI can never pass by skipping.

A server start costs about a minute of a core, so the modules that only read share ONE server for
the session (`shared_real_server`, launched with SHARED_FLAGS): `real_server` hands it to every
module that sets no flags of its own. A module that needs other launch flags sets
`REAL_SERVER_FLAGS = [...]` and gets its own server for the module. test_real_sglang_zz_shutdown.py
runs last in the tier (file order: the tier is one worker's group, tests/pwtest.py) and stops the
shared server, asserting a clean SIGTERM shutdown. The start itself is the single function
`start_real_server()`, so Pitwall's launcher can replace it in one place.
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


#: the shared server's extra flags: --constrained-json-disable-any-whitespace bounds the JSON a
#: dummy-weight model writes under a schema (the workloads module); the other modules send no schema.
#: The server keeps its own request records, which the trace module imports: --log-requests at
#: level 2 (`Receive:`/`Finish:` lines with inputs and outputs, which no other reader minds) and
#: --export-metrics-to-file (a JSON record per finished request into the server's `export_dir`)
SHARED_FLAGS = ["--constrained-json-disable-any-whitespace", "--log-requests", "--log-requests-level", "2",
                "--export-metrics-to-file"]


@pytest.fixture(scope="session")
def shared_real_server(sglang_cpu_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one real server the reading modules share; stopped by the shutdown test or at session end.
    Its `export_dir` holds the request records --export-metrics-to-file writes."""
    folder = tmp_path_factory.mktemp("real-sglang-shared")
    export_dir = folder / "request-metrics"
    server = start_real_server(sglang_cpu_env, folder / "server.log",
                               [*SHARED_FLAGS, "--export-metrics-to-file-dir", str(export_dir)])
    server.export_dir = export_dir
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def real_server(
    request: pytest.FixtureRequest, sglang_cpu_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    flags = getattr(request.module, "REAL_SERVER_FLAGS", None)
    if flags is None:
        yield request.getfixturevalue("shared_real_server")
        return
    log_path = tmp_path_factory.mktemp("real-sglang") / "server.log"
    server = start_real_server(sglang_cpu_env, log_path, list(flags))
    try:
        yield server
    finally:
        server.stop()
