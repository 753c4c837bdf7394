"""storage/files.py and make_engine: Pitwall's folders are 0700 and its files 0600 whatever the
umask; folders that were already there (not Pitwall's) keep their mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from storage.files import open_private, private_dir, private_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The loosest umask: every mode below must come from an explicit chmod / open mode."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_database_is_private_with_its_wal_and_shm(tmp_path, open_umask):
    from storage.db import make_engine

    url = f"sqlite:///{tmp_path / 'data' / 'sub' / 'pitwall.db'}"
    engine = make_engine(url)
    with engine.connect() as conn:  # an open connection keeps the -wal and -shm files
        conn.execute(text("INSERT INTO meta (key, value) VALUES ('x', 'y')"))
        conn.commit()
        db = tmp_path / "data" / "sub" / "pitwall.db"
        assert mode(tmp_path / "data") == 0o700 and mode(tmp_path / "data" / "sub") == 0o700
        assert mode(db) == 0o600
        for side in ("-wal", "-shm"):
            assert mode(Path(f"{db}{side}")) == 0o600, side
    engine.dispose()


def test_an_existing_database_is_tightened_but_not_its_folder(tmp_path, open_umask):
    from storage.db import make_engine

    folder = tmp_path / "project"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    db = folder / "pitwall.db"
    make_engine(f"sqlite:///{db}").dispose()
    os.chmod(db, 0o644)  # made by an older Pitwall
    make_engine(f"sqlite:///{db}").dispose()
    assert mode(db) == 0o600
    assert mode(folder) == 0o755  # a user's folder keeps its mode


def test_private_dir_sets_only_what_it_makes_or_owns(tmp_path, open_umask):
    theirs = tmp_path / "var-log"
    theirs.mkdir()
    os.chmod(theirs, 0o755)
    private_dir(theirs / "sglang" / "deep")
    assert mode(theirs) == 0o755
    assert mode(theirs / "sglang") == 0o700 and mode(theirs / "sglang" / "deep") == 0o700
    ours = tmp_path / "data"
    ours.mkdir()
    os.chmod(ours, 0o755)
    private_dir(ours, own=True)  # the data dir is Pitwall's own
    assert mode(ours) == 0o700


def test_private_files(tmp_path, open_umask):
    log = tmp_path / "server.log"
    log.write_text("before\n")
    os.chmod(log, 0o644)
    with open_private(log, "ab") as f:
        assert f.tell() == len("before\n")  # appends: the launch's byte offset
        f.write(b"after\n")
    assert mode(log) == 0o600 and log.read_text() == "before\nafter\n"
    new = tmp_path / "new.log"
    with open_private(new, "wb") as f:
        f.write(b"x")
    assert mode(new) == 0o600
    assert mode(private_file(tmp_path / "empty.db")) == 0o600
    with pytest.raises(ValueError, match="expected"):
        open_private(new, "r")
