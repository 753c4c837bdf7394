"""The tier's shared real SGLang server, stopped last: no sgl_kernel stub was called over all the
traffic the reading modules sent it, and SIGTERM shuts it down cleanly (exit 0, uvicorn's and
SGLang's shutdown lines).

Runs last in the tier by file name (the tier is one worker's group, run in file order:
tests/pwtest.py), after every module that reads the shared server (conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from real_sglang_helpers import rs

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]


def test_stub_never_called_and_sigterm_shuts_down_cleanly(shared_real_server: Any) -> None:
    code = shared_real_server.stop()
    log = shared_real_server.log_text()
    assert rs.STUB_MARKER not in log, "a test-environment sgl_kernel stub function was called"
    assert code == 0
    for needle in ("SIGTERM received", "Application shutdown complete", "Finished server process"):
        assert needle in log, needle
