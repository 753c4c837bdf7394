"""`pitwall probe` takes the server's API key from a file or the environment; `--api-key` still
works but warns that `ps` shows it."""

from __future__ import annotations

import pytest

from collectors.probe.cli import ARGV_KEY_WARNING, api_key_from, build_parser


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["--url", "http://127.0.0.1:1", *argv])


def test_key_file_wins_and_is_read_from_its_first_line(tmp_path, capsys):
    key = tmp_path / "key"
    key.write_text("S3CRET\nignored\n")
    assert api_key_from(_args("--api-key-file", str(key)), environ={"PITWALL_API_KEY": "env"}) == "S3CRET"
    assert capsys.readouterr().err == ""


def test_environment_then_the_older_name():
    assert api_key_from(_args(), environ={"PITWALL_API_KEY": "a", "PITWALL_PROBE_API_KEY": "b"}) == "a"
    assert api_key_from(_args(), environ={"PITWALL_PROBE_API_KEY": "b"}) == "b"
    assert api_key_from(_args(), environ={}) is None


def test_key_in_argv_still_works_with_a_warning(capsys):
    assert api_key_from(_args("--api-key", "S3CRET"), environ={}) == "S3CRET"
    err = capsys.readouterr().err
    assert err.strip() == ARGV_KEY_WARNING and "S3CRET" not in err


def test_unreadable_or_empty_key_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read --api-key-file"):
        api_key_from(_args("--api-key-file", str(tmp_path / "missing")), environ={})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        api_key_from(_args("--api-key-file", str(tmp_path / "empty")), environ={})


def test_file_and_argv_key_together_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit):
        _args("--api-key-file", str(tmp_path / "k"), "--api-key", "x")
