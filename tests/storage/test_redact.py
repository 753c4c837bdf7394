"""storage/redact.py on the forms secrets really take: SGLang's server_args log line (0.5.23's
dict repr and the ServerArgs(...) repr), /server_info JSON, launch commands, argv, env,
Authorization headers and database URLs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage.redact import (
    MASK,
    redact_argv,
    redact_fields,
    redact_obj,
    redact_text,
    redact_url,
    secret_name,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KEY = "S3CRET-key_42"


def _server_args_line() -> str:
    """The real 0.5.23 `server_args={...}` log line (api_key None in the capture)."""
    lines = (FIXTURES / "sglang-0.5.23-real-cpu.log").read_text(encoding="utf-8").splitlines()
    return next(ln for ln in lines if "server_args={" in ln)


def test_the_real_server_args_line_is_unchanged_without_a_key():
    line = _server_args_line()
    assert "'api_key': None" in line
    # SGLang masks watermark_key itself as '<redacted>'; nothing else in the line is a secret
    assert redact_text(line) == line


def test_the_server_args_line_with_a_key_keeps_everything_else():
    line = _server_args_line()
    with_key = line.replace("'api_key': None", f"'api_key': '{KEY}'").replace(
        "'admin_api_key': None", f"'admin_api_key': \"{KEY}\"")
    out = redact_text(with_key)
    assert KEY not in out
    assert f"'api_key': '{MASK}'" in out and f"'admin_api_key': \"{MASK}\"" in out
    # every other field survives: only the two values changed length
    assert len(with_key) - len(out) == 2 * (len(KEY) - len(MASK))
    assert "'max_total_tokens': 4096" in out and "'tokenizer_path': '<MODEL_DIR>'" in out


def test_the_server_args_repr_form():
    # ServerArgs.__repr__ (0.5.23): f"{field.name}={value!r}" joined by ", "
    line = (f"[2026-12-02 12:14:36] server_args=ServerArgs(model_path='m', tokenizer_path='m', "
            f"port=30000, api_key={KEY!r}, admin_api_key=None, ssl_keyfile_password='pw', "
            "max_total_tokens=4096, bucket_time_to_first_token=None)")
    out = redact_text(line)
    assert KEY not in out and "'pw'" not in out
    assert f"api_key='{MASK}'" in out and "admin_api_key=None" in out
    assert "max_total_tokens=4096" in out and "port=30000" in out


def test_server_info_json_and_its_launch_command():
    info = json.loads((FIXTURES / "sglang-0.5.23-real-cpu-server_info.json").read_text())
    info["api_key"] = KEY
    info["launch_command"] += f" --api-key {KEY}"
    out = redact_obj(info)
    blob = json.dumps(out)
    assert KEY not in blob
    assert out["api_key"] == MASK and out["admin_api_key"] is None
    assert out["launch_command"].endswith(f"--api-key {MASK}")
    # counts and paths named like tokens are not secrets
    assert out["max_total_tokens"] == info["max_total_tokens"]
    assert out["tokenizer_path"] == info["tokenizer_path"]
    assert out["bucket_time_to_first_token"] == info["bucket_time_to_first_token"]
    # the same document as text (a JSON excerpt) redacts the same way
    assert KEY not in redact_text(json.dumps(info))


@pytest.mark.parametrize(("text", "expected"), [
    (f"python -m sglang.launch_server --model-path m --api-key {KEY} --port 1",
     f"python -m sglang.launch_server --model-path m --api-key {MASK} --port 1"),
    (f"sglang serve --api-key={KEY} --port 1", f"sglang serve --api-key={MASK} --port 1"),
    (f'curl -H "Authorization: Bearer {KEY}" http://127.0.0.1:30000/v1/models',
     f'curl -H "Authorization: Bearer {MASK}" http://127.0.0.1:30000/v1/models'),
    ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {MASK}"),
    (f"HF_TOKEN={KEY} python -m x", f"HF_TOKEN={MASK} python -m x"),
    (f"token: {KEY}", f"token: {MASK}"),
    ("token: changeme", f"token: {MASK}"),
    ("token=secretpass", f"token={MASK}"),
    ('{"token": "hunter"}', f'{{"token": "{MASK}"}}'),
    ("--token abcdefgh", f"--token {MASK}"),
    ("using auth token: secretpass for the hub", f"using auth token: {MASK} for the hub"),
    ("Authorization: token ghp_abc123", f"Authorization: token {MASK}"),
    ('{"Authorization": "Negotiate YIIabc"}', f'{{"Authorization": "{MASK}"}}'),  # the key's whole value
    ('Authorization: Digest username="u", response="6629fae4"', f"Authorization: Digest {MASK}"),
    ("the token limit and a digest of the run", "the token limit and a digest of the run"),
    ("refresh token: abcdefgh expires soon", f"refresh token: {MASK} expires soon"),
    ("could not connect to postgresql+psycopg://pitwall:PGS3CRET@127.0.0.1:5432/db",
     f"could not connect to postgresql+psycopg://pitwall:{MASK}@127.0.0.1:5432/db"),
    (f"password: {KEY}", f"password: {MASK}"),
])
def test_text_forms(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", [
    "http://127.0.0.1:30000/health answered 200 at 12:14:36",
    "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00",
    "api_key=None admin_api_key: null",
    "--api-key --port 1",  # a flag without a value: the next flag is kept
    "max_total_tokens=4096 tokenizer_path=/m speculative_token_map=/x",
])
def test_text_without_secrets_is_unchanged(text):
    assert redact_text(text) == text


def test_argv_and_env():
    argv = ["python", "-m", "sglang.launch_server", "--api-key", KEY, "--hf-token=x1",
            "HF_TOKEN=x2", "--port", "30000", "--max-total-tokens", "4096"]
    assert redact_argv(argv) == ["python", "-m", "sglang.launch_server", "--api-key", MASK,
                                 f"--hf-token={MASK}", f"HF_TOKEN={MASK}", "--port", "30000",
                                 "--max-total-tokens", "4096"]
    env = {"PITWALL_PASSWORD": "pw", "OPENAI_API_KEY": KEY, "CUDA_VISIBLE_DEVICES": "0,1",
           "DATABASE_URL": "postgresql://u:PGS3CRET@h/db", "EMPTY_TOKEN": ""}
    assert redact_obj(env) == {"PITWALL_PASSWORD": MASK, "OPENAI_API_KEY": MASK,
                               "CUDA_VISIBLE_DEVICES": "0,1",
                               "DATABASE_URL": f"postgresql://u:{MASK}@h/db", "EMPTY_TOKEN": ""}


def test_message_lists_are_not_taken_for_argv():
    lines = ["- error: the password file is missing", "next line stays"]
    assert redact_obj(lines) == lines


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://pitwall:PGS3CRET@127.0.0.1:5432/db", f"postgresql://pitwall:{MASK}@127.0.0.1:5432/db"),
    ("postgresql+psycopg://pitwall:p%40ss@db.internal/pitwall?sslmode=require",
     f"postgresql+psycopg://pitwall:{MASK}@db.internal/pitwall?sslmode=require"),
    ("postgresql://pitwall@/db?host=/run/pg&password=x",
     f"postgresql://pitwall@/db?host=%2Frun%2Fpg&password={MASK}"),
    ("sqlite:///pitwall-data/pitwall.db", "sqlite:///pitwall-data/pitwall.db"),
    ("http://127.0.0.1:30000", "http://127.0.0.1:30000"),
])
def test_urls(url, expected):
    assert redact_url(url) == expected


@pytest.mark.parametrize(("name", "secret"), [
    ("api_key", True), ("admin-api-key", True), ("--api-key", True), ("ssl_keyfile_password", True),
    ("PITWALL_PASSWORD", True), ("PITWALL_VIEWER_PASSWORD", True), ("HF_TOKEN", True),
    ("HUGGING_FACE_HUB_TOKEN", True), ("--token", True), ("Authorization", True),
    ("credentials", True), ("aws_secret_access_key", True), ("private_key", True),
    ("max_total_tokens", False), ("tokenizer_path", False), ("speculative_token_map", False),
    ("bucket_time_to_first_token", False), ("kt_max_deferred_experts_per_token", False),
    ("eos_token", False), ("ssl_keyfile", False), ("PITWALL_DATABASE_URL", False),
    ("model_path", False), ("PWD", False),
])
def test_secret_names(name, secret):
    assert secret_name(name) is secret


def test_redact_fields_only_touches_the_named_columns():
    row = {"message": f"--api-key {KEY}", "raw": None, "result": {"excerpt": f"api_key='{KEY}'"},
           "argv": ["--api-key", KEY]}
    out = redact_fields(row, text=("message", "raw"), obj=("result",))
    assert out["message"] == f"--api-key {MASK}" and out["raw"] is None
    assert out["result"] == {"excerpt": f"api_key='{MASK}'"}
    assert out["argv"] == ["--api-key", KEY]  # exact: a rollback starts it again
    assert row["message"].endswith(KEY)  # a copy


def test_no_line_of_any_log_or_metrics_fixture_changes():
    """Every golden SGLang log, /metrics payload and parser output (counters such as
    `#token: 512` and `#cached-token: 0`, usage text `[--api-key API_KEY]`) passes unchanged."""
    changed = []
    for path in sorted(FIXTURES.iterdir()):
        if path.suffix not in (".log", ".prom", ".txt", ".sse"):
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if redact_text(line) != line:
                changed.append(f"{path.name}: {line[:120]}")
    assert not changed, changed[:5]
