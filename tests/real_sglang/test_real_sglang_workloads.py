"""Structured output, multi-turn chat and forked programs: `pitwall probe` against the real SGLang
0.5.23 server on CPU (xgrammar 0.2.7, the default grammar backend). One server.

The same runs as against the simulator (tests/probe/test_probe_programs_sim.py):
a JSON-schema run with ample max_new_tokens is valid, one cut at 8 tokens is `truncated`, a
multi-turn run's turn-4 hit rate beats turn 1's, a fork's branches 2..K beat branch 1. Skips with
the reason when the CPU build has no xgrammar.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from typing import Any

import pytest

from collectors.probe.cli import probe_cli

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(900)]

# The CPU tier's model has dummy (random) weights: with xgrammar's default unbounded JSON
# whitespace it wanders in whitespace until the length limit. A real SGLang flag bounds that:
# the tier's shared server is launched with it (conftest.SHARED_FLAGS; --enable-cache-report is in
# every launch of the tier).


@pytest.fixture(scope="module")
def has_xgrammar(sglang_cpu_env: dict[str, str]) -> None:
    py = sglang_cpu_env["PYTHON"]
    probe = subprocess.run([py, "-c", "import xgrammar"], capture_output=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"the SGLang CPU build lacks xgrammar ({probe.stderr.decode()[-200:]})")
    assert importlib.util.find_spec("jsonschema") is not None


def _probe(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> dict[str, Any]:
    rc = probe_cli(["--url", url, "--no-progress", "--json", "--no-store", "--concurrency", "2",
                    "--timeout", "300", *args])
    out = capsys.readouterr().out
    assert rc == 0, out
    return dict(json.loads(out))


def test_json_schema_valid_with_ample_tokens(real_server: Any, has_xgrammar: None,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rep = _probe(capsys, real_server.base_url, "--structured", "json-schema",
                 "--max-new-tokens", "400", "--requests", "6")
    st = rep["structured"]
    print("real json-schema ample:", json.dumps(st))
    assert st["grammar_backend"] == "xgrammar"
    assert st["finished"] == 6 and st["valid_rate"] >= 0.99, st


def test_json_schema_cut_at_8_tokens_is_truncated(real_server: Any, has_xgrammar: None,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    rep = _probe(capsys, real_server.base_url, "--structured", "json-schema",
                 "--max-new-tokens", "8", "--requests", "6")
    st = rep["structured"]
    print("real json-schema 8 tokens:", json.dumps(st))
    assert st["valid_rate"] < 0.5 and st["failures"]["truncated"] >= 1, st


def test_multi_turn_reuse_grows(real_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rep = _probe(capsys, real_server.base_url, "--prompt-set", "multi-turn", "--turns", "4",
                 "--conversations", "2", "--requests", "8", "--warmup", "0",
                 "--max-new-tokens", "16", "--input-tokens", "64")
    turns = {t["turn"]: t for t in rep["turns"]}
    print("real multi-turn:", json.dumps(rep["turns"]))
    assert turns[4]["cache_hit_rate"] > turns[1]["cache_hit_rate"]


def test_fork_branches_reuse_the_context(real_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rep = _probe(capsys, real_server.base_url, "--prompt-set", "fork", "--branches", "3",
                 "--conversations", "2", "--requests", "6", "--warmup", "0",
                 "--max-new-tokens", "8", "--prefix-tokens", "200")
    branches = {b["branch"]: b for b in rep["branches"]}
    print("real fork:", json.dumps(rep["branches"]))
    assert all(branches[k]["cache_hit_rate"] > branches[1]["cache_hit_rate"] for k in (2, 3))
