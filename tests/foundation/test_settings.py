"""Settings: precedence, validation messages naming the key, demo activation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from config.settings import SettingsError, load_settings


def test_defaults_bind_loopback_and_put_db_in_data_dir(tmp_path):
    s = load_settings(env={"PITWALL_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    assert s.host == "127.0.0.1" and s.port == 8501 and not s.exposed
    assert s.database_url == f"sqlite:///{tmp_path / 'pitwall.db'}"
    assert s.demo_active  # no servers configured
    assert s.probe["concurrency"] == [1, 4, 8, 16]


def test_env_wins_over_file(tmp_path):
    (tmp_path / "pitwall.toml").write_text('port = 9000\nhost = "0.0.0.0"\n')
    s = load_settings(env={"PITWALL_PORT": "9100"}, cwd=tmp_path)
    assert s.port == 9100 and s.host == "0.0.0.0" and s.exposed


def test_servers_table(tmp_path):
    (tmp_path / "pitwall.toml").write_text(
        '[[servers]]\nname = "a"\nbase_url = "http://127.0.0.1:30000"\ngpu_indices = [0, 1]\n'
        "gpu_hourly_usd = 3\n"
    )
    s = load_settings(env={}, cwd=tmp_path)
    assert s.servers[0].gpu_hourly_usd == 3.0 and s.servers[0].gpu_indices == [0, 1]
    assert not s.demo_active


def test_a_servers_engine_reaches_its_row(tmp_path):
    """[[servers]] engine picks the engine (Server.engine); without it, the settings default."""
    from dashboard.services.views.servers import sync_servers
    from storage.db import make_engine

    (tmp_path / "pitwall.toml").write_text(
        '[[servers]]\nname = "a"\nbase_url = "http://127.0.0.1:30000"\nengine = "toy"\n'
        '[[servers]]\nname = "b"\nbase_url = "http://127.0.0.1:30001"\n')
    s = load_settings(env={"PITWALL_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    engine = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    rows = {r.name: r.engine for r in sync_servers(engine, s)}
    engine.dispose()
    assert rows == {"a": "toy", "b": s.servers[1].engine} and s.servers[1].engine != "toy"


def test_a_disaggregated_service_reaches_its_rows(tmp_path):
    """[[servers]] service and role group a PD service's members; metrics_url points the router's
    scrape at its metrics port."""
    from dashboard.services.views.servers import sync_servers
    from storage.db import make_engine

    (tmp_path / "pitwall.toml").write_text(
        '[[servers]]\nname = "p"\nbase_url = "http://127.0.0.1:30000"\nservice = "chat"\nrole = "prefill"\n'
        '[[servers]]\nname = "r"\nbase_url = "http://127.0.0.1:30002"\nservice = "chat"\nrole = "router"\n'
        'metrics_url = "http://127.0.0.1:29000/metrics"\n')
    s = load_settings(env={"PITWALL_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    engine = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    rows = {r.name: (r.service, r.role, r.metrics_url) for r in sync_servers(engine, s)}
    engine.dispose()
    assert rows == {"p": ("chat", "prefill", None), "r": ("chat", "router", "http://127.0.0.1:29000/metrics")}


@pytest.mark.parametrize(
    ("toml", "env", "needle"),
    [
        ("[[servers]]\nname = 'a'\nbase_url = 'http://h:1'\nrole = 'decode'\n", {},
         "servers[0] has role without service"),
        ("[[servers]]\nname = 'a'\nbase_url = 'http://h:1'\nservice = 's'\nrole = 'both'\n", {},
         "servers[0].role is 'both'; expected one of prefill, decode, router"),
        ("[[servers]]\nname = 'a'\nbase_url = 'http://h:1'\nmetrics_url = 'h:29000'\n", {},
         "servers[0].metrics_url is 'h:29000'; expected a URL"),
        ("[[servers]]\nname = 'a'\nbase_url = 'http://h:1'\nservice = 's'\nrole = 'router'\n", {},
         "servers[0] is a router without metrics_url"),
        ("port = 'abc'\n", {}, "Setting port (pitwall.toml) is 'abc'; expected a whole number"),
        ("", {"PITWALL_PORT": "x"}, "Setting port (PITWALL_PORT) is 'x'"),
        ("", {"PITWALL_READ_ONLY": "maybe"}, "Setting read_only (PITWALL_READ_ONLY) is 'maybe'; expected true or false"),
        ("[probe]\nconcurrency = [0]\n", {}, "Setting probe.concurrency"),
        ("[[servers]]\nname = 'a'\n", {}, "servers[0].base_url is missing"),
        ("[[servers]]\nname = 'a'\nbase_url = 'localhost:1'\n", {}, "expected a URL"),
        ("[[servers]]\nname = 'a'\nbase_url = 'http://x'\ngpus = 2\n", {}, "servers[0].gpus is unknown"),
        ("colour = 'red'\n", {}, "Setting colour in"),
        ("port = \n", {}, "is not valid TOML"),
    ],
)
def test_invalid_settings_name_key_and_form(tmp_path, toml, env, needle):
    (tmp_path / "pitwall.toml").write_text(toml)
    with pytest.raises(SettingsError) as exc:
        load_settings(env=env, cwd=tmp_path)
    assert needle in str(exc.value)


def test_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(env={"PITWALL_CONFIG": str(tmp_path / "nope.toml")}, cwd=Path(tmp_path))


def test_the_cli_from_another_folder_reads_the_pages_database(tmp_path, monkeypatch):
    """The page (started from the checkout by `make run`) and a CLI command run from the home
    folder read the same file, the checkout's pitwall.toml (not the default database for want
    of a ./pitwall.toml), and its relative data_dir is relative to the file, not to where the
    command runs."""
    import config.settings as settings_mod

    checkout, home = tmp_path / "checkout", tmp_path / "home"
    checkout.mkdir()
    home.mkdir()
    (checkout / "pitwall.toml").write_text('data_dir = "data"\nport = 8600\n')
    monkeypatch.setattr(settings_mod, "REPO_ROOT", checkout)
    for var in [v for v in os.environ if v.startswith("PITWALL_")]:
        monkeypatch.delenv(var)  # the real environment (env=None): the only one that reads the checkout's file
    page = load_settings(cwd=checkout)
    cli = load_settings(cwd=home)
    assert page.database_url == cli.database_url == f"sqlite:///{checkout / 'data' / 'pitwall.db'}"
    assert cli.config_path == checkout / "pitwall.toml" and cli.port == 8600
    # the same file named through PITWALL_CONFIG from elsewhere: still the file's data folder
    named = load_settings(env={"PITWALL_CONFIG": str(checkout / "pitwall.toml")}, cwd=home)
    assert named.database_url == page.database_url
    # PITWALL_CONFIG set empty (the tests' isolation) reads only ./pitwall.toml
    assert load_settings(env={"PITWALL_CONFIG": "", "PITWALL_DATA_DIR": str(home)}, cwd=home).config_path is None
    # a relative PITWALL_DATA_DIR stays relative to the current folder
    assert load_settings(env={"PITWALL_DATA_DIR": "d"}, cwd=home).data_dir == home / "d"


def test_an_explicit_env_never_reads_the_checkouts_pitwall_toml(tmp_path, monkeypatch):
    """An explicit `env` dict without PITWALL_CONFIG never reads the developer's pitwall.toml
    beside app.py; only the real environment (env=None) falls back to the checkout's file."""
    import config.settings as settings_mod

    checkout, home = tmp_path / "checkout", tmp_path / "home"
    checkout.mkdir()
    home.mkdir()
    (checkout / "pitwall.toml").write_text("port = 8611\n")
    monkeypatch.setattr(settings_mod, "REPO_ROOT", checkout)
    got = load_settings(env={"PITWALL_DATA_DIR": str(home)}, cwd=home)
    assert got.config_path is None and got.port != 8611


def test_relative_paths_in_the_file_are_relative_to_the_file(tmp_path):
    """A relative profiles_dir or sqlite database path in pitwall.toml is read from the file's
    folder, like data_dir, never from the current folder."""
    conf, elsewhere = tmp_path / "conf", tmp_path / "elsewhere"
    conf.mkdir()
    elsewhere.mkdir()
    (conf / "pitwall.toml").write_text('profiles_dir = "profiles"\ndatabase_url = "sqlite:///db/p.db"\n')
    got = load_settings(env={"PITWALL_CONFIG": str(conf / "pitwall.toml")}, cwd=elsewhere)
    assert got.profiles_dir == conf / "profiles"
    assert got.database_url == f"sqlite:///{conf / 'db' / 'p.db'}"
    # a relative path from the environment stays relative to the current folder
    env = {"PITWALL_CONFIG": str(conf / "pitwall.toml"), "PITWALL_PROFILES_DIR": "mine"}
    assert load_settings(env=env, cwd=elsewhere).profiles_dir == elsewhere / "mine"
