"""Stream parsing of an SGLang log: records and events in file order, multi-line events grouped.

`parse_stream(lines)` is parse_line over an iterable of lines plus two pieces of memory:

- **crash grouping** — a traceback or a scheduler exception (``Scheduler hit an exception:``,
  ``Exception in ModelTpServer:``, ``Received sigquit from a child process``, SGLang's own
  watchdog timeout) becomes ONE `crash` event whose `raw` holds all its lines. The group goes on
  while lines look like a traceback (indented, ``Traceback``, ``During handling ...``, blank,
  the final ``SomeError: ...`` line) and ends at the first other line. Events found inside it
  (``torch.OutOfMemoryError: CUDA out of memory`` as the final line) are emitted too, right
  after the crash: the crash says the scheduler died, the inner event says why.
- **hard-wrapped NCCL watchdog messages** — a line that mentions NCCL/watchdog/[Rank without a
  whole phrase is held and joined with the next line (whitespace ignored); a match becomes one
  `nccl_timeout` event at the first line.

`StreamParser` is the incremental form the tailer uses: `feed()` one line at a time, `busy`
says a group is open (every line must then be fed, not only prefiltered ones), `pending_pos`
is the caller's position token of the first held line (the tailer persists that offset, so a
restart re-reads an unfinished group instead of losing it), `flush()` closes what is open.
`iter_binary(fileobj)` is the fast path of `pitwall parse-log`: a bytes prefilter so that
lines that cannot matter are never decoded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from collectors.sglang.log_parse import (
    CRASH_START,
    PREFILTER,
    PREFILTER_B,
    LogRecord,
    classify_event,
    clean_line,
    decode_line,
    excerpt,
    make_event,
    nccl_match,
    parse_clean,
    parse_other,
    parse_record,
)

#: A group longer than this is closed anyway (a runaway traceback must not hold the offset).
GROUP_MAX_LINES = 400
_TB_FINAL = re.compile(r"[A-Za-z_][\w.]*(?::|$)")
_CONTINUES = ("Traceback (", "During handling of the above exception",
              "The above exception was the direct cause")
_NCCL_HINTS = ("NCCL", "[Rank", "atchdog")


@dataclass(slots=True)
class ParseStats:
    """What `parse-log` reports on stderr: lines seen, records emitted, lines it could not read."""

    lines: int = 0
    records: int = 0
    bad_utf8: int = 0  # candidate lines with invalid UTF-8 (read with U+FFFD replacement)
    unreadable_records: int = 0  # a record header with no intact field
    by_kind: dict[str, int] = field(default_factory=dict)

    @property
    def unreadable(self) -> int:
        return self.bad_utf8 + self.unreadable_records


@dataclass(slots=True)
class _Group:
    start_line: int
    start_pos: Any
    first: str
    lines: list[str]
    inner: list[LogRecord]
    seen_file: bool = False
    seen_final: bool = False


class StreamParser:
    """Incremental parser; see the module docstring."""

    def __init__(self, stats: ParseStats | None = None) -> None:
        self.stats = stats if stats is not None else ParseStats()
        self._group: _Group | None = None
        self._nccl: tuple[int, Any, str] | None = None

    @property
    def busy(self) -> bool:
        return self._group is not None or self._nccl is not None

    @property
    def pending_pos(self) -> Any:
        """Position token of the first line fed but not yet emitted (None when nothing held)."""
        if self._nccl is not None:
            return self._nccl[1]
        if self._group is not None:
            return self._group.start_pos
        return None

    def feed_raw(self, line: str | bytes, line_no: int, pos: Any = None) -> list[LogRecord]:
        """Feed one physical line as read (bytes or str, line ending included or not)."""
        text, ok = decode_line(line)
        if not ok:
            self.stats.bad_utf8 += 1
        return self.feed(clean_line(text), line_no, pos)

    def feed(self, text: str, line_no: int, pos: Any = None, *, checked: bool = False
             ) -> list[LogRecord]:
        """Feed one cleaned line (clean_line applied); returns what it completes, in order.

        `checked` says the caller already found a prefilter word in this very text.
        """
        out: list[LogRecord] = []
        if self._nccl is not None:
            held_no, _, held = self._nccl
            self._nccl = None
            joined = held + text
            if nccl_match(joined):
                self._emit(out, make_event("nccl_timeout", joined, held_no,
                                           raw=held + "\n" + text))
                return out
        if self._group is not None:
            if self._continues(self._group, text):
                return out
            self._close(out)
            checked = False
        if not checked and not PREFILTER.search(text):
            return out
        if "batch" in text or "#running" in text:
            rec = parse_record(text, line_no)
            if rec is not None:
                self._emit(out, rec)
                return out
            if "batch" in text and ("Prefill batch" in text or "Decode batch" in text):
                self.stats.unreadable_records += 1
        rec = parse_other(text, line_no)
        if rec is not None:
            self._emit(out, rec)
            return out
        ev = classify_event(text)
        crash = CRASH_START.search(text)
        if ev is not None and not (crash and ev[0] == "oom"):
            self._emit(out, make_event(ev[0], text, line_no, ev[1]))
            return out
        if crash:
            # an error header that names the OOM (diffusion `Error executing request ...: CUDA
            # out of memory`) opens the crash group; the OOM is its inner event
            inner = [make_event(ev[0], text, line_no, ev[1])] if ev is not None else []
            self._group = _Group(line_no, pos, text, [text], inner,
                                 seen_file="Traceback (" in text)
            return out
        if any(h in text for h in _NCCL_HINTS):
            self._nccl = (line_no, pos, text)
        return out

    def flush(self) -> list[LogRecord]:
        """Close an open group and drop a held NCCL fragment (end of input, or an idle file)."""
        out: list[LogRecord] = []
        self._nccl = None
        if self._group is not None:
            self._close(out)
        return out

    def _emit(self, out: list[LogRecord], rec: LogRecord) -> None:
        out.append(rec)
        self.stats.records += 1
        self.stats.by_kind[rec.kind] = self.stats.by_kind.get(rec.kind, 0) + 1

    def _continues(self, g: _Group, text: str) -> bool:
        if len(g.lines) >= GROUP_MAX_LINES:
            return False
        if text.startswith(_CONTINUES):
            g.seen_final = False
        elif not text.strip():
            pass
        elif g.seen_final:
            return False
        elif text[0] in " \t":
            g.seen_file = g.seen_file or text.lstrip().startswith("File ")
        elif g.seen_file and _TB_FINAL.match(text):
            g.seen_final = True
        else:
            return False
        g.lines.append(text)
        if PREFILTER.search(text):
            ev = classify_event(text)
            if ev is not None and all(i.kind != ev[0] for i in g.inner):
                # one event per kind per crash: the header and the final line often both say OOM
                inner = make_event(ev[0], text, g.start_line + len(g.lines) - 1, ev[1])
                g.inner.append(inner)
        return True

    def _close(self, out: list[LogRecord]) -> None:
        g = self._group
        assert g is not None
        self._group = None
        lines = g.lines
        while lines and not lines[-1].strip():
            lines.pop()
        rec = make_event("crash", g.first, g.start_line, raw=excerpt("\n".join(lines)))
        final = next((t for t in reversed(lines) if _TB_FINAL.match(t) and t[0] not in " \t"),
                     None)
        if final is not None and final is not g.first:
            rec.message = (rec.message or "") + " | " + final.strip()[:200]
        self._emit(out, rec)
        for inner in g.inner:
            if inner.timestamp is None:  # a raw traceback line: the group's prefix dates it
                inner.timestamp, inner.ranks = rec.timestamp, dict(rec.ranks)
            self._emit(out, inner)


def parse_stream(lines: Iterable[str | bytes], stats: ParseStats | None = None
                 ) -> Iterator[LogRecord]:
    """Records and events of a whole log in file order; line numbers are 1-based."""
    p = StreamParser(stats)
    st = p.stats
    by_kind = st.by_kind
    search_b = PREFILTER_B.search
    line_no = 0
    for line in lines:
        line_no += 1
        if p._group is None and p._nccl is None:  # not busy (inlined: this loop is hot)
            # cheap path: most lines (access logs, loading chatter) cannot matter
            if line.__class__ is bytes:
                if b"batch" not in line and not search_b(line):  # "batch" is a prefilter word
                    continue
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError:
                    text = line.decode("utf-8", "replace")
                    st.bad_utf8 += 1
                if "\x1b" in text or "\r" in text:
                    text = clean_line(text)
                    recs = p.feed(text, line_no)
                else:
                    if text[-1:] == "\n":
                        text = text[:-1]
                    if "batch" in text:
                        # what feed() would do with no group open, minus its bookkeeping
                        rec = parse_record(text, line_no)
                        if rec is not None:
                            st.records += 1
                            by_kind[rec.kind] = by_kind.get(rec.kind, 0) + 1
                            yield rec
                            continue
                    recs = p.feed(text, line_no, checked=True)
                if recs:
                    yield from recs
                continue
            if not PREFILTER.search(line):  # type: ignore[arg-type]
                continue
        recs = p.feed_raw(line, line_no)
        if recs:
            yield from recs
    st.lines = line_no
    yield from p.flush()


def iter_binary(f: IO[bytes], stats: ParseStats | None = None) -> Iterator[LogRecord]:
    """parse_stream over a binary file object (the `parse-log` fast path)."""
    return parse_stream(f, stats)


def parse_text(text: str) -> list[LogRecord]:
    """Convenience for tests: every record of a multi-line string."""
    return list(parse_stream(text.splitlines()))


__all__ = ["LogRecord", "ParseStats", "StreamParser", "parse_clean", "parse_stream",
           "parse_text", "iter_binary"]
