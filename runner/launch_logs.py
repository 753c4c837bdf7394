"""Launch logs by size (setting `retention.launch_logs_mb`, MB; 0 keeps every log).

Managed servers write to `<data dir>/logs/<server>.log`. Each launch starts a fresh file: the
runner renames the previous launch's file to `<server>.log.<UTC stamp>` first (`rotate`; the engine's log
tailer follows a rename and drains the old file). The size policy
then removes whole rotated files, oldest first (by modification time), until the folder is within
the budget. Never removed: a file a server or an unfinished launch names as its log (the live
file a tailer reads), and any file written in the last ROTATED_GRACE_S (a tailer may still be
draining a file just rotated). Only the data dir's own logs/ folder is governed: a log_path an
operator pointed elsewhere is never rotated nor removed.
Cross-check: `du -b <data dir>/logs` against the About page's "launch logs" row.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

MB = 1_000_000
ROTATED_GRACE_S = 600.0


@dataclass(frozen=True)
class LogFile:
    path: Path
    bytes: int
    mtime: float
    live: bool  # named by a server or an unfinished launch, or written within the grace period
    goes_next: bool  # the policy removes it on its next pass


def governed(path: str | os.PathLike[str], logs_dir: Path) -> bool:
    """Whether `path` lies in Pitwall's own logs folder (the only one the policy touches)."""
    try:
        return Path(path).resolve().parent == logs_dir.resolve()
    except OSError:
        return False


def rotate(path: str | os.PathLike[str], logs_dir: Path, *, now: float | None = None) -> Path | None:
    """Rename a non-empty log in `logs_dir` to `<name>.<UTC stamp>` so the next launch starts a
    fresh file; returns the new path, or None when there was nothing to rotate (or the file is not
    Pitwall's own)."""
    p = Path(path)
    if not governed(p, logs_dir) or not p.is_file() or p.stat().st_size == 0:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    target = p.with_name(f"{p.name}.{stamp}")
    n = 1
    while target.exists():
        target = p.with_name(f"{p.name}.{stamp}-{n}")
        n += 1
    p.rename(target)
    return target


def plan(logs_dir: Path, *, live: set[str], budget_mb: float, now: float | None = None) -> list[LogFile]:
    """Every file of `logs_dir`, oldest first, with what the policy removes next. `live`: the log
    paths servers and unfinished launches name."""
    now = time.time() if now is None else now
    live_paths = {Path(p).resolve() for p in live if p}
    files = []
    for entry in sorted(logs_dir.glob("*")) if logs_dir.is_dir() else []:
        try:
            st = entry.stat()
        except OSError:
            continue  # removed meanwhile
        if entry.is_file():
            files.append((entry, st.st_size, st.st_mtime))
    files.sort(key=lambda f: f[2])
    total = sum(size for _, size, _ in files)
    budget = None if budget_mb <= 0 else budget_mb * MB
    out = []
    for path, size, mtime in files:
        is_live = path.resolve() in live_paths or now - mtime < ROTATED_GRACE_S
        goes = budget is not None and total > budget and not is_live
        if goes:
            total -= size
        out.append(LogFile(path, size, mtime, is_live, goes))
    return out


def apply(logs_dir: Path, *, live: set[str], budget_mb: float, now: float | None = None) -> tuple[int, int]:
    """Remove what `plan` says goes next: (files removed, bytes freed)."""
    files = bytes_freed = 0
    for f in plan(logs_dir, live=live, budget_mb=budget_mb, now=now):
        if f.goes_next:
            try:
                f.path.unlink()
            except FileNotFoundError:
                continue
            files += 1
            bytes_freed += f.bytes
    return files, bytes_freed


def retain_records(folder: Path, days: float, now: float) -> tuple[int, int]:
    """Request records (a profile's `record_requests`: the data folder's requests/<server>/, the
    engine's files in each) older than `days` by modification time: (files removed, bytes freed).
    A file written within ROTATED_GRACE_S is the one the server is writing; links are never
    followed; days 0 keeps every file."""
    if days <= 0 or not folder.is_dir():
        return 0, 0
    cutoff = min(now - days * 86400.0, now - ROTATED_GRACE_S)
    files = freed = 0
    for server in folder.iterdir():
        if server.is_symlink() or not server.is_dir():
            continue
        for path in server.iterdir():
            try:
                st = path.lstat()
                if path.is_symlink() or not path.is_file() or st.st_mtime >= cutoff:
                    continue
                path.unlink()
            except OSError:
                continue
            files, freed = files + 1, freed + st.st_size
    return files, freed
