"""Following one log file: complete lines only, across rotation and truncation, from a saved offset.

`LogTailer.read()` returns the complete lines appended since the last call, each with the byte
offset just past it, and never a partial line: an unterminated tail stays in the file and is
read again, whole, once its newline arrives. The tailer's position is a plain dict
(`TailState`) that the caller persists; `LogTailer(path, state)` resumes from it.

Identity of the file: (st_dev, st_ino) plus the first bytes of the file (`head`, up to 64).

- **rotation** (the path now names another inode): the old file, still open, is drained to its
  end first — including a last line without newline, since nobody will finish it — then the
  new file is read from offset 0. After a restart the old file is looked for next to the path
  (``path.1``, ``path.0``, ``path-*``, ...: any sibling starting with the name and holding the
  saved inode) and drained from the saved offset; if it cannot be found, the lines written to
  it after the last saved offset are lost (the only loss case; documented in log.py).
- **truncation** (size < offset, or the first bytes changed — copytruncate that regrew past the
  old offset): read again from offset 0.
- **bounded work**: at most `max_bytes` per call, so a huge backlog is read over several polls.
- **over-long lines**: a line longer than LINE_CAP is returned cut to its first LINE_CAP bytes
  as soon as that much of it is there; the rest is skipped as it is written (`skipped_bytes`
  counts it) and the offset moves past everything seen, so an unterminated 64 MiB line is never
  read again from its start on the next poll.

**What is opened** (a hostile server, or anyone who can write in the log's folder, controls what
sits at `path`): only a regular file. Every open is ``O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
O_CLOEXEC`` and the opened descriptor is fstat'ed: a symlink at the last component (ELOOP), a
FIFO, a directory, a device or a socket is refused (`LogPathRefused`), never read — a FIFO with
no writer would block the read and a device or /etc/shadow behind a symlink would be shown on the
pages. The path is lstat'ed on every read, so a file replaced by a symlink or a FIFO after the
tailer opened it (a "rotation" to something else) is caught too: the old file, already open, is
drained to its end and the new thing is refused. `read()` then returns what it has and sets
`refused`; it never raises for a refusal.

**A symlinked parent folder is followed** (``/data -> /mnt/disk1``, a logs folder on another
volume): operators set that up on purpose and expect it to work; what the log's writer controls
is the file at the last component (it creates, rotates and replaces that), which is the part
refused above. The folder is pinned when the tailer first opens a file: if it later resolves
somewhere else (a parent swapped for a symlink while Pitwall runs), the next file is refused
until the runner is restarted, so a swap cannot redirect an already-running tail.

**Never blocks**: a regular file opened ``O_NONBLOCK`` reads at most `max_bytes` per call; the
collector (log.py) also runs each server's read off its own poll so a read stuck in a hung
network or FUSE mount holds only that server.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Any

from storage.errors import CollectorError

HEAD_BYTES = 64
#: A line longer than this is cut: its first LINE_CAP bytes are returned (an engine's longest lines,
#: the server_args dump, are a few KiB), the rest is skipped as it arrives, never read twice.
LINE_CAP = 64 << 10


_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LogPathRefused(CollectorError):
    """The thing at a log path is not a regular file (see the module docstring)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path} {why}")
        self.path = path
        self.why = why  # "is a FIFO (named pipe)", "is a symbolic link", ...


def not_regular(mode: int) -> str | None:
    """Why a file of this st_mode is refused, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe)"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device"
    return "is not a regular file"


def open_regular(path: str) -> IO[bytes]:
    """`path` opened read-only if it is a regular file and not a symlink; else LogPathRefused.

    The check is made on the opened descriptor (fstat), so nothing can be swapped in between a
    check and the open; ``O_NONBLOCK`` keeps the open itself from waiting for a FIFO's writer.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LogPathRefused(path, "is a symbolic link") from None
        if exc.errno == errno.ENXIO:  # a socket (or a device with no driver behind it)
            raise LogPathRefused(path, "is a socket or a device") from None
        raise
    try:
        why = not_regular(os.fstat(fd).st_mode)
        if why is not None:
            raise LogPathRefused(path, why)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@dataclass(slots=True)
