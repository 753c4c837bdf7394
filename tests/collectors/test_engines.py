"""The engine registry (collectors/engines.py) and the SGLang Engine (collectors/sglang/__init__.py):
unknown names fail with the known ones listed, every field of the SGLang engine works, and the
collector table builds SGLang's collectors through it without importing them up front."""

from __future__ import annotations

import subprocess

import pytest
from pwtest import PY, REPO, subprocess_env

from collectors import sglang
from collectors.base import ENGINE_ROLES, CollectorError
from collectors.engines import ENGINES, get_engine
from collectors.registry import build_collectors

FIX = REPO / "tests" / "fixtures"


def test_unknown_engine_names_the_known_ones() -> None:
    with pytest.raises(CollectorError, match=r"Unknown engine 'tgi'.*sglang, vllm"):
        get_engine("tgi")


def test_sglang_is_registered() -> None:
    assert ENGINES["sglang"] is sglang.ENGINE is get_engine("sglang")
    assert get_engine("sglang").name == "sglang"


def test_sglang_build_argv() -> None:
    engine = get_engine("sglang")
    argv = engine.build_argv("py", "sglang serve", "m", "127.0.0.1", 30000,
                             {"tp-size": 2, "enable-metrics": True, "disable-radix-cache": False})
    assert argv == ["py", "-m", "sglang.cli.main", "serve", "--tp-size=2", "--enable-metrics",
                    "--model-path", "m", "--host=127.0.0.1", "--port=30000"]
    assert engine.entrypoints == ("sglang.launch_server", "sglang serve", "sglang_router.launch_router")
    assert engine.build_argv("py", "sglang.launch_server", "m", "h", 1, {})[:3] == ["py", "-m", "sglang.launch_server"]


def test_sglang_ready_line_and_startup_progress() -> None:
    engine = get_engine("sglang")
    log = (FIX / "sglang-0.5.23-real-cpu.log").read_text()
    assert engine.ready_line in log
    assert engine.startup_progress(log) == (1.0, "ready")
    before_ready = log[: log.index(engine.ready_line)]
    assert engine.ready_line not in before_ready
    assert engine.startup_progress(before_ready)[0] < 1.0
    assert engine.startup_progress("") == (0.2, "process started")


def test_sglang_endpoints() -> None:
    engine = get_engine("sglang")
    assert engine.health_path == "/health"
    # newest first: 0.5.6+, 0.4.0+, <= 0.3.6
    assert engine.server_info_paths == ("/server_info", "/get_server_info", "/get_server_args")


def test_sglang_flag_checks() -> None:
    engine = get_engine("sglang")
    assert engine.flags_version == "0.5.23"
    assert [i.severity for i in engine.check_flags({"enable-radix-cache": True})] == ["error"]
    assert [i for i in engine.check_flags({"tp-size": 2}) if i.severity == "error"] == []
    (issue,) = engine.check_env({"1BAD": "x"})
    assert issue.severity == "error" and issue.flag == "1BAD"
    assert engine.check_env({"NCCL_TIMEOUT": "1800"}) == []


def test_sglang_parse_line() -> None:
    engine = get_engine("sglang")
    line = ("[2026-10-30 12:00:07 TP0] Decode batch, #running-req: 6, #token: 2048, token usage: 0.10, "
            "cuda graph: True, gen throughput (token/s): 900.50, #queue-req: 0")
    rec = engine.parse_line(line)
    assert rec is not None and getattr(rec, "kind", None) == "decode"
    assert engine.parse_line("hello") is None


@pytest.mark.parametrize("role", ENGINE_ROLES)
def test_sglang_collectors_are_named_engine_role(role: str) -> None:
    collector = get_engine("sglang").collector(role)
    try:
        assert collector.name == f"sglang_{role}"
    finally:
        collector.close()


def test_unknown_role_names_the_known_ones() -> None:
    with pytest.raises(CollectorError, match=r"no 'gpu' collector; it has: api, log, metrics"):
        get_engine("sglang").collector("gpu")


def test_registry_builds_engine_collectors() -> None:
    names = {f"sglang_{role}" for role in ENGINE_ROLES}
    built, errors = build_collectors({}, names=names)
    try:
        assert errors == []
        assert {c.name for c in built} == names
    finally:
        for c in built:
            c.close()


def test_importing_the_registry_imports_no_engine() -> None:
    code = ("import sys, collectors.registry; "
            "print(sorted(m for m in ('collectors.engines', 'collectors.sglang', 'httpx') if m in sys.modules))")
    out = subprocess.run([PY, "-c", code], cwd=REPO, env=subprocess_env(), capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
