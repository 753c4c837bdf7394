"""Profile validation against the REAL SGLang 0.5.23 parser (the `make sglang-cpu` environment).

Skips without that environment (fails instead with PITWALL_REQUIRE_REAL_SGLANG=1, as the rest of
the real_sglang tier). Each call imports sglang (and torch) in the server's Python: seconds.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from launching import launcher
from launching.profiles import ProfileSpec

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(600)]
REPO = Path(__file__).resolve().parents[2]


def _real_env() -> dict[str, str]:
    path = REPO / "scripts" / "sglang_cpu" / "real_server.py"
    spec = importlib.util.spec_from_file_location("pitwall_launcher_real_server", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    env = mod.load_env()
    if env is None:
        if os.environ.get("PITWALL_REQUIRE_REAL_SGLANG") == "1":
            pytest.fail("real SGLang CPU environment not built (PITWALL_REQUIRE_REAL_SGLANG=1 forbids skipping)")
        pytest.skip("real SGLang CPU environment not built: run `make sglang-cpu`")
    return dict(env)


def test_real_parser_messages() -> None:
    env = _real_env()
    # The server's environment, as a profile would set it: the CPU engine and its kernel shim.
    penv = {"SGLANG_USE_CPU_ENGINE": "1"}  # the sgl_kernel shim is on the venv's path (.pth)

    def check(flags: dict) -> launcher.Report:
        from storage.models import Server

        server = Server(id=1, name="real", base_url="http://127.0.0.1:9", python=env["PYTHON"])
        report = launcher.Report()
        real = launcher.real_parser_issues(server.python or "", ProfileSpec(name="r", model_path=env["MODEL"], flags=flags, env=penv))
        assert real is not None, "sglang should import in the real environment"
        report.issues.extend(real[0])
        report.checked_by = real[1]
        return report

    # One run of the parser (each imports sglang and torch: many CPU-seconds) judges three flags
    # 0.5.23 does not have; a profile it accepts is test_real_sglang_pitwall.py's (real-cpu, judged
    # by this parser there).
    bad = check({"enable-radix-cache": True, "cuda-graph-max-bs": 64, "hos": "0.0.0.0"})
    assert bad.checked_by == f"SGLang's parser in {env['PYTHON']}"
    (err,) = bad.errors
    # argparse lists every unknown token; abbreviations are off (allow_abbrev=False), so
    # --cuda-graph-max-bs is simply unknown, not "ambiguous", and `--hos` is not taken as `--host`
    assert err.message.startswith("SGLang rejected the flags: unrecognized arguments: --enable-radix-cache "
                                  "--cuda-graph-max-bs=64 --hos=0.0.0.0."), err.message
    # the bundled notes of the flags named, each once
    assert err.message.count("`disable-radix-cache = true` turns it off") == 1
    assert err.message.count("removed in SGLang 0.5.20") == 1
