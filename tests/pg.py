"""The real PostgreSQL fixture: `pg_url`, a throwaway PostgreSQL cluster on a Unix socket.

Shared by the storage and fleet tests (their conftest.py imports `pg_url` from here).

Skips, with the reason, when the PostgreSQL server binaries are absent (Debian package
`postgresql`) or when the test cannot switch to the `postgres` user to run them.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
RUNUSER = shutil.which("runuser")


def _as_postgres(*argv: str, **kw) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    cmd = list(argv) if os.geteuid() != 0 else [RUNUSER or "runuser", "-u", "postgres", "--", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory):
    if not PG_BIN:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    if os.geteuid() == 0 and not RUNUSER:
        pytest.skip("runuser is missing; cannot run PostgreSQL as a non-root user")
    bindir = PG_BIN[-1]
    # pytest's tmp dirs are private to root; the cluster needs a folder postgres can reach
    root = Path(tempfile.mkdtemp(prefix="pitwall-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    res = _as_postgres(f"{bindir}/initdb", "-D", str(data), "-A", "trust", "-U", "pitwall")
    if res.returncode != 0:
        pytest.skip(f"initdb failed: {res.stderr.strip()[:200]}")
    res = _as_postgres(
        f"{bindir}/pg_ctl", "-D", str(data), "-w", "-l", str(root / "log"),
        "-o", f"-k {sock} -c listen_addresses='' -c fsync=off", "start",
    )
    if res.returncode != 0:
        pytest.skip(f"pg_ctl start failed: {res.stderr.strip()[:200]}")
    try:
        yield f"postgresql+psycopg://pitwall@/postgres?host={sock}"
    finally:
        _as_postgres(f"{bindir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)
