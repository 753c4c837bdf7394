"""Readers of the public trace formats (an engine's own request records are read by the engine:
`Engine.trace_formats`). Each learnt from the format's published documentation and files:

| name | file | arrival | lengths | prefix blocks | sessions |
|---|---|---|---|---|---|
| `mooncake` | JSON lines: `timestamp`, `input_length`, `output_length`, `hash_ids` (Mooncake FAST'25, AIPerf's `mooncake_trace`) | `timestamp`, ms (`--time-unit s` for files in seconds); AIPerf's `delay` (ms after the session's previous turn) | both | `hash_ids`, 512 tokens | AIPerf's `session_id` |
| `bailian` | JSON lines: `chat_id`, `parent_chat_id`, `timestamp`, `input_length`, `output_length`, `hash_ids` (Alibaba Bailian usage traces) | `timestamp`, s | both | `hash_ids`, 16 tokens | the `parent_chat_id` chain |
| `azure` | CSV `TIMESTAMP,ContextTokens,GeneratedTokens` (+`NumImages`) (Azure LLM inference traces 2023, 2024, 2025) | absolute date-times: 0-7 fractional digits, no zone / `+00:00` / `Z`; naive ones are read as UTC | both | - | - |
| `burstgpt` | CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type` (+`Session ID`, `Elapsed time`) | `Timestamp`, s from midnight of day 0 (never starts at 0) | both; `Response tokens` 0 is a failed request (kept, status failed, never replayed) | - | `Session ID` where set |
| `lengths` | CSV or JSON lines with an input and an output length column and no arrival (`input_tokens`/`input_length`/`prompt_tokens`, `output_tokens`/`output_length`/`completion_tokens`; an optional `timestamp`, s) | needs `--rate` unless `timestamp` is there | both | - | `session_id` where set |

Quirks every reader survives (each counted in the import's notes): rows out of order (sorted
stably), equal timestamps (kept), traces that do not start at 0 (rebased), CRLF ends, a BOM, a
gzip file, a missing final newline, blank lines, unknown extra keys (ignored). A row that cannot be
read is a `BadRow` with its line number and reason; it never stops the import.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from collectors.trace.model import BadRow, ReadOptions, ReadResult, TraceRecord


def _int(value: Any, what: str, *, allow_none: bool = False) -> int | None:
    if value is None or value == "":
        if allow_none:
            return None
        raise ValueError(f"no {what}")
    if isinstance(value, bool):
        raise ValueError(f"{what} is {value!r}, not a count")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} is {value!r}, not a number") from None
    if not math.isfinite(number) or number < 0 or number != int(number):
        raise ValueError(f"{what} is {value!r}, not a whole count >= 0")
    return int(number)


def _float(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} is {value!r}, not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} is {value!r}")
    return number


def json_rows(lines: Iterable[tuple[int, str]], result: ReadResult,
               options: ReadOptions) -> Iterable[tuple[int, dict[str, Any]]]:
    for number, text in lines:
        result.lines_read = number
        if not text.strip():
            continue
        if options.max_requests is not None and len(result.records) >= options.max_requests:
            result.cut_at = number
            return
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            result.bad.append(BadRow(number, f"not JSON ({exc.msg} at column {exc.colno})"))
            continue
        if not isinstance(row, dict):
            result.bad.append(BadRow(number, f"a JSON {type(row).__name__}, not an object"))
            continue
        yield number, row


def _first_json(head: list[str]) -> dict[str, Any] | None:
    for text in head:
        if text.strip():
            try:
                row = json.loads(text)
            except json.JSONDecodeError:
                return None
            return row if isinstance(row, dict) else None
    return None


def _hash_ids(value: Any) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        raise ValueError("hash_ids is not a list of whole numbers")
    return list(value)


@dataclass(frozen=True, slots=True)
class _JsonLinesFormat:
    name: str
    description: str
    default_unit: str  # of `timestamp`
    block_size: int
    sniff_keys: frozenset[str]
    refuse_keys: frozenset[str]
    session_of: Callable[[dict[str, Any], dict[Any, Any]], str | None]

    def sniff(self, head: list[str]) -> bool:
        row = _first_json(head)
        return row is not None and self.sniff_keys <= row.keys() and not (self.refuse_keys & row.keys())

    def read(self, lines: Iterable[tuple[int, str]], options: ReadOptions) -> ReadResult:
        unit = options.time_unit or self.default_unit
        block = options.block_size or self.block_size
        result = ReadResult(format=self.name, clock=unit, block_size=block)
        mismatched = 0
        delays = 0
        last_arrival: dict[str, float] = {}
        chains: dict[Any, Any] = {}
        any_time = False
        for number, row in json_rows(lines, result, options):
            try:
                inp = _int(row.get("input_length"), "input_length")
                assert inp is not None
                out = _int(row.get("output_length"), "output_length", allow_none=True)
                hashes = _hash_ids(row.get("hash_ids"))
                session = self.session_of(row, chains)
                arrival: float | None = None
                if row.get("timestamp") is not None:
                    arrival = _float(row["timestamp"], "timestamp")
                    any_time = True
                elif row.get("delay") is not None and session is not None and session in last_arrival:
                    arrival = last_arrival[session] + _float(row["delay"], "delay")
                    delays += 1
            except ValueError as exc:
                result.bad.append(BadRow(number, str(exc)))
                continue
            if hashes is not None and len(hashes) != math.ceil(inp / block):
                mismatched += 1
            if session is not None and arrival is not None:
                last_arrival[session] = arrival
            text = row.get("text_input") if options.keep_text and isinstance(row.get("text_input"), str) else None
            result.records.append(TraceRecord(line=number, input_tokens=inp, output_tokens=out, arrival=arrival,
                                              hash_ids=hashes, session=session, text=text))
        if not any_time:
            result.clock = "none"
        if mismatched:
            result.notes.append(f"{mismatched} row(s) whose hash_ids do not cover input_length in {block}-token "
                                "blocks (kept; is --block-size right?)")
        if delays:
            result.notes.append(f"{delays} turn(s) timed by `delay` after their session's previous turn")
        return result


def _session_id(row: dict[str, Any], _chains: dict[Any, Any]) -> str | None:
    value = row.get("session_id")
    return None if value in (None, "") else str(value)


def _bailian_session(row: dict[str, Any], chains: dict[Any, Any]) -> str | None:
    """The root chat of the `parent_chat_id` chain (a parent seen earlier in the file)."""
    chat, parent = row.get("chat_id"), row.get("parent_chat_id")
    root = chains.get(parent, parent) if parent not in (None, -1, "-1") else chat
    chains[chat] = root
    return None if root is None else str(root)


MOONCAKE = _JsonLinesFormat(
    name="mooncake", description="Mooncake / AIPerf mooncake_trace JSON lines (timestamp in ms, hash_ids of 512 tokens)",
    default_unit="ms", block_size=512, sniff_keys=frozenset({"input_length"}),
    refuse_keys=frozenset({"chat_id", "parent_chat_id"}), session_of=_session_id)
BAILIAN = _JsonLinesFormat(
    name="bailian", description="Alibaba Bailian usage trace JSON lines (timestamp in s, hash_ids of 16 tokens)",
    default_unit="s", block_size=16, sniff_keys=frozenset({"chat_id", "parent_chat_id", "input_length"}),
    refuse_keys=frozenset(), session_of=_bailian_session)

_DATETIME = re.compile(
    r"^\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*(Z|[+-]\d{2}:?\d{2})?\s*$")


def parse_datetime(text: str) -> float:
    """An absolute date-time of the Azure traces as epoch seconds: 0 to 9 fractional digits (the
    2023 files carry 7, more than datetime's 6), zone none (read as UTC), `Z` or `+HH:MM`."""
    m = _DATETIME.match(text)
    if not m:
        raise ValueError(f"TIMESTAMP {text!r} is not a date-time like 2023-11-16 18:15:46.6805900")
    y, mo, d, h, mi, s, frac, zone = m.groups()
    base = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC).timestamp()
    if zone and zone != "Z":
        sign = -1 if zone[0] == "+" else 1  # +02:00 is two hours ahead of UTC: subtract
        digits = zone[1:].replace(":", "")
        base += sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return base + (int(frac) / 10 ** len(frac) if frac else 0.0)


