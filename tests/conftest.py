"""Shared fixtures: an isolated data dir and database per test, free ports, repo paths."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def data_env(tmp_path, monkeypatch) -> dict[str, str]:
    """PITWALL_* variables pointing at a fresh data dir; applied to os.environ too."""
    env = {
        "PITWALL_DATA_DIR": str(tmp_path / "data"),
        "PITWALL_DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}",
        "PITWALL_CONFIG": "",
        "PITWALL_DEMO": "off",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    return env


@pytest.fixture
def engine(tmp_path):
    from storage.db import make_engine

    eng = make_engine(f"sqlite:///{tmp_path / 'pitwall.db'}")
    yield eng
    eng.dispose()


def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env
