"""The golden files captured from the real SGLang 0.5.23 CPU server are complete and clean.

Runs without the real-SGLang environment (no marker): it checks the committed captures
(tests/fixtures/sglang-0.5.23-real-cpu-*, written by scripts/sglang_cpu/capture_fixtures.py)
and the tier's pure helpers against them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from real_sglang_helpers import kv_keys, line_shape, parse_env_file, parse_sse, sse_json

FIX = Path(__file__).resolve().parents[1] / "fixtures"
PREFIX = "sglang-0.5.23-real-cpu"
# The --help capture is the flag table's source, kept next to it (collectors/sglang/flags.py).
HELP = Path(__file__).resolve().parents[2] / "collectors" / "sglang" / "sglang-0.5.23-help.txt"
FILES = sorted(FIX.glob(f"{PREFIX}*")) + [HELP]
# Absolute paths of a machine: home dirs, temp dirs, the workspace. Placeholders look like <VENV>.
LOCAL_PATH = re.compile(r"(?<![\w<>.-])/(?:root|home|tmp|work|Users|var/folders)/")


def _read(suffix: str) -> str:
    return (FIX / f"{PREFIX}{suffix}").read_text()


def test_all_expected_captures_exist() -> None:
    names = {p.name for p in FILES}
    for suffix in (".log", "-metrics.prom", "-server_info.json", "-model_info.json", "-v1_loads.json",
                   "-health.txt", "-generate.json", "-generate-stream.sse", "-completions-stream.sse",
                   "-chat-stream.sse", "-bad-flag-enable-radix-cache.txt",
                   "-bad-flag-cuda-graph-max-bs.txt", "-capture.json"):
        assert f"{PREFIX}{suffix}" in names, suffix
    assert HELP.is_file()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_capture_holds_no_absolute_local_path(path: Path) -> None:
    hits = [m.group(0) for m in LOCAL_PATH.finditer(path.read_text())]
    assert not hits, f"{path.name} contains machine paths {hits[:3]}; re-run capture_fixtures.py"


def test_real_log_has_lifecycle_prefill_decode_and_clean_shutdown() -> None:
    log = _read(".log")
    for needle in ("The server is fired up and ready to roll!", "Load weight end", "KV Cache is allocated",
                   "SIGTERM received", "Application shutdown complete", "Finished server process"):
        assert needle in log, needle
    assert "sgl_kernel stub:" not in log
    prefill = [ln for ln in log.splitlines() if "] Prefill batch, " in ln]
    decode = [ln for ln in log.splitlines() if "] Decode batch, " in ln]
    assert any(int(re.search(r"#cached-token: (\d+)", ln).group(1)) > 0 for ln in prefill)  # type: ignore[union-attr]
    assert any(int(re.search(r"#running-req: (\d+)", ln).group(1)) >= 2 for ln in decode)  # type: ignore[union-attr]


def test_line_shape_and_kv_keys_on_real_lines() -> None:
    log = _read(".log").splitlines()
    decode = next(ln for ln in log if "] Decode batch, " in ln)
    assert line_shape(decode) == (
        "[TS] Decode batch, #running-req: N, #token: N, token usage: N, <dev> graph: B, "
        "gen throughput (token/s): N, #queue-req: N"
    )
    prefill = next(ln for ln in log if "] Prefill batch, " in ln)
    assert kv_keys(prefill)[:3] == ["#new-seq", "#new-token", "#cached-token"]
    ready = next(ln for ln in log if "fired up" in ln)
    assert line_shape(ready) == "[TS] The server is fired up and ready to roll!"


def test_metrics_capture_parses_and_counts_add_up() -> None:
    fams = {f.name: f for f in text_string_to_metric_families(_read("-metrics.prom"))}
    assert len(fams) > 50
    gen = {s.labels["is_streaming"]: s.value for s in fams["sglang:generation_tokens"].samples
           if s.name.endswith("_total")}
    # streamed: 6 (stream) + 4 x 40 (concurrent) + 5 (completions) + 5 (chat) = 176;
    # plain: 8 (hello world) + 2 x 4 (shared prefix) + 8 (server warm-up request) = 24
    assert gen == {"true": 176.0, "false": 24.0}


def test_stream_captures_are_sse_ending_in_done() -> None:
    for suffix in ("-generate-stream.sse", "-completions-stream.sse", "-chat-stream.sse"):
        raw = _read(suffix).encode()
        assert parse_sse(raw)[-1] == "[DONE]", suffix
    usage = sse_json(_read("-completions-stream.sse").encode())[-1]["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_bad_flag_captures_exit_2_with_argparse_message() -> None:
    assert "# exit code: 2" in _read("-bad-flag-enable-radix-cache.txt")
    assert "unrecognized arguments: --enable-radix-cache" in _read("-bad-flag-enable-radix-cache.txt")
    assert "ambiguous option: --cuda-graph-max-bs" in _read("-bad-flag-cuda-graph-max-bs.txt")


def test_server_info_capture_is_json_with_version() -> None:
    info = json.loads(_read("-server_info.json"))
    assert info["version"] == "0.5.23" and info["max_total_tokens"] == 4096


def test_parse_env_file_ignores_comments_and_blanks() -> None:
    text = "# comment\n\nPYTHON=/x/venv/bin/python\nMODEL = <m>\nnot a pair\n"
    assert parse_env_file(text) == {"PYTHON": "/x/venv/bin/python", "MODEL": "<m>"}
