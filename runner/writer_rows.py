"""What the batched writer can store: every row is checked BEFORE its batch is written.

Unchecked, one bad row fails its whole transaction (a NaN rate is NULL to SQLite, and
`sample.value` is NOT NULL) and the writer retries that batch forever, so one server's bad
counter would cost every server its samples, events and collector state. Here each row is judged on
its own, with the rules of both databases:

- a sample needs a finite number (`math.isfinite`; NaN and ±Inf are refused: SQLite stores NaN
  as NULL, PostgreSQL's JSON refuses both), a timestamp that is a finite number, integer ids in
  PostgreSQL's INTEGER range (±2,147,483,647), and a metric key (at most MAX_METRIC_CHARS
  characters) and a source (at most MAX_SOURCE_CHARS) that are text a database can hold (no NUL
  character, which PostgreSQL refuses; no lone surrogate, which UTF-8 cannot encode);
- an event needs a kind of storage/kinds.py EVENT_KINDS, a known severity and valid ids; its
  message and raw excerpt are kept, cut to MAX_MESSAGE_CHARS / MAX_RAW_CHARS with a marker and
  with NUL / lone surrogates replaced, so an event is never lost to its own text;
- a collector's saved state needs a text key and a value that is JSON without NaN or ±Inf
  (`json.dumps(..., allow_nan=False)`; PostgreSQL's JSON refuses them).

A row that fails is set aside (`Aside`: server, reason, what it was) and never written; the
writer reports each (server, reason) episode once (runner/writer.py).
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from typing import Any

from collectors.base import EventRow, SampleRow
from storage.kinds import EVENT_KINDS

MAX_METRIC_CHARS = 200
MAX_SOURCE_CHARS = 100
MAX_STATE_KEY_CHARS = 200
MAX_MESSAGE_CHARS = 4_000
MAX_RAW_CHARS = 8_000
INT_MAX = 2**31 - 1  # PostgreSQL INTEGER, the type of every id column
SEVERITIES = frozenset(sev for sev, _ in EVENT_KINDS.values())
CUT = " …[cut]"

# reasons: what is wrong with a row, as the set-aside event says it
NON_FINITE = "its value is NaN or infinite"
NOT_A_NUMBER = "its value is not a number"
MISSING = "a required field is empty"
BAD_FIELD = "a timestamp or id is not a finite number in range"
BAD_TEXT = "its metric key or source is over-long or not storable text"
UNKNOWN_KIND = "its event kind is not in storage/kinds.py EVENT_KINDS"
BAD_SEVERITY = "its severity is not info, warning, error or critical"
BAD_STATE = "the collector state is not JSON without NaN or infinity"
REFUSED = "the database refused the row"


@dataclass(frozen=True, slots=True)
class Aside:
    """One row set aside: whose (server id, None when unknown), why, and what (a metric key,
    an event kind or a state key, cut for display), with the offending value shown short."""

    server_id: int | None
    reason: str
    what: str
    shown: str = ""


def shown(value: Any, limit: int = 80) -> str:
    """A value as a short printable excerpt (a hostile key may be megabytes or binary)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Bad:
    """An id that cannot be stored."""


BAD = _Bad()


def _id(value: Any, *, optional: bool) -> int | None | _Bad:
    """An id as int; None when allowed; BAD when it cannot be stored."""
    if value is None:
        return None if optional else BAD
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return BAD
    n = int(value)
    return n if -INT_MAX <= n <= INT_MAX else BAD


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        x = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return x if math.isfinite(x) else None


def storable_text(value: Any, limit: int) -> bool:
    """True for a non-empty str of at most `limit` characters that both databases store."""
    if not isinstance(value, str) or not value or len(value) > limit or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_text(value: str, limit: int) -> str:
    """`value` as storable text: NUL and lone surrogates replaced, cut to `limit` characters."""
    value = value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    return value if len(value) <= limit else value[: limit - len(CUT)] + CUT


def check_sample(s: SampleRow) -> tuple[tuple[Any, ...] | None, Aside | None]:
    """(the row as a SAMPLE_COLUMNS tuple, None) or (None, why it cannot be stored)."""
    sid = _id(s.server_id, optional=False)
    owner = sid if isinstance(sid, int) else None
    what = shown(s.metric) if not isinstance(s.metric, str) else s.metric[:MAX_METRIC_CHARS]
    if s.value is None or s.metric is None or s.source is None or s.ts is None or s.server_id is None:
        return None, Aside(owner, MISSING, what, shown(s.value))
    if isinstance(s.value, bool) or not isinstance(s.value, numbers.Real):
        return None, Aside(owner, NOT_A_NUMBER, what, shown(s.value))
    value = _finite(s.value)
    if value is None:
        return None, Aside(owner, NON_FINITE, what, shown(s.value))
    ts = _finite(s.ts)
    launch = _id(s.launch_id, optional=True)
    if ts is None or sid is BAD or launch is BAD:
        return None, Aside(owner, BAD_FIELD, what, shown((s.ts, s.server_id, s.launch_id)))
    if not storable_text(s.metric, MAX_METRIC_CHARS) or not storable_text(s.source, MAX_SOURCE_CHARS):
        return None, Aside(owner, BAD_TEXT, shown(s.metric), shown(s.source))
    return (ts, sid, launch, s.source, s.metric, value), None


def check_event(e: EventRow) -> tuple[dict[str, Any] | None, Aside | None]:
    """(the row as an Event dict, None) or (None, why it cannot be stored)."""
    sid = _id(e.server_id, optional=True)
    owner = sid if isinstance(sid, int) else None
    what = f"event {shown(e.kind, 60)}"
    if not isinstance(e.kind, str) or e.kind not in EVENT_KINDS:
        return None, Aside(owner, UNKNOWN_KIND, what)
    if e.severity not in SEVERITIES:
        return None, Aside(owner, BAD_SEVERITY, what, shown(e.severity))
    ts = _finite(e.ts)
    launch = _id(e.launch_id, optional=True)
    if ts is None or sid is BAD or launch is BAD:
        return None, Aside(owner, BAD_FIELD, what, shown((e.ts, e.server_id, e.launch_id)))
    if not isinstance(e.message, str) or not (e.raw is None or isinstance(e.raw, str)):
        return None, Aside(owner, MISSING, what, "message or raw is not text")
    raw = clean_text(e.raw, MAX_RAW_CHARS) if e.raw is not None else None
    return {"ts": ts, "server_id": sid, "launch_id": launch, "kind": e.kind, "severity": e.severity,
            "message": clean_text(e.message, MAX_MESSAGE_CHARS), "raw": raw}, None


def state_owner(key: Any) -> int | None:
    """The server id in a state key `<collector>:<server_id>:<what>`, else None."""
    parts = key.split(":") if isinstance(key, str) else []
    if len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) < 10:
        return int(parts[1])
    return None


def check_state(key: Any, value: Any) -> Aside | None:
    """None when `value` can be saved under `key`, else why not."""
    owner = state_owner(key)
    if not storable_text(key, MAX_STATE_KEY_CHARS):
        return Aside(owner, BAD_STATE, f"state {shown(key, 60)}", "the key is not storable text")
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeError, RecursionError) as exc:
        return Aside(owner, BAD_STATE, f"state {key}", shown(str(exc)))
    return None
