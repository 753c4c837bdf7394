"""Every `pitwall` subcommand opens the database through one opener (cli/common.py open_db): a
database it cannot open (here a file that is not SQLite) is one line after the command's own
prefix and exit status 1, never a traceback and never a two-line driver message."""

from __future__ import annotations

import pytest

from cli.main import main

CASES = [
    (["status"], "pitwall: "),
    (["alerts", "list"], "pitwall alerts: "),
    (["gpu-wall"], "pitwall gpu-wall: "),
    (["export", "--server", "x", "--format", "json", "--output", "-"], "pitwall export: "),
    (["export", "--fleet", "table", "--format", "csv", "--output", "-"], "pitwall export: "),
    (["profiles", "list"], "pitwall: "),
    (["launch", "x", "--no-wait"], "pitwall: "),
    (["tune", "--server", "x", "--profiles", "a"], "pitwall: "),
]


@pytest.mark.parametrize(("argv", "prefix"), CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_database_that_cannot_be_opened_is_one_line(data_env, capsys, tmp_path, argv, prefix):
    db = tmp_path / "data" / "pitwall.db"
    db.parent.mkdir(mode=0o700)
    db.write_text("not a database, only text long enough to be read as a header\n" * 4)
    url = data_env["PITWALL_DATABASE_URL"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == f"{prefix}Cannot open the database {url}: file is not a database.\n"
