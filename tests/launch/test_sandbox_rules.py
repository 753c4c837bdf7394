"""The launch sandbox's deny table: a profile is data, never code.

Every code-loading, remote, path and port setting of the deny table is refused by validation
(`pitwall profiles validate`), by the Profiles editor's save and by a real launch attempt through
the runner's supervisor (refused before any process starts), each with one sentence naming the
key and, where it can be allowed, `launch.allow_unsandboxed`. Only pitwall.toml lifts a rule.
The secret flags leave argv for a 0600 `--config` file, which the simulator merges exactly as
SGLang 0.5.23's ConfigArgumentMerger does.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pwtest import free_port

from cli.main import main

HEAD = 'name = "{n}"\nmodel_path = "{m}"\nentrypoint = "simulator.launch_server"\n'
# name: (model_path, body after the head, the key the refusal names)
REFUSED: dict[str, tuple[str, str, str]] = {
    "cuda-injection": ("org/m", '[env]\nCUDA_INJECTION64_PATH = "/tmp/x.so"\n', "CUDA_INJECTION64_PATH"),
    "nccl-net": ("org/m", '[env]\nNCCL_NET_PLUGIN = "evil"\n', "NCCL_NET_PLUGIN"),
    "nccl-tuner": ("org/m", '[env]\nNCCL_TUNER_PLUGIN = "evil"\n', "NCCL_TUNER_PLUGIN"),
    "ptxas": ("org/m", '[env]\nTRITON_PTXAS_PATH = "/tmp/ptxas"\n', "TRITON_PTXAS_PATH"),
    "cuda-home": ("org/m", '[env]\nCUDA_HOME = "/tmp/cuda"\n', "CUDA_HOME"),
    "external-pkg": ("org/m", '[env]\nSGLANG_EXTERNAL_MODEL_PACKAGE = "evil"\n', "SGLANG_EXTERNAL_MODEL_PACKAGE"),
    "hf-endpoint": ("org/m", '[env]\nHF_ENDPOINT = "https://evil.example"\n', "HF_ENDPOINT"),
    "remote-code": ("org/m", "[flags]\ntrust-remote-code = true\n", "trust-remote-code"),
    "logit-proc": ("org/m", "[flags]\nenable-custom-logit-processor = true\n", "enable-custom-logit-processor"),
    "weight-loader": ("org/m", '[flags]\ncustom-weight-loader = "evil.load"\n', "custom-weight-loader"),
    "hooks": ("org/m", '[flags]\nforward-hooks = "[{\\"hook_factory\\": \\"evil:f\\"}]"\n', "forward-hooks"),
    "remote-tokenizer": ("org/m", '[flags]\ntokenizer-path = "https://evil.example/tok"\n', "tokenizer-path"),
    "config": ("org/m", '[flags]\nconfig = "flags.yaml"\n', "config"),
    "model-etc": ("/etc", "", "model_path"),
    "model-climb": ("../../etc", "", "model_path"),
    "crash-dump": ("org/m", '[flags]\ncrash-dump-folder = "/etc/cron.d"\n', "crash-dump-folder"),
    "dash-port": ("org/m", "[flags]\nnccl-port = 8501\n", "nccl-port"),
    "demo-dcgm-port": ("org/m", "[flags]\nnccl-port = 30200\n", "nccl-port"),
}


@pytest.fixture
def rule_dir(data_env, tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "profiles"
    folder.mkdir()
    for name, (model, body, _) in REFUSED.items():
        (folder / f"{name}.toml").write_text(HEAD.format(n=name, m=model) + body)
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    return folder


def _allow(tmp_path: Path, monkeypatch, text: str) -> None:
    cfg = tmp_path / "pitwall.toml"
    cfg.write_text(text)
    monkeypatch.setenv("PITWALL_CONFIG", str(cfg))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_validation_refuses_each_with_one_sentence_naming_the_key(rule_dir, capsys, name: str) -> None:
    assert main(["profiles", "validate", name, "--bundled"]) == 1
    errors = [ln.strip() for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("error:")]
    assert len(errors) == 1 or (name == "model-climb" and "does not exist" in errors[1]), errors
    key = REFUSED[name][2]
    assert key in errors[0], errors
    if not name.endswith("port") and name != "config":
        assert f'add "{key}" to launch.allow_unsandboxed in pitwall.toml' in errors[0] or "'..'" in errors[0]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_editor_refuses_each_before_saving(rule_dir, name: str) -> None:
    from config.settings import load_settings
    from dashboard.services import profile_admin
    from storage import repo
    from storage.db import make_engine

    settings = load_settings()
    engine = make_engine(settings.database_url)
    model, body, key = REFUSED[name]
    text = HEAD.format(n="edited", m=model) + body
    with pytest.raises(profile_admin.ProfileError, match=f"edited was not saved: .*{key}"):
        profile_admin.save_toml(engine, settings, text, "op")
    assert not (rule_dir / "edited.toml").exists() and repo.get_profile(engine, name="edited") is None


def test_only_pitwall_toml_lifts_a_rule_and_the_page_lists_it(rule_dir, tmp_path, monkeypatch, capsys) -> None:
    from config.settings import load_settings
    from launching import sandbox

    _allow(tmp_path, monkeypatch, '[launch]\nallow_unsandboxed = ["trust-remote-code", "CUDA_INJECTION64_PATH"]\n'
                                  'allowed_env = ["NCCL_NET_PLUGIN", "MY_*"]\n')
    assert main(["profiles", "validate", "remote-code", "--bundled"]) == 0
    assert main(["profiles", "validate", "cuda-injection", "--bundled"]) == 0
    capsys.readouterr()
    # allowed_env never lifts a deny rule
    assert main(["profiles", "validate", "nccl-net", "--bundled"]) == 1
    assert "launch.allow_unsandboxed" in capsys.readouterr().out
    lines = sandbox.allowances(load_settings())
    assert any(ln.startswith("trust-remote-code: allowed although it runs") for ln in lines)
    assert any("CUDA_INJECTION64_PATH" in ln for ln in lines) and any("MY_" in ln for ln in lines)
    # a profile cannot allow itself: the key is not a profile key
    (rule_dir / "self.toml").write_text(HEAD.format(n="self", m="org/m")
                                        + 'allow_unsandboxed = ["forward-hooks"]\n[flags]\nforward-hooks = "x"\n')
    assert main(["profiles", "validate", "self", "--bundled"]) != 0


def test_a_prefix_entry_still_admits_a_name_with_a_warning(rule_dir, tmp_path, monkeypatch, capsys) -> None:
    _allow(tmp_path, monkeypatch, '[launch]\nallowed_env = ["MY_*"]\n')
    (rule_dir / "mine.toml").write_text(HEAD.format(n="mine", m="org/m") + '[env]\nMY_KNOB = "1"\n')
    assert main(["profiles", "validate", "mine", "--bundled"]) == 0
    assert "prefix entry of launch.allowed_env" in capsys.readouterr().out


def test_written_paths_stay_in_the_data_folder(tmp_path) -> None:
    from collectors.sglang import sandbox

    data = tmp_path / "data"
    (data / "dumps").mkdir(parents=True)
    (data / "escape").symlink_to("/etc")
    ctx = sandbox.Context(data_dir=data)
    ok = sandbox.check_profile("org/m", {"crash-dump-folder": str(data / "dumps"), "download-dir": "dumps"}, {}, ctx)
    assert ok == []
    for value in ("escape/cron.d", str(data / "dumps" / ".." / ".." / "x"), "/tmp/elsewhere"):
        (issue,) = sandbox.check_profile("org/m", {"crash-dump-folder": value}, {}, ctx)
        assert "outside Pitwall's data folder" in issue.message
    (issue,) = sandbox.check_profile("org/m", {}, {"HF_HOME": "/var/cache/hf"}, ctx)
    assert issue.flag == "HF_HOME"


def test_a_model_in_the_runners_home_is_read_but_its_secret_folders_are_not(tmp_path, monkeypatch) -> None:
    """A runner started as root keeps its models in its ~/.cache: a home is no system folder,
    its ~/.ssh is (the real-SGLang tier's model lives there, and was refused once)."""
    from collectors.sglang import sandbox

    home = tmp_path / "home"
    (home / ".cache" / "model").mkdir(parents=True)
    (home / ".ssh").mkdir()
    monkeypatch.setenv("HOME", str(home))
    ctx = sandbox.Context(data_dir=tmp_path / "data")
    assert sandbox.check_profile(str(home / ".cache" / "model"), {}, {}, ctx) == []
    assert sandbox.check_profile(str(Path("/root") / ".cache" / "pitwall" / "model"), {}, {}, ctx) == []
    (issue,) = sandbox.check_profile(str(home / ".ssh"), {}, {}, ctx)
    assert "system folder" in issue.message


def test_ports_keep_off_what_pitwall_holds() -> None:
    from collectors.sglang import sandbox

    reserved = {8501: ("the dashboard's port", None), 30200: ("the demo server's dcgm-exporter port", "demo")}
    ctx = sandbox.Context(reserved_ports=reserved, server="demo", own_port=30100)
    # the demo's own companion (+100) is its own; a port of its own HTTP server is not
    assert sandbox.check_profile("org/m", {}, {"SGLANG_SIM_DCGM_PORT": "+100"}, ctx) == []
    (own,) = sandbox.check_profile("org/m", {"grpc-port": 30100}, {}, ctx)
    assert "the server's own HTTP port" in own.message
    (dup,) = sandbox.check_profile("org/m", {"grpc-port": 31000, "nccl-port": 31000}, {}, ctx)
    assert "also given to grpc-port" in dup.message
    (addr,) = sandbox.check_profile("org/m", {"dist-init-addr": "127.0.0.1:8501"}, {}, ctx)
    assert "the dashboard's port" in addr.message
    other = sandbox.Context(reserved_ports=reserved, server="other", own_port=31100)
    (taken,) = sandbox.check_profile("org/m", {}, {"SGLANG_SIM_DCGM_PORT": "30200"}, other)
    assert "dcgm-exporter" in taken.message


def test_a_real_launch_is_refused_before_any_process_starts(data_env, tmp_path, monkeypatch) -> None:
    """A profile written to disk past the editor (or a pitwall.toml that no longer allows it):
    the runner's launch path judges it again and starts nothing."""
    from cli.wiring import runner_parts
    from config.settings import load_settings
    from launching import launcher
    from storage import repo
    from storage.db import make_engine

    folder = tmp_path / "profiles"
    folder.mkdir()
    marker = tmp_path / "ran"
    (folder / "sneaky.toml").write_text(HEAD.format(n="sneaky", m="org/m")
                                        + f'[flags]\ncrash-dump-folder = "{marker}"\ntrust-remote-code = true\n')
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    settings = load_settings()
    engine = make_engine(settings.database_url)
    server = repo.upsert_server(engine, name="s1", base_url=f"http://127.0.0.1:{free_port()}", managed=True,
                                python=sys.executable, profile="sneaky")
    supervisor, _ = runner_parts(settings, engine, auto_start=False)
    intent = launcher.request(engine, kind="launch", server_name="s1", actor="op")
    supervisor.handle_intent(repo.get_intent(engine, intent_id=intent.id))
    done = repo.get_intent(engine, intent_id=intent.id)
    assert done.state == "failed" and "crash-dump-folder" in done.message and "(+1 more)" in done.message
    assert repo.list_launches(engine, server_id=server.id) == []  # no process was started
    events = repo.list_events(engine, server_id=server.id, limit=10)
    assert list(events["kind"]) == ["bad_cli_flag"] and "trust-remote-code is refused" in events["raw"][0]
    assert not marker.exists()


def test_secret_flags_leave_argv_for_a_private_config_file(data_env, tmp_path, monkeypatch) -> None:
    from config.settings import load_settings
    from launching import launcher
    from storage import repo
    from storage.db import make_engine

    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "keyed.toml").write_text(HEAD.format(n="keyed", m="org/m") + '[flags]\napi-key = "K3Y"\nenable-metrics = true\n')
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    settings = load_settings()
    engine = make_engine(settings.database_url)
    server = repo.upsert_server(engine, name="s1", base_url=f"http://127.0.0.1:{free_port()}", managed=True,
                                python=sys.executable, profile="keyed")
    plan = launcher.Planner(settings, engine)(server, None, False)
    assert "K3Y" not in " ".join(plan.argv) and plan.argv[-2] == "--config"
    path = Path(plan.argv[-1])
    assert path.parent == settings.data_dir / "run" and path.suffix == ".yaml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {"api-key": "K3Y"}