def _csv_rows(lines: Iterable[tuple[int, str]], result: ReadResult,
              options: ReadOptions) -> Iterable[tuple[int, dict[str, str]]]:
    header: list[str] | None = None
    for number, text in lines:
        result.lines_read = number
        if not text.strip():
            continue
        try:
            cells = next(csv.reader([text]))
        except csv.Error as exc:
            result.bad.append(BadRow(number, f"not a CSV row ({exc})"))
            continue
        if header is None:
            header = [c.strip() for c in cells]
            continue
        if options.max_requests is not None and len(result.records) >= options.max_requests:
            result.cut_at = number
            return
        if len(cells) != len(header):
            result.bad.append(BadRow(number, f"{len(cells)} cells, the header has {len(header)}"))
            continue
        yield number, dict(zip(header, (c.strip() for c in cells), strict=True))


def _csv_header(head: list[str]) -> set[str]:
    for text in head:
        if text.strip():
            try:
                return {c.strip() for c in next(csv.reader([text]))}
            except csv.Error:
                return set()
    return set()


class _Azure:
    name = "azure"
    description = "Azure LLM inference trace CSV (TIMESTAMP as a date-time, ContextTokens, GeneratedTokens)"

    def sniff(self, head: list[str]) -> bool:
        return {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= _csv_header(head)

    def read(self, lines: Iterable[tuple[int, str]], options: ReadOptions) -> ReadResult:
        result = ReadResult(format=self.name, clock="epoch")
        for number, row in _csv_rows(lines, result, options):
            try:
                images = _int(row.get("NumImages"), "NumImages", allow_none=True)
                inp = _int(row.get("ContextTokens"), "ContextTokens")
                assert inp is not None
                result.records.append(TraceRecord(
                    line=number, input_tokens=inp, output_tokens=_int(row.get("GeneratedTokens"), "GeneratedTokens"),
                    arrival=parse_datetime(row.get("TIMESTAMP", "")), images=images))
            except ValueError as exc:
                result.bad.append(BadRow(number, str(exc)))
        return result


class _BurstGpt:
    name = "burstgpt"
    description = "BurstGPT CSV (Timestamp in s, Request tokens, Response tokens, Log Type)"

    def sniff(self, head: list[str]) -> bool:
        return {"Timestamp", "Request tokens", "Response tokens"} <= _csv_header(head)

    def read(self, lines: Iterable[tuple[int, str]], options: ReadOptions) -> ReadResult:
        result = ReadResult(format=self.name, clock=options.time_unit or "s")
        failed = 0
        for number, row in _csv_rows(lines, result, options):
            try:
                inp = _int(row.get("Request tokens"), "Request tokens")
                out = _int(row.get("Response tokens"), "Response tokens")
                assert inp is not None
                arrival = _float(row.get("Timestamp"), "Timestamp")
                elapsed = row.get("Elapsed time") or None
                latency = _float(elapsed, "Elapsed time") if elapsed is not None else None
            except ValueError as exc:
                result.bad.append(BadRow(number, str(exc)))
                continue
            status = "failed" if out == 0 else "ok"
            failed += status == "failed"
            result.records.append(TraceRecord(line=number, input_tokens=inp, output_tokens=out, arrival=arrival,
                                              session=row.get("Session ID") or None, status=status,
                                              source_latency_s=latency))
        if failed:
            result.notes.append(f"{failed} failed request(s) (Response tokens 0): kept as failed, not replayed")
        return result


_IN = ("input_tokens", "input_length", "prompt_tokens", "prompt_tokens_count", "input_tokens_count")
_OUT = ("output_tokens", "output_length", "completion_tokens", "output_tokens_count", "completion_tokens_count")


def _pick(row: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((row[n] for n in names if n in row), None)


class _Lengths:
    name = "lengths"
    description = "CSV or JSON lines of input and output lengths (input_tokens/output_tokens or aliases), arrival optional"

    def sniff(self, head: list[str]) -> bool:
        keys = set(_first_json(head) or {}) or _csv_header(head)
        return bool(keys & set(_IN)) and bool(keys & set(_OUT))

    def read(self, lines: Iterable[tuple[int, str]], options: ReadOptions) -> ReadResult:
        result = ReadResult(format=self.name, clock=options.time_unit or "s")
        it = iter(lines)
        first = next(it, None)
        while first is not None and not first[1].strip():  # blank lines before the first row
            first = next(it, None)
        chained = itertools.chain([first] if first else [], it)
        is_json = first is not None and first[1].lstrip().startswith("{")
        rows: Iterable[tuple[int, dict[str, Any]]] = (
            json_rows(chained, result, options) if is_json else _csv_rows(chained, result, options))
        any_time = False
        for number, row in rows:
            try:
                inp = _int(_pick(row, _IN), "the input length")
                assert inp is not None
                stamp = row.get("timestamp")
                arrival = _float(stamp, "timestamp") if stamp not in (None, "") else None
                any_time = any_time or arrival is not None
                session = row.get("session_id")
                result.records.append(TraceRecord(
                    line=number, input_tokens=inp, output_tokens=_int(_pick(row, _OUT), "the output length", allow_none=True),
                    arrival=arrival, session=None if session in (None, "") else str(session)))
            except ValueError as exc:
                result.bad.append(BadRow(number, str(exc)))
        if not any_time:
            result.clock = "none"
        return result


#: the generic formats in sniffing order (the more specific first)
FORMATS: dict[str, Any] = {f.name: f for f in (BAILIAN, MOONCAKE, _Azure(), _BurstGpt(), _Lengths())}
