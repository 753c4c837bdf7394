"""Pure parse of a Prometheus text payload (an engine's or an exporter's `/metrics`) that survives
bad lines and bounds its own cost. The engine collectors and the dcgm-exporter reader
(collectors/gpu_dcgm.py) both read their payloads here.

Parsing is prometheus_client's own text parser (`text_string_to_metric_families`); this module
decides what it is fed and what to do when it raises. The payload is cut into family blocks (a
block = one family's `# HELP`/`# TYPE` header and its samples) by scanning for header lines in
place, without splitting the text into lines; each block is parsed on its own under its header,
in chunks of ~64 KiB, and only a chunk that fails is parsed again line by line. So one bad line
costs one chunk's second reading (~600 lines), never the whole payload's or a whole family's. Every good sample is kept; every bad line becomes one
error string naming its line number.

Bounds (`ParseLimits`), so no payload can take the runner's memory or a poll's time:

- `max_series`: samples parsed per payload (one sample = one exposition line, a histogram
  bucket included). A family whose block would pass it is skipped whole (its line count is
  read without parsing it) and later, smaller families are still read: a figure is either whole
  or missing, never a partial sum over some of its ranks.
- `budget_s`: CPU seconds of this thread spent parsing one payload; past it the rest of the
  payload is skipped.

What a limit skipped is in `ParsedMetrics.limits` (sentences naming the family and the limit).

A payload that does not end with a newline was cut mid-line (the exposition format ends every
line with `\\n`): its last, partial line is reported and skipped, so a cut number ("12" of "125")
is never read as a value.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

DEFAULT_MAX_SERIES = 20_000  # samples per payload; a real LLM server exports ~600 per scheduler rank
DEFAULT_BUDGET_S = 2.0  # CPU seconds per payload; prometheus_client reads ~30k samples/s
CHUNK_BYTES = 64 * 1024  # a block is parsed in pieces of about this size (~600 lines)


@dataclass(slots=True, frozen=True)
class ParseLimits:
    """`max_series`: samples parsed per payload; `budget_s`: CPU seconds per payload."""

    max_series: int = DEFAULT_MAX_SERIES
    budget_s: float = DEFAULT_BUDGET_S


@dataclass(slots=True, frozen=True)
class ParsedSample:
    """One exposition sample: the name as written, its labels, its value, its family's type."""

    name: str
    labels: dict[str, str]
    value: float
    family: str
    type: str  # counter | gauge | histogram | summary | unknown ...


