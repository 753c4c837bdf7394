"""storage/db.py decides what opening a database may create.

- A SQLite URL with a query string (`sqlite:///path/pitwall.db?timeout=30`): the file behind
  the URL is private (0600) whatever the query string, never a 0600 file named
  `pitwall.db?timeout=30` beside a 0644 database SQLite really opened.
- A read-only command (`pitwall status`, `export`, `gpu-wall`) given a mistyped database path
  creates nothing (no folders, no empty database), says what is wrong in one line and exits
  non-zero.
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest
from pwtest import PY, subprocess_env
from sqlalchemy import text

from storage.db import SchemaError, make_engine, sqlite_path


def test_a_url_with_a_query_string_makes_a_private_file(tmp_path):
    old = os.umask(0)  # the loosest umask: the mode must come from storage/files.py
    try:
        db = tmp_path / "data" / "pitwall.db"
        engine = make_engine(f"sqlite:///{db}?timeout=30")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO meta (key, value) VALUES ('x', 'y')"))
        engine.dispose()
    finally:
        os.umask(old)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in db.parent.iterdir() if not p.name.startswith("pitwall.db-")) == ["pitwall.db"]


@pytest.mark.parametrize(("url", "path"), [
    ("sqlite:////srv/p/pitwall.db?timeout=30", "/srv/p/pitwall.db"),
    ("sqlite:///rel/pitwall.db", "rel/pitwall.db"),
    ("sqlite:///file:/srv/p/pit%20wall.db?mode=ro&uri=true", "/srv/p/pit wall.db"),
    ("sqlite://", None), ("sqlite:///:memory:", None), ("postgresql://u@h/db", None),
])
def test_sqlite_path_reads_the_file_behind_the_url(url, path):
    got = sqlite_path(url)
    assert (str(got) if got is not None else None) == path


def test_a_read_only_open_creates_nothing_and_says_what_is_wrong(tmp_path):
    missing = tmp_path / "typo" / "deeper" / "pitwall.db"
    with pytest.raises(SchemaError, match="no Pitwall database at"):
        make_engine(f"sqlite:///{missing}", create=False)
    assert list(tmp_path.iterdir()) == []
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(SchemaError, match="empty"):
        make_engine(f"sqlite:///{empty}", create=False)
    url = f"sqlite:///{tmp_path / 'made.db'}"
    meta = text("SELECT rowid, key, value FROM meta ORDER BY rowid")  # a rewrite gives new rowids
    engine = make_engine(url)
    with engine.connect() as conn:
        before = conn.execute(meta).all()
    engine.dispose()
    engine = make_engine(url, create=False)  # a current database: opened, not written
    with engine.connect() as conn:
        assert conn.execute(meta).all() == before
    engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["status"], ["export", "--server", "x", "--format", "json", "--output", "-"],
                                  ["export", "--fleet", "table", "--format", "csv", "--output", "-"],
                                  ["gpu-wall"]])
def test_a_read_only_command_with_a_bad_path_creates_no_folder(tmp_path, argv):
    data = tmp_path / "data"
    bad = tmp_path / "typo" / "pitwall.db"
    env = subprocess_env({"PITWALL_DATA_DIR": str(data), "PITWALL_DATABASE_URL": f"sqlite:///{bad}",
                          "PITWALL_CONFIG": "", "PITWALL_DEMO": "off", "HOME": str(tmp_path / "home")})
    res = subprocess.run([PY, "-m", "cli", *argv], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert res.returncode != 0, res.stdout
    assert "no Pitwall database at" in res.stderr and str(bad) in res.stderr
    assert res.stderr.strip().count("\n") == 0 and "Traceback" not in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no typo/, no data/, no home/
