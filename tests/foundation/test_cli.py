"""CLI: help for every subcommand, one-line errors with non-zero exit codes."""

from __future__ import annotations

import subprocess

import pytest
from pwtest import PY, subprocess_env

from cli.main import COMMANDS, DELEGATED, main


def _pitwall(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "cli", *args], capture_output=True, text=True, env=subprocess_env(env), timeout=timeout
    )


def test_help_lists_every_subcommand():
    res = _pitwall("--help")
    assert res.returncode == 0
    for name in list(COMMANDS) + list(DELEGATED):
        assert name in res.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(COMMANDS) | set(DELEGATED)))
def test_every_subcommand_has_help(name, data_env):
    res = _pitwall(name, "--help", env=data_env)
    assert res.returncode == 0, res.stderr
    assert "usage:" in res.stdout.lower()


def test_invalid_setting_is_one_line_exit_2(data_env):
    res = _pitwall("status", env={**data_env, "PITWALL_PORT": "eighty"})
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0
    assert "PITWALL_PORT" in res.stderr and "Traceback" not in res.stderr


def test_exposed_without_password_is_refused(data_env):
    res = _pitwall("up", "--host", "0.0.0.0", env=data_env)
    assert res.returncode == 2
    assert "Refusing to listen on 0.0.0.0 without authentication" in res.stderr


def test_second_collector_says_who_holds_the_database(data_env):
    from storage import repo
    from storage.db import make_engine

    engine = make_engine(data_env["PITWALL_DATABASE_URL"])
    import os
    import socket

    # a live process on this host holds the lease (this test process)
    repo.acquire_lease(engine, scope=repo.host_scope(socket.gethostname()), holder=f"{socket.gethostname()}:{os.getpid()}",
                       pid=os.getpid(), host=socket.gethostname(), ttl_s=15)
    res = _pitwall("collect", "--duration", "1", env=data_env)
    assert res.returncode == 1
    assert "Another runner" in res.stderr and str(os.getpid()) in res.stderr
    assert "Traceback" not in res.stderr


def test_status_runs_on_a_new_database(data_env, capsys):
    from storage.db import make_engine

    make_engine(data_env["PITWALL_DATABASE_URL"]).dispose()  # status itself creates nothing
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "runner     not running" in out
    assert "config     none (defaults and PITWALL_* variables only)" in out  # which settings it read


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
