"""procs.child_env and its callers: no child inherits Pitwall's secrets, SGLang gets no PITWALL_*
at all, and a sweep gets the database URL by environment (never in argv, where `ps` shows it)."""

from __future__ import annotations

import json
import stat
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner import procs

PARENT = {
    "PATH": "/usr/bin", "HOME": "op-home", "HF_HOME": "/cache",
    "PITWALL_PASSWORD": "PWS3CRET", "PITWALL_VIEWER_PASSWORD": "VWS3CRET",
    "PITWALL_API_KEY": "AKS3CRET", "PITWALL_PROBE_API_KEY": "PKS3CRET",
    "PITWALL_DATABASE_URL": "postgresql://pitwall:PGS3CRET@127.0.0.1:5432/pitwall",
    "PITWALL_DATA_DIR": "/data", "PITWALL_CONFIG": "/etc/pitwall.toml",
}


def test_a_server_gets_no_pitwall_variable_and_its_profile_env():
    env = procs.child_env({"HF_TOKEN": "hf_x", "SGLANG_SIM_SPEED": 50}, keep_pitwall=False, base=PARENT)  # type: ignore[dict-item]
    assert not [k for k in env if k.startswith("PITWALL_")]
    assert env["PATH"] == "/usr/bin" and env["HF_HOME"] == "/cache"
    assert env["HF_TOKEN"] == "hf_x" and env["SGLANG_SIM_SPEED"] == "50"  # asked for by the profile


def test_a_pitwall_child_keeps_settings_but_no_secret():
    env = procs.child_env(keep_pitwall=True, base=PARENT)
    assert {k for k in env if k.startswith("PITWALL_")} == {
        "PITWALL_DATABASE_URL", "PITWALL_DATA_DIR", "PITWALL_CONFIG"}


class FakeStdin:
    """The child's end of a stdin pipe: what was written, and whether it was closed."""

    def __init__(self) -> None:
        self.data = b""
        self.closed = threading.Event()

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        self.closed.set()


class FakeProc:
    pid = 4242

    def __init__(self) -> None:
        self.popen = SimpleNamespace(stdin=FakeStdin())

    def wait(self, timeout: float) -> int:
        return 0

    def poll(self) -> int:
        return 0


@pytest.fixture
def spawned(monkeypatch) -> list[dict[str, Any]]:
    """procs.spawn / run_capture record what they were given instead of starting anything."""
    calls: list[dict[str, Any]] = []

    def spawn(argv: list[str], **kw: Any) -> FakeProc:
        spec = next((Path(a) for a in argv if a.endswith("spec.json")), None)
        proc = FakeProc()
        calls.append({"argv": list(argv), "env": dict(kw.get("env") or {}), "stdin": kw.get("stdin"),
                      "pipe": proc.popen.stdin,
                      "spec": json.loads(spec.read_text()) if spec else None,
                      "spec_mode": stat.S_IMODE(spec.stat().st_mode) if spec else None})
        return proc

    def run_capture(argv: list[str], **kw: Any) -> procs.Captured:
        calls.append({"argv": list(argv), "env": dict(kw.get("env") or {})})
        return procs.Captured(0, "", "", False)

    monkeypatch.setattr(procs, "spawn", spawn)
    monkeypatch.setattr(procs, "stop", lambda *a, **k: (0, False))
    monkeypatch.setattr(procs, "run_capture", run_capture)
    for k, v in PARENT.items():
        monkeypatch.setenv(k, v)
    return calls


def test_a_sweep_gets_the_database_by_environment_and_the_key_by_a_pipe(spawned, engine):
    from runner.sweeps import Sweeps

    url = PARENT["PITWALL_DATABASE_URL"]
    Sweeps(engine, url).run(run_id=7, spec={"url": "http://127.0.0.1:1", "api_key": "S3CRET"})
    (call,) = spawned
    assert "--db" not in call["argv"] and not any("PGS3CRET" in a for a in call["argv"])
    assert call["env"]["PITWALL_DATABASE_URL"] == url
    assert "PITWALL_PASSWORD" not in call["env"] and "PITWALL_API_KEY" not in call["env"]
    assert call["spec"] is None and call["argv"][call["argv"].index("--spec") + 1] == "-"
    assert call["stdin"] == subprocess.PIPE and call["pipe"].closed.wait(10)
    assert json.loads(call["pipe"].data)["api_key"] == "S3CRET"  # over stdin, in no file


def test_the_sweep_child_reads_the_database_url_from_its_environment(monkeypatch, tmp_path):
    from collectors.probe.sweep import SweepSpec
    from runner import sweep_child

    seen: dict[str, Any] = {}

    async def fake_sweep(spec: SweepSpec, engine: Any = None, run_id: int | None = None) -> dict:
        seen["engine"] = engine
        return {"status": "done"}

    monkeypatch.setenv("PITWALL_DATABASE_URL", "sqlite:///from-env.db")
    monkeypatch.setattr("collectors.probe.cli.open_engine", lambda url: f"engine of {url}")
    monkeypatch.setattr(sweep_child, "run_sweep", fake_sweep)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"url": "http://127.0.0.1:1", "levels": [1.0]}))
    assert sweep_child.main(["--spec", str(spec)]) == 0
    assert seen["engine"] == "engine of sqlite:///from-env.db"


def test_the_detached_runner_and_pitwall_up(spawned, monkeypatch):
    from runner import up

    monkeypatch.setattr(up.signal, "signal", lambda *a: None)  # keep pytest's own handlers

    up.start_detached("/repo", env=dict(PARENT))
    code = up.up(["streamlit", "run", "app.py"], dict(PARENT), cwd="/repo")
    assert code == 1  # the fake children "exited" at once
    runner_detached, runner, app = spawned
    for call in (runner_detached, runner):
        assert "PITWALL_PASSWORD" not in call["env"] and "PITWALL_VIEWER_PASSWORD" not in call["env"]
        assert call["env"]["PITWALL_DATABASE_URL"] == PARENT["PITWALL_DATABASE_URL"]
    assert app["env"]["PITWALL_PASSWORD"] == "PWS3CRET"  # the dashboard signs operators in


def test_validation_with_sglangs_parser_gets_no_pitwall_variable(spawned):
    from launching import launcher
    from launching.profiles import ProfileSpec

    spec = ProfileSpec(name="p", model_path="m", env={"SGLANG_X": "1"})
    launcher._run_real_parser("python", spec, ["--model-path", "m"], 5.0)
    (call,) = spawned
    assert not [k for k in call["env"] if k.startswith("PITWALL_")]
    assert call["env"]["SGLANG_X"] == "1"
