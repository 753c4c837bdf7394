"""`pitwall export --output PATH` never writes through a symbolic link: a link is
refused with one sentence and the file it points to keeps every byte; an existing file is
replaced by rename (a hard link elsewhere keeps its content), 0600; real files, real links."""

from __future__ import annotations

import os
import stat

import pytest
from scorecard_seed import seed_alpha

from cli.export import export_cli

PRECIOUS = b"the operator's own file: must survive\n"


@pytest.fixture
def cli_db(data_env):
    from storage.db import make_engine

    eng = make_engine(data_env["PITWALL_DATABASE_URL"])
    ids = seed_alpha(eng, name="a")
    yield ids
    eng.dispose()


def _argvs(ids: dict[str, int], out: str) -> list[list[str]]:
    return [["--server", "a", "--run", str(ids["run_id"]), "--format", "md", "--output", out],
            ["--fleet", "table", "--format", "csv", "--output", out]]


@pytest.mark.parametrize("which", [0, 1], ids=["scorecard", "fleet"])
def test_a_symlinked_output_is_refused_and_its_target_survives(cli_db, tmp_path, capsys, which):
    target = tmp_path / "precious.txt"
    target.write_bytes(PRECIOUS)
    link = tmp_path / "review.md"
    link.symlink_to(target)
    assert export_cli(_argvs(cli_db, str(link))[which]) == 1
    err = capsys.readouterr().err.strip()
    assert "is a symbolic link" in err and "\n" not in err and "Traceback" not in err
    assert target.read_bytes() == PRECIOUS
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


@pytest.mark.parametrize("which", [0, 1], ids=["scorecard", "fleet"])
def test_an_existing_file_is_replaced_not_written_through(cli_db, tmp_path, capsys, which):
    out = tmp_path / "review.out"
    out.write_bytes(PRECIOUS)
    other = tmp_path / "hardlink.txt"
    os.link(out, other)  # another name of the same file: a write through would change it too
    os.chmod(out, 0o644)
    assert export_cli(_argvs(cli_db, str(out))[which]) == 0, capsys.readouterr().err
    assert out.read_bytes() != PRECIOUS and len(out.read_bytes()) > 100
    assert other.read_bytes() == PRECIOUS
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "hardlink.txt", "review.out"]


def test_a_fifo_output_is_refused_without_blocking(cli_db, tmp_path, capsys):
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    assert export_cli(_argvs(cli_db, str(fifo))[0]) == 1
    assert "not a regular file" in capsys.readouterr().err
