"""The launch sandbox: a profile is data, never code.

Eight hostile profiles are each refused by `pitwall profiles validate`, with and
without --bundled (exit 1, one reason each, naming the key); the argv Pitwall builds has one
`--flag=value` token per flag and Pitwall's own flags last; the Profiles editor refuses the same
profiles before saving. The real-parser half (`hos` under SGLang's own parser with abbreviations
off) is in test_real_parser_validation.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cli.main import main
from collectors.sglang.launch import build_argv

HEAD = 'name = "{n}"\nmodel_path = "org/m"\nentrypoint = "{e}"\n'
HOSTILE: dict[str, tuple[str, str, str]] = {
    # name: (entrypoint, body after the head, the key the refusal names)
    "ld-preload": ("simulator.launch_server", '[env]\nLD_PRELOAD = "evil.so"\n', "LD_PRELOAD"),
    "pythonpath": ("simulator.launch_server", '[env]\nPYTHONPATH = "evil"\n', "PYTHONPATH"),
    "path": ("simulator.launch_server", '[env]\nPATH = "evil:/usr/bin"\n', "PATH"),
    "list-injection": ("simulator.launch_server", '[flags]\nlora-paths = ["a", "--host", "0.0.0.0"]\n', "lora-paths"),
    "dash-value": ("simulator.launch_server", '[flags]\nserved-model-name = "--host=0.0.0.0"\n', "served-model-name"),
    "abbreviation": ("simulator.launch_server", '[flags]\nhos = "0.0.0.0"\n', "hos"),
    "http-server": ("http.server", "", "entrypoint"),
    "os": ("os", "", "entrypoint"),
}


@pytest.fixture
def hostile_dir(data_env, tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "profiles"
    folder.mkdir()
    for name, (entry, body, _) in HOSTILE.items():
        (folder / f"{name}.toml").write_text(HEAD.format(n=name, e=entry) + body)
    (folder / "fine.toml").write_text(HEAD.format(n="fine", e="simulator.launch_server")
                                      + '[flags]\nlora-paths = ["a", "b"]\n[env]\nNCCL_TIMEOUT = "600"\n')
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    return folder


@pytest.mark.parametrize("bundled", [True, False], ids=["bundled", "default"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_profile_is_refused_with_one_reason(hostile_dir, capsys, name: str, bundled: bool) -> None:
    argv = ["profiles", "validate", name] + (["--bundled"] if bundled else [])
    assert main(argv) == 1
    out = capsys.readouterr()
    errors = [ln.strip() for ln in out.out.splitlines() if ln.strip().startswith("error:")]
    assert len(errors) == 1, errors
    key = HOSTILE[name][2]
    assert key in errors[0], errors
    assert "(1 error(s))" in out.err


def test_a_harmless_profile_passes(hostile_dir, capsys) -> None:
    assert main(["profiles", "validate", "fine", "--bundled"]) == 0
    assert "fine: valid" in capsys.readouterr().out


def test_settings_widen_the_allow_lists_but_never_to_loader_or_interpreter_variables(hostile_dir, capsys, tmp_path, monkeypatch) -> None:
    cfg = tmp_path / "pitwall.toml"
    cfg.write_text('[launch]\nallowed_env = ["LD_PRELOAD", "MY_*"]\nallowed_entrypoints = ["http.server"]\n')
    monkeypatch.setenv("PITWALL_CONFIG", str(cfg))
    (hostile_dir / "mine.toml").write_text(HEAD.format(n="mine", e="simulator.launch_server") + '[env]\nMY_KNOB = "1"\n')
    assert main(["profiles", "validate", "mine", "--bundled"]) == 0
    assert main(["profiles", "validate", "http-server", "--bundled"]) == 0  # named by the operator
    capsys.readouterr()
    assert main(["profiles", "validate", "ld-preload", "--bundled"]) == 1  # never, whatever the setting
    assert "LD_PRELOAD is refused" in capsys.readouterr().out


def test_argv_has_one_token_per_flag_and_pitwall_flags_last() -> None:
    argv = build_argv(sys.executable, "sglang.launch_server", "org/m", "127.0.0.1", 30000,
                      {"mem-fraction-static": 0.8, "enable-metrics": True, "disable-radix-cache": False,
                       "json-model-override-args": {"a": 1}, "lora-paths": ["x", "y"]})
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    assert argv[3:] == ["--mem-fraction-static=0.8", "--enable-metrics", '--json-model-override-args={"a":1}',
                        "--lora-paths", "x", "y", "--model-path", "org/m", "--host=127.0.0.1", "--port=30000"]


def test_profiles_editor_refuses_before_saving(hostile_dir, data_env) -> None:
    from config.settings import load_settings
    from dashboard.services import profile_admin
    from storage import repo
    from storage.db import make_engine

    settings = load_settings()
    engine = make_engine(settings.database_url)
    text = HEAD.format(n="sneaky", e="simulator.launch_server") + '[env]\nPYTHONPATH = "evil"\n'
    with pytest.raises(profile_admin.ProfileError, match="sneaky was not saved: Environment variable PYTHONPATH is refused"):
        profile_admin.save_toml(engine, settings, text, "op")
    assert not (hostile_dir / "sneaky.toml").exists()
    assert repo.get_profile(engine, name="sneaky") is None