class TailState:
    """Where the tailer stands; `to_dict()`/`from_dict()` round-trip through storage JSON."""

    dev: int = 0
    ino: int = 0
    offset: int = 0  # byte offset of the next unread line in the file (dev, ino)
    head: str = ""  # first bytes of that file, latin-1 decoded (JSON-safe, lossless)
    line_no: int = 0  # physical lines before `offset` (1-based numbering continues from it)
    skipping: int = 0  # > 0: inside an over-long line (LINE_CAP): bytes of it skipped so far

    def to_dict(self) -> dict[str, Any]:
        return {"dev": self.dev, "ino": self.ino, "offset": self.offset, "head": self.head,
                "line_no": self.line_no, "skipping": self.skipping}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TailState | None:
        if not d:
            return None
        try:
            return cls(int(d["dev"]), int(d["ino"]), int(d["offset"]), str(d.get("head", "")),
                       int(d.get("line_no", 0)), int(d.get("skipping", 0)))
        except (KeyError, TypeError, ValueError):
            return None  # unreadable state: start over rather than fail forever


@dataclass(slots=True)
class Line:
    data: bytes  # the line without its newline
    start: int  # offset of its first byte in file (dev, ino)
    end: int  # offset just past the line (and its newline)
    dev: int
    ino: int
    line_no: int