@dataclass(slots=True)
class ParsedMetrics:
    samples: list[ParsedSample] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)  # family name -> type
    errors: list[str] = field(default_factory=list)
    #: what a ParseLimits bound skipped: (kind "series" | "budget", a sentence naming it)
    limits: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The `pitwall parse-metrics --json` shape; non-finite values become null."""
        return {
            "samples": [
                {
                    "name": s.name,
                    "labels": dict(s.labels),
                    "value": s.value if math.isfinite(s.value) else None,
                }
                for s in self.samples
            ],
            "families": len(self.families),
            "errors": list(self.errors),
        }


def _parse_into(text: str, out: ParsedMetrics) -> None:
    """Parse `text` fully or raise; samples are added to `out` only on success."""
    found: list[ParsedSample] = []
    fams: dict[str, str] = {}
    for fam in text_string_to_metric_families(text):
        fams.setdefault(fam.name, fam.type)
        for s in fam.samples:
            found.append(ParsedSample(s.name, dict(s.labels), float(s.value), fam.name, fam.type))
    out.samples.extend(found)
    for name, typ in fams.items():
        out.families.setdefault(name, typ)


def _header_name(line: str) -> str | None:
    parts = line.split(None, 3)
    if len(parts) >= 3 and parts[0] == "#" and parts[1] in ("HELP", "TYPE"):
        return parts[2]
    return None


def _line_at(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start:] if end < 0 else text[start:end]


def _next_comment(text: str, pos: int) -> int:
    i = text.find("\n#", pos)
    return -1 if i < 0 else i + 1


def _blocks(text: str) -> Iterator[tuple[int, int, str | None]]:
    """(start, end, family name) of each family block, by offsets into `text` (no copies).

    A block starts at a HELP/TYPE line naming a family other than the current block's; only
    lines starting with `#` are looked at, found with str.find (C speed)."""
    start, name = 0, None
    pos = 0 if text.startswith("#") else _next_comment(text, 0)
    while pos >= 0:
        header = _header_name(_line_at(text, pos))
        if header is not None and header != name:
            if pos > start:
                yield start, pos, name
            start, name = pos, header
        pos = _next_comment(text, pos)
    if start < len(text):
        yield start, len(text), name


def _error(n: int, line: str, exc: Exception) -> str:
    reason = str(exc) or type(exc).__name__
    return f"line {n}: not a valid exposition line ({reason}); skipped: {line[:160]!r}"


def _header_end(text: str, start: int, end: int) -> int:
    """Where the comment lines that open the block [start, end) stop."""
    pos = start
    while pos < end and text.startswith("#", pos):
        nl = text.find("\n", pos, end)
        pos = end if nl < 0 else nl + 1
    return pos


def parse_metrics(text: str, limits: ParseLimits | None = None) -> ParsedMetrics:
    """Parse a /metrics payload; never raises on bad input (errors are in `.errors`, what a
    limit skipped in `.limits`)."""
    lim = limits or ParseLimits()
    out = ParsedMetrics()
    truncated: tuple[int, str] | None = None
    if text and not text.endswith("\n"):
        cut = text.rfind("\n") + 1
        truncated = (text.count("\n") + 1, text[cut:])
        text = text[:cut]
    t0 = time.thread_time()
    lineno, parsed = 1, 0
    for start, end, name in _blocks(text):
        lines = text.count("\n", start, end)
        if time.thread_time() - t0 > lim.budget_s:
            out.limits.append(("budget", _over_budget(lim, lineno, text.count("\n", start))))
            break
        if parsed + lines > lim.max_series:
            family = name or _line_at(text, start).split("{", 1)[0].split(" ", 1)[0]
            out.limits.append(("series",
                f"family {family} has {lines:,} lines, over the {lim.max_series:,}-sample "
                "limit per scrape; it was skipped"
            ))
        else:
            parsed += lines
            if not _parse_block(text, start, end, lineno, out, t0, lim):
                break
        lineno += lines
    if truncated is not None:
        n, tail = truncated
        out.errors.append(
            f"line {n}: the payload ends mid-line (cut off?); the partial line was skipped: {tail[:160]!r}"
        )
    return out


def _over_budget(lim: ParseLimits, lineno: int, rest: int) -> str:
    return (f"parsing passed its {lim.budget_s:g} s budget per scrape at line {lineno}; "
            f"the last {rest:,} lines were skipped")


def _parse_block(text: str, start: int, end: int, lineno: int, out: ParsedMetrics, t0: float,
                 lim: ParseLimits) -> bool:
    """One family block, its samples read in chunks of ~CHUNK_BYTES under its header lines; a
    chunk that fails is read again line by line, so a bad line costs one chunk twice. False when
    the budget ran out (the rest of the payload is then skipped)."""
    hdr_end = _header_end(text, start, end)
    header = text[start:hdr_end]
    if header:
        try:
            _parse_into(header, out)  # families with no samples are still families
        except Exception as exc:  # a broken TYPE line: report it, read the samples untyped
            last = header.rstrip("\n").rsplit("\n", 1)[-1]
            out.errors.append(_error(lineno + header.count("\n") - 1, last, exc))
            header = ""
    a, n = hdr_end, lineno + text.count("\n", start, hdr_end)
    while a < end:
        if time.thread_time() - t0 > lim.budget_s:
            out.limits.append(("budget", _over_budget(lim, n, text.count("\n", a))))
            return False
        b = min(end, a + CHUNK_BYTES)
        if b < end:
            nl = text.find("\n", b - 1, end)
            b = end if nl < 0 else nl + 1
        chunk = text[a:b]
        try:
            _parse_into(header + chunk, out)
        except Exception:
            _parse_lines(header, chunk, n, out)
        n += chunk.count("\n")
        a = b
    return True


def _parse_lines(header: str, chunk: str, first: int, out: ParsedMetrics) -> None:
    """A chunk that failed whole: its samples one by one under the block's header."""
    for i, line in enumerate(chunk.split("\n")):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            _parse_into(header + line + "\n", out)
        except Exception as exc:
            out.errors.append(_error(first + i, line, exc))
