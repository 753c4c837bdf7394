"""Pitwall's own files are private: folders 0700, files 0600, whatever the umask.

The database, the server logs Pitwall writes (they hold the engine's startup line of its
arguments, API key included) and the exports are read by the user who runs Pitwall and nobody else. Modes are set
explicitly (`os.open(..., 0o600)` then `fchmod`, `mkdir` then `chmod`), never through
`os.umask`, which is process-wide and would race with other threads.

A folder Pitwall creates is 0700; a folder that already existed keeps its mode unless the caller
says it is Pitwall's own (`own=True`: the data dir and its logs/ and exports/), so pointing a
log path or an export at `/var/log/<engine>` or `~/reviews` never changes that folder.
Cross-check: `stat -c '%a %n' ~/.local/share/pitwall ~/.local/share/pitwall/pitwall.db*`
shows 700 and 600.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, cast

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _chmod(path: Path, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except OSError:
        pass  # not ours (another user's file, a read-only mount): leave it


def private_dir(path: str | os.PathLike[str], *, own: bool = False) -> Path:
    """Create `path` and its missing parents as 0700; with `own` also set an existing `path`
    (never its parents) to 0700. Returns the path."""
    path = Path(path)
    missing: list[Path] = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it first: its mode is its maker's business
        _chmod(d, PRIVATE_DIR_MODE)
    if own and path.is_dir():
        _chmod(path, PRIVATE_DIR_MODE)
    return path


def private_file(path: str | os.PathLike[str]) -> Path:
    """Create `path` empty as 0600 when missing, or set an existing one to 0600."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        _chmod(path, PRIVATE_FILE_MODE)
        return path
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return path


def open_private(path: str | os.PathLike[str], mode: str = "ab") -> BinaryIO:
    """Open `path` for appending ("ab") or writing ("wb") as a 0600 file (created, or an
    existing one set to 0600). Raises OSError."""
    if mode not in ("ab", "wb"):
        raise ValueError(f"open_private mode is {mode!r}; expected 'ab' or 'wb'")
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "ab" else os.O_TRUNC)
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    except OSError:
        pass  # a file of another user we may append to: keep its mode
    return cast(BinaryIO, os.fdopen(fd, mode))


def private_sqlite(path: str | os.PathLike[str]) -> None:
    """Before SQLite opens `path`: its folder (missing parts) 0700 and the file itself 0600, so
    the -wal and -shm files SQLite creates next to it inherit 0600; existing side files too."""
    path = Path(path)
    private_dir(path.parent)
    private_file(path)
    for suffix in SQLITE_SIDE_FILES:
        side = Path(str(path) + suffix)
        if side.exists():
            _chmod(side, PRIVATE_FILE_MODE)