class LogTailer:
    """Follows `path`; see the module docstring."""

    def __init__(self, path: str, state: TailState | None = None, *,
                 max_bytes: int = 4 << 20, start_at_end: bool = False) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._f: IO[bytes] | None = None
        self._st = state
        self._start_at_end = start_at_end and state is None
        self._pending_old: tuple[IO[bytes], TailState] | None = None
        self._heads: dict[tuple[int, int], str] = {}
        self.skipped_bytes = 0  # bytes of over-long lines skipped since this tailer started
        #: set by read() when the thing at `path` was refused (not a regular file); None otherwise
        self.refused: LogPathRefused | None = None
        self._folder: str | None = None  # the log's folder resolved at the first open (pinned)
        self._resume = state is not None  # look for a rotated saved file at the first read()

    @property
    def state(self) -> TailState | None:
        """Position after the last line returned by read() (in the rotated file while that one
        is still being drained)."""
        if self._pending_old is not None:
            return self._pending_old[1]
        return self._st

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        if self._pending_old is not None:
            self._pending_old[0].close()
            self._pending_old = None

    def read(self) -> list[Line]:
        """Complete lines appended since the last call (at most ~max_bytes of them).

        Never raises for a path that is not a regular file: sets `refused` and returns what the
        file it had open still held. Other OSErrors (permissions) propagate.
        """
        self.refused = None
        out: list[Line] = []
        if self._resume and self._st is not None:
            self._resume = False  # here, not in __init__: all file I/O happens inside read()
            self._pending_old = self._find_rotated(self._st)
        try:
            pst: os.stat_result | None = os.lstat(self.path)
        except FileNotFoundError:
            pst = None  # not created yet, or between rotate and re-create: keep the open file
        if pst is not None:
            why = not_regular(pst.st_mode)
            if why is not None:
                self.refused = LogPathRefused(self.path, why)
                pst = None  # not ours to read: finish the file we hold, open nothing new
        st = self._st
        if (self._f is not None and st is not None
                and (pst is None and self.refused is not None
                     or pst is not None and (pst.st_dev, pst.st_ino) != (st.dev, st.ino))):
            # rotated while we had it open (or replaced by something refused): finish the old
            # file first, then the new one
            self._pending_old = (self._f, st)
            self._f, self._st = None, None
        if self._pending_old is not None:
            f, old = self._pending_old
            if not self._drain(f, old, out, final=True):
                return out  # more of the old file next time
            f.close()
            self._pending_old = None
            if self._f is None:
                self._st = old  # its end, until a new file is opened (a restart drains nothing)
        if pst is None and self._f is None:
            return out
        st = self._st
        if self._f is None:
            if st is not None and pst is not None and (pst.st_dev, pst.st_ino) != (st.dev, st.ino):
                st = None  # the saved file is gone: this is another one
            try:
                f = self._open_pinned()
            except FileNotFoundError:
                return out  # removed since the stat: next time
            except LogPathRefused as exc:
                self.refused = exc
                return out
            self._f = f
            fst = os.fstat(f.fileno())
            if st is None or (fst.st_dev, fst.st_ino) != (st.dev, st.ino):
                st = TailState(fst.st_dev, fst.st_ino, 0, "", 0)
                if self._start_at_end:
                    st.offset = fst.st_size
            self._start_at_end = False
            self._st = st
        assert self._f is not None and st is not None
        size = os.fstat(self._f.fileno()).st_size
        if size < st.offset or not self._head_matches(self._f, st):
            st.offset, st.line_no, st.head = 0, 0, ""  # truncated or replaced in place
        self._drain(self._f, st, out, final=False)
        return out

    def _open_pinned(self) -> IO[bytes]:
        """open_regular(path), refused when the folder resolves elsewhere than at the first open."""
        folder = os.path.realpath(os.path.dirname(os.path.abspath(self.path)))
        if self._folder is not None and folder != self._folder:
            raise LogPathRefused(self.path, f"now lies in {folder!r}, not in {self._folder!r} "
                                 "where its folder pointed when collection started")
        f = open_regular(self.path)
        self._folder = folder
        return f

    # -- internals ------------------------------------------------------------------------------

    def _head_matches(self, f: IO[bytes], st: TailState) -> bool:
        if not st.head or st.offset == 0:
            return True
        f.seek(0)
        now = f.read(len(st.head)).decode("latin-1")
        return now == st.head

    def _drain(self, f: IO[bytes], st: TailState, out: list[Line], *, final: bool) -> bool:
        """Append complete lines from st.offset; `final`: the file will not grow any more.

        Returns True when the end of the file was reached.
        """
        if len(st.head) < HEAD_BYTES:
            f.seek(0)
            st.head = f.read(HEAD_BYTES).decode("latin-1")
        self._heads[(st.dev, st.ino)] = st.head
        f.seek(st.offset)
        data = f.read(self.max_bytes)
        at_eof = st.offset + len(data) >= os.fstat(f.fileno()).st_size
        if st.skipping:  # the rest of an over-long line: skip to its newline, if it came
            nl = data.find(b"\n")
            seen = len(data) if nl < 0 else nl + 1
            st.offset += seen
            st.skipping += seen
            self.skipped_bytes += seen
            if nl < 0:
                return at_eof
            st.skipping = 0
            data = data[seen:]
            if not data:
                return at_eof
        cut = data.rfind(b"\n") + 1
        if final and at_eof:
            cut = len(data)  # an unterminated last line that nobody will finish
        tail = len(data) - cut  # bytes of a line not finished yet
        chunk = data[:cut]
        parts = chunk.split(b"\n") if chunk else []
        if chunk.endswith(b"\n"):
            parts.pop()
        start = st.offset
        limit = st.offset + len(chunk)
        for part in parts:
            end = min(start + len(part) + 1, limit)
            st.line_no += 1
            if len(part) > LINE_CAP:
                self.skipped_bytes += len(part) - LINE_CAP
                part = part[:LINE_CAP]
            out.append(Line(part, start, end, st.dev, st.ino, st.line_no))
            start = end
        st.offset = limit
        if tail >= LINE_CAP:
            # an unfinished line already past the cap: return its head now, skip the rest as
            # it comes (never read from its start again)
            head = data[cut:cut + LINE_CAP]
            st.line_no += 1
            out.append(Line(head, st.offset, st.offset + tail, st.dev, st.ino, st.line_no))
            self.skipped_bytes += tail - LINE_CAP
            st.offset += tail
            st.skipping = tail
            return at_eof
        return at_eof and tail == 0

    def head_of(self, dev: int, ino: int) -> str:
        """The first bytes of a file this tailer has read (for a TailState to persist)."""
        return self._heads.get((dev, ino), "")

    def _find_rotated(self, st: TailState) -> tuple[IO[bytes], TailState] | None:
        """After a restart: the saved file under a rotated name, if it is not at `path` now."""
        try:
            pst = os.lstat(self.path)
            if (pst.st_dev, pst.st_ino) == (st.dev, st.ino):
                return None
        except FileNotFoundError:
            pass
        for cand in sorted(glob.glob(glob.escape(self.path) + "?*")):
            try:
                cst = os.lstat(cand)  # a symlink named like a rotated file is not followed
            except OSError:
                continue
            if (stat.S_ISREG(cst.st_mode) and (cst.st_dev, cst.st_ino) == (st.dev, st.ino)
                    and cst.st_size >= st.offset):
                try:
                    f = open_regular(cand)
                except (OSError, LogPathRefused):
                    return None
                return f, TailState(st.dev, st.ino, st.offset, st.head, st.line_no)
        return None


def read_off_thread(tailer: LogTailer, name: str) -> Future[list[Line]]:
    """tailer.read() in a daemon thread of its own: a read stuck in a hung mount holds only it
    (and never the runner's exit, which a pool worker would)."""
    fut: Future[list[Line]] = Future()

    def run() -> None:
        try:
            fut.set_result(tailer.read())
        except BaseException as exc:  # handed to the poll, which turns it into one event
            fut.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return fut
