"""Every validation message of profiles: flags (bundled 0.5.23 table and the real-parser path),
env, guardrails, and the argv a profile turns into."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from collectors.sglang import flags as sglang_flags
from collectors.sglang import sandbox as sglang_sandbox
from collectors.sglang.launch import build_argv, flag_args, startup_progress
from launching import guardrails, launcher
from launching.guardrails import GpuProcess
from launching.profiles import ProfileSpec
from runner.launch_plan import reason_line
from storage.models import Server

REPO = Path(__file__).resolve().parents[2]


def msgs(flags: dict, severity: str = "error") -> list[str]:
    return [i.message for i in sglang_flags.check_flags(flags) if i.severity == severity]


# -- the bundled table ----------------------------------------------------------------------------


def test_bundled_table_is_sglang_0_5_23_help() -> None:
    table = sglang_flags.bundled_table()
    # One copy of the help text, captured from the real server, next to the flag module.
    help_file = REPO / "collectors" / "sglang" / "sglang-0.5.23-help.txt"
    assert sglang_flags.HELP_FILE.resolve() == help_file
    assert sglang_flags.parse_help_text(help_file.read_text()) == table
    assert len({s.name for s in table.values()}) > 500
    assert table["disable-radix-cache"].kind == "switch"
    assert table["enable-tf32-matmul"].kind == "boolopt"
    assert table["tensor-parallel-size"].name == "tp-size"
    assert table["lora-paths"].kind == "list"
    assert table["schedule-policy"].choices == (
        "lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key", "hrrn", "shortest-prefill-first")
    assert "enable-radix-cache" not in table and "cuda-graph-max-bs" not in table
    assert table["disable-cuda-graph"].deprecated.startswith("Deprecated.")


def test_parse_help_text_small_sample() -> None:
    text = (
        "usage: sglang serve [-h]\n\noptions:\n  -h, --help            show this help\n"
        "  --port PORT           The port.\n"
        "  --tp-size TP_SIZE, --tensor-parallel-size TP_SIZE\n                        TP.\n"
        "  --kind {a,b}\n  --xs XS [XS ...]\n  --opt [OPT]\n  --flag\n  --old  Deprecated. Use --new.\n"
    )
    t = sglang_flags.parse_help_text(text)
    assert (t["port"].kind, t["kind"].choices, t["xs"].kind, t["opt"].kind, t["flag"].kind) == (
        "value", ("a", "b"), "list", "optional", "switch")
    assert t["tensor-parallel-size"] is t["tp-size"]
    assert t["old"].deprecated == "Deprecated. Use --new."


# -- flag messages ---------------------------------------------------------------------------------


def test_enable_radix_cache_does_not_exist() -> None:
    assert msgs({"enable-radix-cache": True}) == [
        "--enable-radix-cache does not exist in any SGLang release: the radix cache is on by "
        "default; `disable-radix-cache = true` turns it off."
    ]


def test_cuda_graph_max_bs_removed_names_replacements() -> None:
    (m,) = msgs({"cuda-graph-max-bs": 64})
    assert "removed in SGLang 0.5.20" in m and "cuda-graph-max-bs-decode" in m and "cuda-graph-max-bs-prefill" in m


def test_disable_cuda_graph_is_a_warning_with_replacement() -> None:
    assert msgs({"disable-cuda-graph": True}) == []
    (w,) = msgs({"disable-cuda-graph": True}, "warning")
    assert "deprecated since SGLang 0.5.14" in w and 'cuda-graph-backend-decode = "disabled"' in w


def test_other_deprecations_come_from_sglang_help() -> None:
    (w,) = msgs({"grpc-mode": True}, "warning")
    assert "deprecated in SGLang 0.5.23" in w and "smg-grpc-mode" in w
    (w2,) = msgs({"enable-dp-attention": True}, "warning")
    assert "attn-dp-size" in w2


def test_stream_output_was_renamed() -> None:
    (m,) = msgs({"stream-output": True})
    assert "incremental-streaming-output" in m


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"tp-size": "two"}, "--tp-size is 'two'; expected a whole number, e.g. tp-size = 8."),
        ({"max-running-requests": 8.5}, "--max-running-requests is 8.5; expected a whole number"),
        ({"mem-fraction-static": "high"}, "--mem-fraction-static is 'high'; expected a number, e.g. mem-fraction-static = 0.85."),
        ({"disable-radix-cache": "yes"}, "--disable-radix-cache is a switch and takes no value; write `disable-radix-cache = true`"),
        ({"enable-tf32-matmul": 1}, "--enable-tf32-matmul is a switch; write `enable-tf32-matmul = true` or `enable-tf32-matmul = false`."),
        ({"schedule-policy": True}, '--schedule-policy needs a value, not true; e.g. schedule-policy = "lpm".'),
        ({"max-prefill-tokens": [1, 2]}, "--max-prefill-tokens takes one value, not a list."),
        ({"tp-size": 0}, "--tp-size is 0; expected a value >= 1."),
        ({"served-model-name": "a\x00b"}, "--served-model-name contains a NUL character; remove it."),
    ],
)
def test_wrong_types(flags: dict, expected: str) -> None:
    found = msgs(flags)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_bad_choice_schedule_policy_suggests() -> None:
    (m,) = msgs({"schedule-policy": "lpn"})
    assert m.startswith("--schedule-policy is 'lpn'; expected one of lpm, random, fcfs,")
    assert m.endswith("Did you mean 'lpm'?")


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0, 1.2, -0.1, float("nan")])
def test_mem_fraction_static_outside_open_unit_interval(value: float) -> None:
    (m,) = msgs({"mem-fraction-static": value})
    assert "--mem-fraction-static" in m and ("(0, 1)" in m or "finite" in m)


@pytest.mark.parametrize("value", [0.01, 0.5, 0.99])
def test_mem_fraction_static_inside_is_fine(value: float) -> None:
    assert msgs({"mem-fraction-static": value}) == []


def test_typo_gets_close_match() -> None:
    assert msgs({"max-runing-requests": 8}) == [
        "--max-runing-requests is not an SGLang 0.5.23 flag. Did you mean --max-running-requests?"
    ]
    assert msgs({"zzz-nothing-like-it": 1}) == ["--zzz-nothing-like-it is not an SGLang 0.5.23 flag."]


def test_dashes_and_reserved_flags() -> None:
    assert msgs({"--mem-fraction-static": 0.8}) == [
        "Flag '--mem-fraction-static': write flags without their leading dashes, e.g. `mem-fraction-static = ...`."
    ]
    assert msgs({"port": 30000}) == [
        "--port cannot be set in [flags]: the port comes from the server's base_url in pitwall.toml."
    ]
    assert "model_path" in msgs({"model-path": "x"})[0]
    assert "not a flag name" in msgs({"Mem Fraction": 1})[0]


def test_alias_is_accepted_with_a_note() -> None:
    issues = sglang_flags.check_flags({"tensor-parallel-size": 2})
    assert [(i.severity, i.message) for i in issues] == [("note", "--tensor-parallel-size is an alias of --tp-size.")]


def test_valid_flags_pass() -> None:
    ok = {"mem-fraction-static": 0.8, "schedule-policy": "lpm", "disable-radix-cache": True,
          "cuda-graph-max-bs-decode": 256, "log-requests-level": 2, "chunked-prefill-size": -1,
          "enable-tf32-matmul": False, "lora-paths": ["a=/x", "b=/y"], "json-model-override-args": {"a": 1}}
    assert [i for i in sglang_flags.check_flags(ok) if i.severity == "error"] == []


# -- env ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"nccl_timeout": "1"}, "Environment variable name 'nccl_timeout' is invalid"),
        ({"1ABC": "1"}, "Environment variable name '1ABC' is invalid"),
        ({"A-B": "1"}, "Environment variable name 'A-B' is invalid"),
        ({"NCCL_TIMEOUT": "18\x0000"}, "Environment variable NCCL_TIMEOUT contains a NUL character; remove it."),
        ({"SGLANG_LOG_MS": True}, "Environment variable SGLANG_LOG_MS is True; expected a string"),
        ({"NCCL_DEBUG": {"a": 1}}, "Environment variable NCCL_DEBUG is {'a': 1}; expected a string"),
        ({"FLAG": "1"}, "Environment variable FLAG is not on the allow-list"),
        ({"LD_PRELOAD": "x.so"}, "Environment variable LD_PRELOAD is refused"),
    ],
)
def test_env_messages(env: dict, expected: str) -> None:
    (issue,) = sglang_sandbox.check_env(env)
    assert issue.severity == "error" and issue.message.startswith(expected)


def test_env_valid() -> None:
    # values are data: the child gets them as environment strings, never through a shell
    assert sglang_sandbox.check_env({"NCCL_TIMEOUT": "1800", "NCCL_DEBUG": "a b;$(rm -rf /)", "OMP_NUM_THREADS": 3}) == []


# -- guardrails -------------------------------------------------------------------------------------


def test_port_in_use_and_free() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        (issue,) = guardrails.check_port("127.0.0.1", port)
        assert issue.message == (f"Port {port} on 127.0.0.1 is already in use by another process; "
                                 "stop it or change the server's base_url.")
    assert guardrails.check_port("127.0.0.1", port) == []


def test_model_path(tmp_path: Path) -> None:
    assert guardrails.check_model_path(str(tmp_path)) == []
    (missing,) = guardrails.check_model_path(str(tmp_path / "nope"))
    assert missing.severity == "error" and "does not exist on this host" in missing.message
    (hf,) = guardrails.check_model_path("Qwen/Qwen2.5-7B-Instruct")
    assert hf.severity == "note" and "Hugging Face id" in hf.message
    (bad,) = guardrails.check_model_path("not a model")
    assert bad.severity == "error" and "neither an existing folder nor a Hugging Face id" in bad.message


def test_parallelism_fits_gpus() -> None:
    (issue,) = guardrails.check_parallelism({"tp-size": 2, "dp-size": 2}, 2)
    assert issue.message == "tp-size 2 x dp-size 2 needs 4 GPUs but the server has 2; lower them or add GPUs to gpu_indices."
    assert guardrails.check_parallelism({"tensor-parallel-size": 2}, 2) == []
    (unknown,) = guardrails.check_parallelism({"tp-size": 2}, None)
    assert unknown.severity == "warning"


def test_gpu_checks_with_a_snapshot() -> None:
    snap = {0: [GpuProcess(4242, 20 * 2**30)], 1: []}
    issues, count = guardrails.check_gpus([0, 1, 3], own_pids=(), snapshot=snap)
    assert count == 3
    assert [i.message for i in issues] == [
        "GPU 0 has memory held by other processes (pid 4242 (20.0 GiB)); stop them or choose other GPUs.",
        "GPU 3 is not present (this host has 2: 0, 1); fix gpu_indices.",
    ]
    # The server being replaced is not foreign.
    assert guardrails.check_gpus([0], own_pids=[4242], snapshot=snap)[0] == []


def test_no_nvml_is_a_warning_not_a_failure() -> None:
    issues, count = guardrails.check_gpus([0], snapshot=None, probe=False)
    assert [(i.severity, i.message) for i in issues] == [
        ("warning", "GPU checks skipped: NVML is not available on this host (no NVIDIA driver).")]
    assert count == 1


# -- the real parser path ---------------------------------------------------------------------------

FAKE_SGLANG = '''
import argparse
class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--model-path", required=True)
        parser.add_argument("--mem-fraction-static", type=float)
        parser.add_argument("--disable-radix-cache", action="store_true")
'''


def _fake_sglang(tmp_path: Path) -> Path:
    pkg = tmp_path / "fake" / "sglang" / "srt"
    pkg.mkdir(parents=True)
    (tmp_path / "fake" / "sglang" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "server_args.py").write_text(FAKE_SGLANG)
    (tmp_path / "fake" / "sglang" / "launch_server.py").write_text("")
    return tmp_path / "fake"


def test_real_parser_is_used_when_sglang_imports(tmp_path: Path) -> None:
    # A stand-in sglang package on the profile's PYTHONPATH: its parser knows three flags.
    env = {"PYTHONPATH": str(_fake_sglang(tmp_path))}
    bad = ProfileSpec(name="x", model_path="org/m", flags={"enable-radix-cache": True}, env=env)
    report = launcher.validate(bad)
    assert report.checked_by == f"SGLang's parser in {sys.executable}"
    # the launch sandbox refuses PYTHONPATH in a real profile; this test only uses it to plant
    # the stand-in parser, so that refusal is expected beside the parser's verdict
    sandbox, err = report.errors
    assert sandbox.flag == "PYTHONPATH" and "refused" in sandbox.message
    assert err.message.startswith("SGLang rejected the flags: unrecognized arguments: --enable-radix-cache.")
    assert "`disable-radix-cache = true` turns it off" in err.message
    # Accepted by the real parser; the range check argparse cannot do still applies.
    out = launcher.validate(ProfileSpec(name="x", model_path="org/m", flags={"mem-fraction-static": 1.5}, env=env))
    assert [i.message for i in out.errors if i.flag != "PYTHONPATH"] == ["--mem-fraction-static is 1.5; expected a value in (0, 1)."]
    good = launcher.validate(ProfileSpec(name="x", model_path="org/m", flags={"disable-radix-cache": True}, env=env))
    assert [i.flag for i in good.errors] == ["PYTHONPATH"]


def test_bundled_table_when_sglang_is_absent() -> None:
    # This venv has no sglang; the entrypoint module exists here.
    spec = ProfileSpec(name="x", model_path="org/m", entrypoint="simulator.launch_server", flags={"enable-radix-cache": True})
    report = launcher.validate(spec)
    assert report.checked_by == "bundled SGLang 0.5.23 flag table"
    assert [i.flag for i in report.errors] == ["enable-radix-cache"]


def test_entrypoint_must_be_importable_by_the_server_python() -> None:
    allowed = launcher.Sandbox(entrypoints=("no_such_pkg.launch_server",))  # named by a setting
    report = launcher.validate(ProfileSpec(name="x", model_path="org/m", entrypoint="no_such_pkg.launch_server"),
                               sandbox=allowed)
    assert [i.message for i in report.errors] == [
        f"{sys.executable} cannot find the module no_such_pkg.launch_server (the profile's entrypoint); "
        "install it in that environment or point the server's python at one that has it."]


def test_validate_with_server_runs_guardrails() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        server = Server(id=1, name="s", base_url=f"http://127.0.0.1:{port}", python=sys.executable, gpu_indices=[0])
        spec = ProfileSpec(name="x", model_path="org/m", entrypoint="simulator.launch_server", flags={"tp-size": 2})
        report = launcher.validate(spec, server, gpu_snapshot={0: []})
        assert [i.flag for i in report.errors] == ["port", "tp-size"]
        replacing = launcher.validate(ProfileSpec(name="x", model_path="org/m", entrypoint="simulator.launch_server"),
                                      server, replacing=True, gpu_snapshot={0: []})
        assert replacing.ok


# -- argv -----------------------------------------------------------------------------------------


def test_flag_args_and_argv() -> None:
    flags = {"enable-metrics": True, "disable-radix-cache": False, "mem-fraction-static": 0.8,
             "max-running-requests": 64, "lora-paths": ["a", "b"], "json-model-override-args": {"k": 1}}
    assert flag_args(flags) == ["--enable-metrics", "--mem-fraction-static=0.8", "--max-running-requests=64",
                                "--lora-paths", "a", "b", '--json-model-override-args={"k":1}']
    assert build_argv("py", "sglang.launch_server", "m", "127.0.0.1", 30000, {"enable-metrics": True}) == [
        "py", "-m", "sglang.launch_server", "--enable-metrics", "--model-path", "m", "--host=127.0.0.1", "--port=30000"]
    assert build_argv("py", "sglang serve", "m", "h", 1, {})[:4] == ["py", "-m", "sglang.cli.main", "serve"]


def test_startup_progress_from_log_milestones() -> None:
    assert startup_progress("") == (0.2, "process started")
    assert startup_progress("[x] Load weight begin. avail mem=73.91 GB\n") == (0.3, "loading weights")
    assert startup_progress("Load weight end. ...\nCapture target decode CUDA graph begin.") == (0.7, "capturing CUDA graphs")
    assert startup_progress("The server is fired up and ready to roll!")[0] == 1.0


def test_reason_line_prefers_the_error() -> None:
    excerpt = ("[t] Load weight begin.\n[t] ERROR:    [Errno 98] error while attempting to bind on address\n"
               "[t] INFO:     Waiting for application shutdown.\n[t] INFO:     Application shutdown complete.\n")
    assert reason_line(excerpt) == "[t] ERROR:    [Errno 98] error while attempting to bind on address"
    assert reason_line("a\nb\n") == "b"
    crash = ("RuntimeError: CUDA error: an illegal memory access was encountered\n"
             "[t] Received sigquit from a child process. It usually means the child failed.\n")
    assert reason_line(crash).startswith("RuntimeError: CUDA error")
    assert reason_line("") == "(no output)"
