"""Pure parse of a Prometheus text payload (SGLang's `/metrics`) that survives bad lines.

Parsing is prometheus_client's own text parser (`text_string_to_metric_families`); this module
only decides what to do when it raises. The parser stops at the first bad line, so a payload is
parsed whole first (the fast path), and on failure block by block (a block = one family's
`# HELP`/`# TYPE` header and its samples), and a failing block line by line under its header.
Every good sample is kept; every bad line becomes one error string naming its line number.

A payload that does not end with a newline was cut mid-line (the exposition format ends every
line with `\\n`): its last, partial line is reported and skipped, so a cut number ("12" of "125")
is never read as a value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


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


def _blocks(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Split numbered lines into family blocks: a HELP/TYPE line of a new name starts one."""
    blocks: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    current_name: str | None = None
    for n, line in lines:
        name = _header_name(line)
        if name is not None and name != current_name:
            if current:
                blocks.append(current)
            current, current_name = [], name
        current.append((n, line))
    if current:
        blocks.append(current)
    return blocks


def _error(n: int, line: str, exc: Exception) -> str:
    reason = str(exc) or type(exc).__name__
    return f"line {n}: not a valid exposition line ({reason}); skipped: {line[:160]!r}"


def parse_metrics(text: str) -> ParsedMetrics:
    """Parse a /metrics payload; never raises on bad input (errors are in `.errors`)."""
    out = ParsedMetrics()
    truncated: tuple[int, str] | None = None
    if text and not text.endswith("\n"):
        head, _, tail = text.rpartition("\n")
        truncated = (head.count("\n") + (2 if head else 1), tail)
        text = head + "\n" if head else ""
    try:
        _parse_into(text, out)
    except Exception:
        out = ParsedMetrics()
        numbered = list(enumerate(text.split("\n"), start=1))
        for block in _blocks(numbered):
            _parse_block(block, out)
    if truncated is not None:
        n, tail = truncated
        out.errors.append(
            f"line {n}: the payload ends mid-line (cut off?); the partial line was skipped: {tail[:160]!r}"
        )
    return out


def _parse_block(block: list[tuple[int, str]], out: ParsedMetrics) -> None:
    try:
        _parse_into("\n".join(line for _, line in block) + "\n", out)
        return
    except Exception:
        pass
    header = [(n, line) for n, line in block if line.startswith("#")]
    header_text = "\n".join(line for _, line in header) + "\n" if header else ""
    try:
        list(text_string_to_metric_families(header_text))
    except Exception as exc:  # a broken TYPE line: report it, read the samples untyped
        n, line = header[-1]
        out.errors.append(_error(n, line, exc))
        header_text = ""
    for n, line in block:
        if not line.strip() or line.startswith("#"):
            continue
        try:
            _parse_into(header_text + line + "\n", out)
        except Exception as exc:
            out.errors.append(_error(n, line, exc))
