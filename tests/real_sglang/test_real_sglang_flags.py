"""SGLang 0.5.23's real argument parser (from the real-SGLang env) rejects the flags we say it does.

No server starts: argparse exits before any model work. The real `python -m sglang.launch_server`
entry runs once per command line, all in one Python of the real environment (importing sglang and
torch costs seconds of CPU; four interpreters cost four times that), each run's exit status and
stderr captured. These are the facts Pitwall's profile validation relies on.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from real_sglang_helpers import rs

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]

# runs sglang.launch_server as __main__ once per argv (json on argv[1]); prints one JSON result each
_RUNNER = """
import contextlib, io, json, runpy, sys
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["sglang.launch_server", *argv]
    code = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    print(json.dumps({"argv": argv, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}), flush=True)
"""

CASES = [
    (["--enable-radix-cache"], "error: unrecognized arguments: --enable-radix-cache"),
    (["--cuda-graph-max-bs", "64"],
     "error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
    (["--attention-backend", "bogus"], "argument --attention-backend: invalid choice: 'bogus'"),
]


@pytest.fixture(scope="module")
def parsed(sglang_cpu_env: dict[str, str]) -> dict[str, dict]:
    argvs = [["--model-path", sglang_cpu_env["MODEL"], *flags] for flags, _ in CASES]
    argvs.append(["--model-path", sglang_cpu_env["MODEL"], "--help"])
    proc = subprocess.run([sglang_cpu_env["PYTHON"], "-c", _RUNNER, json.dumps(argvs)], capture_output=True, text=True,
                          env=rs.server_environ(sglang_cpu_env), timeout=300, check=False)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(argvs), proc.stderr[-2000:]
    return {" ".join(r["argv"][2:]): r for r in results}


@pytest.mark.parametrize(("flags", "message"), CASES)
def test_real_parser_rejects_flag(parsed: dict[str, dict], flags: list[str], message: str) -> None:
    got = parsed[" ".join(flags)]
    assert got["code"] == 2
    assert message in got["stderr"]


def test_real_help_lists_the_flags_pitwall_profiles_use(parsed: dict[str, dict]) -> None:
    got = parsed["--help"]
    assert got["code"] == 0
    for flag in ("--disable-radix-cache", "--enable-metrics", "--decode-log-interval",
                 "--cuda-graph-max-bs-decode", "--max-total-tokens", "--enable-cache-report"):
        assert f"  {flag}" in got["stdout"], flag
