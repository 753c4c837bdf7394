"""A request trace as Pitwall stores it, whatever file it came from.

A format reader (collectors/trace/formats.py, and an engine's own request logs through
`Engine.trace_formats`) turns a file into `TraceRecord`s and `BadRow`s; `normalise()` turns the
records into the stored trace: sorted by arrival, offsets in seconds from the first arrival,
prefix blocks renumbered in order of first use (so two imports of one file store one trace,
and nothing of the source's hash space leaks), sessions renamed `s1, s2, ...` in order of first
arrival, turns numbered within a session.

A record's `arrival` is a value on the reader's clock (`clock`, e.g. "ms" or "epoch"); only the
differences matter. A record without one (a file of lengths only) gets its offset from a seeded
Poisson process at `--rate` (a trace is never replayed without a schedule).

Nothing of a prompt is kept unless the import asks (`keep_text`): a replay builds synthetic text
with the same token counts and the same prefix sharing (collectors/trace/synth.py).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from storage.errors import RequestError

#: the APIs a trace request can name (what a replay sends it through)
TRACE_APIS = ("generate", "chat", "completions", "images")


class TraceError(RequestError, ValueError):
    """A trace that cannot be read or stored as asked; the message says what to change."""


@dataclass(slots=True)
class TraceRecord:
    """One request as a source describes it (see the module docstring for `arrival`)."""

    line: int  # where it starts in the source (1-based), for messages
    input_tokens: int
    output_tokens: int | None
    arrival: float | None = None
    hash_ids: list[int] | None = None  # prefix blocks of `block_size` tokens, in order
    session: str | None = None
    turn: int | None = None
    api: str | None = None  # one of TRACE_APIS; None: the replay's --api decides
    sampling: dict[str, Any] | None = None  # max_new_tokens, temperature, ... where the source says
    cached_tokens: int | None = None  # what the server reported reusing, where it did
    status: str = "ok"  # ok | failed (the source's failed row: never replayed) | aborted (the server aborted it)
    text: str | None = None  # the original prompt: kept only with keep_text
    images: int | None = None  # images per request (image traces)
    source_latency_s: float | None = None  # e2e the source measured (kept for reference)


@dataclass(slots=True)
class BadRow:
    line: int
    reason: str


@dataclass(slots=True)
class ReadResult:
    """What a reader made of a file: records, rows it could not use, and what it noticed."""

    format: str
    clock: str  # "ms" | "s" | "epoch" | "none" (no arrival times in the source)
    records: list[TraceRecord] = field(default_factory=list)
    bad: list[BadRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # quirks met: "CRLF line ends", "rebased ..."
    block_size: int | None = None
    lines_read: int = 0
    cut_at: int | None = None  # the row cap stopped the read here


class TraceFormat(Protocol):
    """A reader of one kind of file: `sniff(head)` says whether the first lines look like it,
    `read(lines, options)` reads them all (lines: (number, text) pairs, text without its end)."""

    name: str
    description: str

    def sniff(self, head: list[str]) -> bool: ...

    def read(self, lines: Iterable[tuple[int, str]], options: ReadOptions) -> ReadResult: ...


@dataclass(slots=True)
class ReadOptions:
    block_size: int | None = None  # overrides the format's
    time_unit: str | None = None  # "s" | "ms": overrides the format's default
    keep_text: bool = False
    max_requests: int | None = None  # stop after this many records (cut_at says so)
    tz: str | None = None  # zone of naive local date-times (None: this machine's)


@dataclass(slots=True)
class TraceRequest:
    """One request of a stored trace (storage/models.py TraceRequest, the same fields)."""

    seq: int
    arrival_s: float
    input_tokens: int
    output_tokens: int | None
    hash_ids: list[int] | None = None
    session: str | None = None
    turn: int | None = None
    api: str | None = None
    sampling: dict[str, Any] | None = None
    cached_tokens: int | None = None
    status: str = "ok"
    text: str | None = None
    images: int | None = None
    source_latency_s: float | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Trace:
    """A normalised trace: its requests and a summary (what pages preview and replays read)."""

    format: str
    clock: str
    requests: list[TraceRequest]
    block_size: int | None
    notes: list[str]
    bad: list[BadRow]
    digest: str  # content hash of the requests (the workload fingerprint's trace part)
    synthetic_arrivals: bool = False

    @property
    def duration_s(self) -> float:
        return self.requests[-1].arrival_s if self.requests else 0.0


def normalise(result: ReadResult, *, rate: float | None = None, seed: int = 0) -> Trace:
    """Sort, rebase, renumber: see the module docstring. `rate` (req/s) is required when the
    source has no arrival times, and refused when it has them."""
    records = list(result.records)
    timed = [r for r in records if r.arrival is not None]
    notes = list(result.notes)
    synthetic = False
    if records and not timed:
        if rate is None or rate <= 0:
            raise TraceError(
                f"{result.format}: the file has request lengths but no arrival times; give "
                "--rate R (requests per second) and Pitwall spaces them as a Poisson process at R.")
        rng = random.Random(seed)
        t = 0.0
        for r in records:
            r.arrival = t
            t += rng.expovariate(rate)
        notes.append(f"no arrival times in the file: Poisson arrivals at {rate:g} req/s (seed {seed})")
        synthetic = True
    elif len(timed) < len(records):
        missing = len(records) - len(timed)
        notes.append(f"{missing} request(s) without an arrival time were left out")
        records = timed
    elif rate is not None:
        raise TraceError(f"{result.format}: the file has its own arrival times; --rate is for files without them "
                         "(use --speed on replay to scale them).")
    unit = 1000.0 if result.clock == "ms" else 1.0
    order = sorted(range(len(records)), key=lambda i: (records[i].arrival, i))  # stable on ties
    inversions = sum(1 for a, b in zip(order, order[1:], strict=False) if b < a)
    if inversions:
        notes.append(f"rows were not in arrival order ({inversions} step(s) back): sorted, ties kept in file order")
    first = records[order[0]].arrival if order else 0.0
    if order and first and result.clock == "epoch":
        when = datetime.fromtimestamp(first, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        notes.append(f"the first arrival is at {when} UTC: offsets count from it")
    elif order and first:
        notes.append(f"the first arrival is at {first:g} {result.clock}: offsets count from it")
    blocks: dict[int, int] = {}
    sessions: dict[str, str] = {}
    turns: dict[str, int] = {}
    out: list[TraceRequest] = []
    for seq, i in enumerate(order):
        r = records[i]
        hash_ids = [blocks.setdefault(h, len(blocks)) for h in r.hash_ids] if r.hash_ids else r.hash_ids
        session = None
        turn = r.turn
        if r.session is not None:
            session = sessions.setdefault(r.session, f"s{len(sessions) + 1}")
            turns[session] = turns.get(session, 0) + 1
            turn = turns[session]
        assert r.arrival is not None and first is not None
        out.append(TraceRequest(seq=seq, arrival_s=round((r.arrival - first) / unit, 6), input_tokens=r.input_tokens,
                                output_tokens=r.output_tokens, hash_ids=hash_ids, session=session, turn=turn,
                                api=r.api, sampling=r.sampling or None, cached_tokens=r.cached_tokens,
                                status=r.status, text=r.text, images=r.images,
                                source_latency_s=r.source_latency_s, line=r.line))
    return Trace(format=result.format, clock=result.clock, requests=out, block_size=result.block_size,
                 notes=notes, bad=list(result.bad), digest=digest(out), synthetic_arrivals=synthetic)


def digest(requests: Iterable[TraceRequest]) -> str:
    """First 16 hex digits of SHA-256 over what a replay sends: arrivals, lengths, blocks,
    sessions, APIs and sampling (not the source's line numbers, not kept text)."""
    h = hashlib.sha256()
    for r in requests:
        h.update(json.dumps([r.arrival_s, r.input_tokens, r.output_tokens, r.hash_ids, r.session, r.turn, r.api,
                             r.sampling, r.status, r.images], sort_keys=True, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]
