"""`pitwall profiles list|validate|diff` and `pitwall launch|stop|relaunch` through cli.main.main."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from cli.main import main


def free_port() -> int:
    # Local copy: `from conftest import ...` is ambiguous when several conftest.py are loaded.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


GOOD = 'name = "{n}"\nmodel_path = "org/m"\nentrypoint = "simulator.launch_server"\n[flags]\nenable-metrics = true\n{f}\n[env]\n{e}\n'
FAST_ENV = 'SGLANG_SIM_SPEED = "50"\nSGLANG_SIM_STARTUP_S = "0.5"'


@pytest.fixture
def cli_env(data_env, tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "one.toml").write_text(GOOD.format(n="one", f="max-running-requests = 8", e=FAST_ENV))
    (folder / "two.toml").write_text(GOOD.format(n="two", f="max-running-requests = 16", e=FAST_ENV))
    (folder / "bad.toml").write_text(GOOD.format(n="bad", f="enable-radix-cache = true\ncuda-graph-max-bs = 64", e=""))
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    return folder


def test_help_everywhere(capsys) -> None:
    for cmd in (["profiles", "--help"], ["launch", "--help"], ["stop", "--help"], ["relaunch", "--help"]):
        with pytest.raises(SystemExit) as info:
            main(cmd)
        assert info.value.code == 0
    out = capsys.readouterr().out
    assert "one lifecycle action per server at a time" in out.lower()


def test_profiles_list_validate_diff(cli_env, capsys) -> None:
    assert main(["profiles", "list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == ["bad", "one", "two"]

    assert main(["profiles", "validate", "one"]) == 0
    assert "one: valid" in capsys.readouterr().out

    assert main(["profiles", "validate", str(cli_env / "bad.toml")]) == 1
    captured = capsys.readouterr()
    assert "--enable-radix-cache does not exist" in captured.out
    assert "removed in SGLang 0.5.20" in captured.out
    assert captured.err.strip() == "pitwall: profile bad is invalid (2 error(s))."

    assert main(["profiles", "validate", "nope"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("pitwall: No profile named 'nope'; known: bad, one, two") and "\n" not in err

    assert main(["profiles", "diff", "one", "two"]) == 0
    out = capsys.readouterr().out
    assert "flags.max-running-requests" in out and "8" in out and "16" in out


def test_lifecycle_without_runner_says_how_to_start_it(cli_env, capsys) -> None:
    assert main(["relaunch", "demo", "--profile", "one"]) == 1
    err = capsys.readouterr().err.strip()
    # it names the database it looked in, so a CLI reading another database than the page shows it
    assert err.startswith("pitwall: No runner is alive on the database sqlite:///") and "\n" not in err
    assert err.endswith("start the runner with `pitwall up`, or point this command at the page's "
                        "pitwall.toml with PITWALL_CONFIG.")


@pytest.mark.integration
def test_relaunch_through_the_cli_with_a_runner(cli_env, data_env, capsys) -> None:
    from cli.wiring import runner_parts
    from config.settings import load_settings
    from runner.loop import Runner
    from storage import repo
    from storage.db import make_engine

    settings = load_settings()
    engine = make_engine(settings.database_url)
    port = free_port()
    repo.upsert_server(engine, name="sim", base_url=f"http://127.0.0.1:{port}", managed=True, python=sys.executable,
                       profile="one", log_path=str(settings.logs_dir / "sim.log"))
    supervisor, handlers = runner_parts(settings, engine, auto_start=False)
    runner = Runner(engine, [], supervisor=supervisor, intent_handlers=handlers, tick_s=0.05)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        import time

        deadline = time.monotonic() + 10
        from dashboard.services.views import health

        while not health.runner_alive(engine) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert main(["launch", "sim", "--timeout", "60"]) == 0
        assert main(["relaunch", "sim", "--profile", "bad", "--timeout", "60"]) == 1
        err = capsys.readouterr().err
        assert "Nothing was changed: profile bad is invalid: --enable-radix-cache does not exist" in err
        assert main(["relaunch", "sim", "--profile", "two", "--timeout", "60"]) == 0
        out = capsys.readouterr().out
        # the final line is the contract; which progress stages a poll happens to see is not
        assert "sim is ready under profile two" in out
        # no --profile: the help says it defaults to the server's current profile (two, not one)
        assert main(["relaunch", "sim", "--timeout", "60"]) == 0
        assert "sim is ready under profile two" in capsys.readouterr().out
        sid = repo.get_server(engine, name="sim").id
        assert [la.status for la in repo.list_launches(engine, server_id=sid)][:3] == ["ready", "stopped", "stopped"]
        assert main(["stop", "sim", "--timeout", "60"]) == 0
        assert repo.latest_launch(engine, server_id=repo.get_server(engine, name="sim").id).status == "stopped"
        kinds = set(repo.list_events(engine)["kind"])
        assert "bad_cli_flag" in kinds
        assert [a.action for a in repo.list_audit(engine)] == ["stop", "relaunch", "relaunch", "relaunch", "launch"]
    finally:
        runner.stop()
        thread.join(30)
        engine.dispose()


@pytest.mark.parametrize("argv", [["launch", "sim"], ["stop", "sim"], ["relaunch", "sim", "--profile", "two"]])
def test_read_only_refuses_lifecycle_commands(cli_env, monkeypatch, capsys, argv) -> None:
    """read_only holds for the CLI too: one sentence, exit code 2, and no intent or audit row."""
    from storage import repo
    from storage.db import make_engine

    monkeypatch.setenv("PITWALL_READ_ONLY", "true")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"pitwall: Pitwall is read-only (read_only / PITWALL_READ_ONLY), so `pitwall {argv[0]}` "
                   "is refused; unset it to change servers.")
    engine = make_engine(f"sqlite:///{cli_env.parent / 'data' / 'pitwall.db'}")
    assert repo.list_intents(engine) == [] and repo.list_audit(engine) == []
    engine.dispose()
    assert main(["profiles", "list"]) == 0  # reading still works


def test_read_only_refuses_a_probe(cli_env, monkeypatch, capsys) -> None:
    """A sweep is a control on the dashboard; under read_only the CLI sends no load either."""
    monkeypatch.setenv("PITWALL_READ_ONLY", "true")
    assert main(["probe", "--url", "http://127.0.0.1:9", "--requests", "1"]) == 2
    assert "`pitwall probe` sends no load" in capsys.readouterr().err