SIM = [sys.executable, "-c", "import sys; from simulator.launch_server import merge_config; "
       "from simulator.args import parse_args; ns = parse_args(merge_config(sys.argv[1:])); "
       "print(ns.api_key, ns.max_running_requests, ns.enable_metrics)"]


def _sim(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([*SIM, "--model-path", "org/m", *args], capture_output=True, text=True, env=env, timeout=60)


def test_the_simulator_merges_config_as_sglang_does(tmp_path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text('{"api-key": "K3Y", "max-running-requests": 4, "enable-metrics": true}\n')
    assert _sim("--config", str(cfg)).stdout.split() == ["K3Y", "4", "True"]
    # the command line wins: the file's pairs go first
    assert _sim("--max-running-requests", "9", "--config", str(cfg)).stdout.split() == ["K3Y", "9", "True"]
    # `--config=PATH` parses and is silently ignored (SGLang looks for the exact token)
    assert _sim(f"--config={cfg}").stdout.split() == ["None", "None", "False"]
    block = tmp_path / "b.yml"
    block.write_text("api-key: 'K'\nmax-running-requests: 5\nenable-metrics: false\n")
    assert _sim("--config", str(block)).stdout.split() == ["K", "5", "False"]
    bad = tmp_path / "c.json"
    bad.write_text("{}")
    for args, why in ((("--config", str(bad)), "must be YAML"), (("--config", str(tmp_path / "no.yaml")), "not found"),
                      (("--config", str(cfg), "--config", str(cfg)), "Multiple config files")):
        proc = _sim(*args)
        assert proc.returncode == 1 and why in proc.stderr


def test_an_alias_of_a_denied_flag_is_judged_as_the_flag_it_spells(tmp_path) -> None:
    """SGLang's parser takes every alias of a flag (speculative-draft-model is
    speculative-draft-model-path): each alias of a denied flag in the bundled 0.5.23 table is
    refused as that flag is, and a remote load format is refused on both load-format flags."""
    from collectors.sglang import flags, sandbox

    ctx = sandbox.Context(data_dir=tmp_path / "data", reserved_ports={8501: ("the dashboard", None)})
    values = {"port": 8501, "code": True, "remote": "http://example.invalid/x", "model": "/etc",
              "read": "/etc/shadow", "write": "/etc/cron.d", "never": "/tmp/x.yaml"}
    checked = 0
    for spec in {id(s): s for s in flags.bundled_table().values()}.values():
        rule = sandbox.DENY_FLAGS.get(spec.name)
        if rule is None or rule.kind not in values:
            continue
        for alias in spec.aliases:
            if alias == spec.name:
                continue
            issues = sandbox.check_profile("org/m", {alias: values[rule.kind]}, {}, ctx)
            assert issues, (alias, spec.name, rule.kind)
            checked += 1
    assert checked >= 2  # grpc-http-sidecar-port, speculative-draft-model at least
    for flag in ("load-format", "speculative-draft-load-format"):
        (issue,) = sandbox.check_profile("org/m", {flag: "remote"}, {}, ctx)
        assert issue.flag == flag and "remote service" in issue.message
