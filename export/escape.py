"""What text from a server, a payload or a profile may do in an export: nothing but read as text.

Server names, model and profile names, event messages, error strings, notes and filter values
reach the Markdown and CSV exports. Every one of them passes through ONE function per format,
here, and the exporters (formats.py, fleet.py, tune_doc.py) call nothing else:

- Markdown, `md_text`: `&`, `<`, `>` become entities (no raw HTML such as `<script>` or `<img>`,
  no `<javascript:...>` autolink); `\\`, `[`, `]` are backslash-escaped, so no inline or
  reference link or image (`[x](javascript:...)`, `![](http://tracker/p.png)`) can form;
  `` ` ``, `*`, `~`, `$` too (no code span, emphasis, strike-through or math changes what is
  shown; `_` is left alone: metric keys and flag names stay readable, and an underscore only
  ever italicises); `|` so a cell stays one table cell; line breaks become spaces (no heading, list or
  block starts inside a value). `md_table` builds a pipe table of escaped cells. Our own
  headings and table syntax are written around the escaped text, never through it.
- CSV, `csv_cell` (and `csv_writer`, a csv.writer whose every row goes through it): a text cell
  that a spreadsheet would read as a formula — one starting with `=`, `+`, `-`, `@`, a tab or a
  carriage return — gets a leading `'` (the OWASP rule for CSV injection). A number stays a
  number: int and float values pass as they are, and so does text that is a plain numeric
  literal (`-0.25`, `1e-06`, `-inf`), the way the scorecard CSV writes its values; a numeric cell
  is not text.

Cross-check: `pitwall export ... --format md | python -m markdown_it` shows no `<script`, no
`href="javascript:`, no `<img`; in a spreadsheet, a server named `=1+1` reads `=1+1`, not 2.
"""

from __future__ import annotations

import csv
import numbers
import re
from collections.abc import Iterable
from typing import Any, TextIO

_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MD_BACKSLASH = re.compile(r"([\\\[\]`*~$|])")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c]+")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)", re.IGNORECASE)


def md_text(value: object) -> str:
    """`value` as Markdown that renders as exactly its text (see the module docstring)."""
    text = _LINE_BREAKS.sub(" ", str(value))
    text = _MD_BACKSLASH.sub(r"\\\1", text)  # first: the entities below hold no escapable char
    return "".join(_MD_ENTITIES.get(c, c) for c in text)


def md_table(head: Iterable[object], rows: Iterable[Iterable[object]]) -> str:
    """A pipe table whose every cell, head included, went through md_text."""
    names = [md_text(h) for h in head]
    out = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    out += ["| " + " | ".join(md_text(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet reads as data: numbers as they are, formula-like text with `'`."""
    if value is None or isinstance(value, bool) or isinstance(value, numbers.Number):
        return value
    text = str(value)
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


class _SafeWriter:
    """csv.writer with every cell through csv_cell (what `csv_writer` returns). Rows end in
    CRLF (RFC 4180), the csv module's default: it quotes a field holding any character of the
    line terminator, so a `\r` or `\n` inside a server's text never splits a row."""

    def __init__(self, out: TextIO) -> None:
        self._w = csv.writer(out)

    def writerow(self, row: Iterable[Any]) -> None:
        self._w.writerow([csv_cell(c) for c in row])


def csv_writer(out: TextIO) -> _SafeWriter:
    """The CSV writer of every export."""
    return _SafeWriter(out)
