"""Reading a trace file: gzip or plain, UTF-8 with or without a BOM, LF or CRLF, with a cap on a
line's length so one runaway line (a level-3 request log can carry a whole prompt's token ids)
costs a bad row, never the import or the memory.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from collectors.trace.model import BadRow, TraceError

#: a longer line is reported as a bad row and skipped
MAX_LINE_BYTES = 16 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(slots=True)
class Lines:
    """The lines of one file, with what reading them noticed (filled as they are read)."""

    path: Path
    gzipped: bool = False
    crlf: int = 0
    too_long: list[BadRow] = field(default_factory=list)
    bom: bool = False

    def notes(self) -> list[str]:
        out: list[str] = []
        if self.gzipped:
            out.append("gzip-compressed")
        if self.bom:
            out.append("a UTF-8 byte-order mark")
        if self.crlf:
            out.append("CRLF line ends")
        return out


def open_binary(path: Path) -> io.BufferedIOBase:
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise TraceError(f"Cannot read {path}: {exc.strerror or exc}; check the path.") from exc
    if raw.peek(2)[:2] == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw)
    return raw


def head(path: Path, lines: int = 50) -> list[str]:
    """The first `lines` lines (what a format is sniffed from), each cut at 64 KB."""
    with open_binary(path) as f:
        out: list[str] = []
        for _ in range(lines):
            chunk = f.readline(65536)
            if not chunk:
                break
            out.append(_decode(chunk.removeprefix(b"\xef\xbb\xbf") if not out else chunk).rstrip("\r\n"))
        return out


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def read_lines(path: Path, state: Lines) -> Iterator[tuple[int, str]]:
    """(line number, text without its end) for every line; over-long lines are recorded in
    `state.too_long` and skipped."""
    with open_binary(path) as f:
        state.gzipped = isinstance(f, gzip.GzipFile)
        number = 0
        while True:
            chunk = f.readline(MAX_LINE_BYTES + 1)
            if not chunk:
                return
            number += 1
            if number == 1 and chunk.startswith(b"\xef\xbb\xbf"):
                state.bom = True
                chunk = chunk[3:]
            if len(chunk) > MAX_LINE_BYTES and not chunk.endswith(b"\n"):
                while chunk and not chunk.endswith(b"\n"):  # skip the rest of the line
                    chunk = f.readline(MAX_LINE_BYTES)
                state.too_long.append(BadRow(number, f"a line over {MAX_LINE_BYTES // (1024 * 1024)} MiB: skipped"))
                continue
            if chunk.endswith(b"\r\n"):
                state.crlf += 1
            yield number, _decode(chunk).rstrip("\r\n")
