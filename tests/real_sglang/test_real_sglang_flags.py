"""SGLang 0.5.23's real argument parser (from the real-SGLang env) rejects the flags we say it does.

No server starts: argparse exits with code 2 before any model work (a few seconds per call).
These are the facts Pitwall's profile validation relies on.
"""

from __future__ import annotations

import subprocess

import pytest
from real_sglang_helpers import rs

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]


def _parse(env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [env["PYTHON"], "-m", "sglang.launch_server", "--model-path", env["MODEL"], *flags]
    return subprocess.run(
        argv, capture_output=True, text=True, env=rs.server_environ(env), timeout=240, check=False
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--enable-radix-cache"], "error: unrecognized arguments: --enable-radix-cache"),
        (
            ["--cuda-graph-max-bs", "64"],
            "error: ambiguous option: --cuda-graph-max-bs could match "
            "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
        ),
        (["--attention-backend", "bogus"], "argument --attention-backend: invalid choice: 'bogus'"),
    ],
)
def test_real_parser_rejects_flag(sglang_cpu_env: dict[str, str], flags: list[str], message: str) -> None:
    proc = _parse(sglang_cpu_env, *flags)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_real_help_lists_the_flags_pitwall_profiles_use(sglang_cpu_env: dict[str, str]) -> None:
    proc = _parse(sglang_cpu_env, "--help")
    assert proc.returncode == 0
    for flag in ("--disable-radix-cache", "--enable-metrics", "--decode-log-interval",
                 "--cuda-graph-max-bs-decode", "--max-total-tokens", "--enable-cache-report"):
        assert f"  {flag}" in proc.stdout, flag
