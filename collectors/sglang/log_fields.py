"""The ``key: value`` fields of a Prefill/Decode record body: names, values, intactness, speed.

Grammar (SGLang's Prefill/Decode batch lines): fields are separated by ``, `` (0.1.20+) or
``. `` (0.1.14) and start right at a separator, so ``full token usage`` is never read as
``token usage``. Keys are mapped to canonical snake_case names (KEY_MAP; anything else is
slugged: ``est. read BW (GB/s per GPU)`` -> ``est_read_bw_gb_s_per_gpu``). Values are SGLang
numbers as written — ``-?[0-9]{1,20}(.[0-9]{1,20})?`` with an optional ``%`` (kept as the number
written: ``20.00%`` -> 20.0) — or ``True``/``False``; ``nan``, ``1e5``, ``1_0``, ``²`` or a cut
``0.`` are refused, never guessed.

Units: a value with a unit suffix is read in base units and its name says so: ``15.73s`` ->
``<name>_s`` = 15.73, ``12.50ms`` -> ``<name>_s`` = 0.0125 (0.1.x writes
``fsm_cache_avg_init_time: 0.00s.``; a name already ending in ``_s`` is not suffixed twice).

Intactness: every pair but the last is followed by a separator. The last one is kept only when it
is provably whole (a user who copies a line out of a terminal often cuts it):

- the record ended with a separator (``, ``, ``,``, or 0.1.x's ``%.`` / ``s.``);
- its key ends a record in some version (TERMINAL_KEYS; TERMINAL_RAW_KEYS for a key that does so
  only in one spelling: ``#running_req`` ends 0.1.3-0.1.9's ``new fill batch`` line, while
  ``#running-req`` never ends a record, so a line ending in it was cut);
- the value ends in ``%`` or a unit: SGLang writes those right after the whole number
  (``cache hit rate: 45.21%`` cut just after the ``%`` is whole);
- the value has exactly the decimals SGLang prints that field with (FIXED_DECIMALS: every float
  of the Prefill/Decode lines is ``:.2f``, 0.1.x -> 0.5.23): ``token usage: 0.12`` is whole,
  ``0.1`` is cut. An integer at the end may be cut anywhere (``#token: 51`` of 512): dropped.

Speed: a server repeats a handful of body layouts, so after a body has been read the slow way
its layout is compiled into one regex ("shape": the literal keys and separators with a capture
per value) and later bodies are read by a single fullmatch. A shape is kept only if it reads
the body it was learnt from exactly as the slow path did (same names, values and types), and
its value captures use the same number grammar, so both paths agree on every body.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

#: Canonical field names for SGLang's raw keys (all versions). Anything else is slugged.
KEY_MAP: dict[str, str] = {
    "#new-seq": "new_seq",
    "#seq": "new_seq",
    "#new-token": "new_token",
    "#new_token": "new_token",
    "#cached-token": "cached_token",
    "#cached_token": "cached_token",
    "cache hit rate": "cache_hit_rate",
    "tree_cache_hit_rate": "cache_hit_rate",
    "token usage": "token_usage",
    "#token": "num_token",
    "#running-req": "running_req",
    "#running_req": "running_req",
    "#queue-req": "queue_req",
    "#remaining_req": "queue_req",
    "gen throughput (token/s)": "gen_throughput",
    "input throughput (token/s)": "input_throughput",
    "largest-len": "largest_len",
    "pre-allocated usage": "pre_allocated_usage",
}

#: Keys that may legitimately end a record with nothing after them.
TERMINAL_KEYS = frozenset({
    "queue_req", "input_throughput", "cuda_graph", "cpu_graph", "npu_graph", "musa_graph",
    "transferring_req", "time", "fwd_occupancy", "fwd_idle_occupancy",
    "est_write_bw_gb_s_per_gpu", "est_prefill_tflops_s_per_gpu", "inflight_req",
    "optimistic_req", "waiting_image_req", "cache_miss",
})

#: Raw keys (as written) that end a record in some version although other spellings of the same
#: field never do: ``new fill batch. ... #remaining_req: 0. #running_req: 0`` (0.1.3-0.1.9,
#: router/model_rpc.py).
TERMINAL_RAW_KEYS = frozenset({"#running_req"})

#: Decimals SGLang prints a float field with (``f"{x:.2f}"`` in every version read, 0.1.3 ->
#: 0.5.23: tp_worker.py, scheduler.py, scheduler_metrics_mixin.py, metrics_reporter.py,
#: pool_stats_observer.py). A last value with exactly these decimals was not cut.
FIXED_DECIMALS: dict[str, int] = dict.fromkeys((
    "token_usage", "gen_throughput", "input_throughput", "cache_hit_rate", "accept_len",
    "accept_rate", "cap_len", "block_accept_len", "pre_allocated_usage", "full_token_usage",
    "swa_token_usage", "mamba_usage", "gpu_token_usage", "cpu_token_usage", "fwd_occupancy",
    "fwd_idle_occupancy", "est_prefill_tflops_s_per_gpu", "est_decode_tflops_s_per_gpu",
    "est_read_bw_gb_s_per_gpu", "est_write_bw_gb_s_per_gpu"), 2)

#: Unit suffixes read into base units (seconds); the field name gets ``_s``.
UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3}

#: Fields are read from at most this much of a record body; real records are < 2 KiB.
BODY_MAX = 16384
MAX_SHAPES = 8

_NUMBER = re.compile(r"-?[0-9]{1,20}(?:\.[0-9]{1,20})?")
# Shapes capture a subset of _NUMBER that is also valid JSON (no leading zeros), so a shape's
# captures can be written into JSON as they are; "007" simply takes the slow path.
_INT = r"-?(?:0|[1-9][0-9]{0,19})"
_FLOAT = r"-?(?:0|[1-9][0-9]{0,19})\.[0-9]{1,20}"
_SLUG = re.compile(r"[^a-z0-9]+")
_BOOL = {"True": True, "False": False}
_TO_BOOL = _BOOL.__getitem__  # one bound method, so shapes can tell bool captures by identity

_slug_cache: dict[str, str] = dict(KEY_MAP)


def canonical_key(raw: str) -> str:
    """``#new-token`` -> ``new_token``; unknown keys slugged to ``[a-z0-9_]+``."""
    name = _slug_cache.get(raw)
    if name is None:
        name = _SLUG.sub("_", raw.lower()).strip("_") or "field"
        if len(_slug_cache) < 4096:  # bounded: garbage lines must not grow it forever
            _slug_cache[raw] = name
    return name


def valid_key(key: str) -> bool:
    return bool(key) and (key[0] == "#" or key[0].isalpha()) and ":" not in key


def number(v: str) -> int | float | bool | None:
    """A value as written (see the module docstring), or None. Unit suffixes: see `value`."""
    b = _BOOL.get(v)
    if b is not None:
        return b
    if v[-1:] == "%":
        v = v[:-1]
    if _NUMBER.fullmatch(v) is None:
        return None
    return float(v) if "." in v else int(v)


def _unit(v: str) -> tuple[str, float] | None:
    """(number text, scale) of a value with a unit suffix (``15.73s``), else None."""
    for suffix in ("ms", "s"):  # longest first
        if v.endswith(suffix) and _NUMBER.fullmatch(v[:-len(suffix)]) is not None:
            return v[:-len(suffix)], UNITS[suffix]
    return None


def value(name: str, v: str) -> tuple[str, int | float | bool] | None:
    """(field name, value) of one ``key: value`` pair: `number`, or a unit-suffixed value in
    base units under a name ending in ``_s``; None when the value is not an SGLang number."""
    num = number(v)
    if num is not None:
        return name, num
    u = _unit(v)
    if u is None:
        return None
    text, scale = u
    base: int | float = float(text) if "." in text else int(text)
    if scale != 1.0:
        base = base * scale
    return (name if name.endswith("_s") else name + "_s"), base


def _close(val: str) -> tuple[str, bool]:
    """(value, closed): a value with its closing separator taken off, and whether it had one
    (``,``; 0.1.x ends a record with ``%.`` or ``s.``)."""
    if val[-1:] == ",":
        return val[:-1], True
    if val[-2:] in ("%.", "s."):
        return val[:-1], True
    return val, False


def whole(raw_key: str, name: str, val: str) -> bool:
    """Whether a last value with no closing separator is provably whole (module docstring)."""
    if name in TERMINAL_KEYS or raw_key in TERMINAL_RAW_KEYS:
        return True
    if val[-1:] == "%" or _unit(val) is not None:
        return True
    dec = FIXED_DECIMALS.get(name)
    if dec is None or _NUMBER.fullmatch(val) is None:
        return False
    dot = val.find(".")
    return dot >= 0 and len(val) - dot - 1 == dec


def _value_pattern(v: str, *, last: bool = False) -> tuple[str, Callable[[str], Any]] | None:
    """Regex and converter of one value for a shape; `last`: a float keeps its exact decimals,
    so a shape never reads a cut last value that the slow path would drop."""
    if v in _BOOL:
        return "(True|False)", _TO_BOOL
    suffix = ""
    if v[-1:] == "%":
        suffix, v = "%", v[:-1]
    elif v[-1:] == "s" and v[-2:] != "ms":
        suffix, v = "s", v[:-1]  # ms: slow path only (the capture is not the stored number)
    if _NUMBER.fullmatch(v) is None:
        return None
    if "." not in v:
        return f"({_INT}){suffix}", int
    if last:
        decimals = len(v) - v.index(".") - 1
        return rf"(-?(?:0|[1-9][0-9]{{0,19}})\.[0-9]{{{decimals}}}){suffix}", float
    return f"({_FLOAT}){suffix}", float


class Shape:
    """A learnt body layout: one regex with a capture per value, and the field names."""

    __slots__ = ("rx", "names", "convs", "template", "bools")

    def __init__(self, rx: re.Pattern[str], names: tuple[str, ...],
                 convs: tuple[Callable[[str], Any], ...]) -> None:
        self.rx, self.names, self.convs = rx, names, convs
        # JSON object body of the fields with the captures dropped in: keys are [a-z0-9_]
        self.template = ", ".join(f'"{n}": %s' for n in names)
        self.bools = any(c is _TO_BOOL for c in convs)

    def fields(self, groups: tuple[str, ...]) -> dict[str, Any]:
        return dict(zip(self.names, map(_call, self.convs, groups), strict=False))

    def json(self, groups: tuple[str, ...]) -> str:
        js = self.template % groups
        if self.bools:  # the only True/False in it are values: keys are lowercase
            js = js.replace("True", "true").replace("False", "false")
        return js


_shapes: list[Shape] = []
_learnt = 0
_misses = 0
_call = operator.call


def parse_fields(text: str, pos: int = 0) -> dict[str, Any]:
    """The intact pairs of the record body text[pos:]."""
    hit = match_shape(text, pos)
    if hit is not None:
        return hit[0].fields(hit[1])
    body = text[pos:pos + BODY_MAX] if len(text) - pos > BODY_MAX else text[pos:]
    out = _parse_slow(body)
    _maybe_learn(body, out)
    return out


def parse_fields_once(text: str, pos: int = 0) -> dict[str, Any]:
    """parse_fields without learning a shape (for lines too rare to earn one of the few)."""
    return _parse_slow(text[pos:pos + BODY_MAX])


def parse_fields_json(text: str, pos: int = 0) -> tuple[dict[str, Any], str | None]:
    """parse_fields plus, when a shape read the body, the fields as a JSON object body
    (``"running_req": 3, "cuda_graph": true``) for `parse-log` to write without re-encoding."""
    hit = match_shape(text, pos)
    if hit is not None:
        return hit[0].fields(hit[1]), hit[0].json(hit[1])
    return parse_fields(text, pos), None


def match_shape(text: str, pos: int = 0) -> tuple[Shape, tuple[str, ...]] | None:
    """(shape, captured value texts) when a learnt layout reads text[pos:] whole, else None."""
    for i, shape in enumerate(_shapes):
        m = shape.rx.fullmatch(text, pos)
        if m is not None:
            if i:  # keep the common layouts first
                _shapes[i], _shapes[i - 1] = _shapes[i - 1], shape
            return shape, m.groups()
    return None


def _split(body: str) -> tuple[str, list[str]]:
    sep = ", " if ", " in body else ". "
    return sep, body.split(sep)


def _parse_slow(body: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _, items = _split(body)
    tail = items.pop()
    for item in items:
        key, sep, val = item.partition(": ")
        if not sep or not valid_key(key):
            continue
        got = value(canonical_key(key), val)
        if got is not None and got[0] not in out:
            out[got[0]] = got[1]
    key, sep, val = tail.partition(": ")
    if sep and valid_key(key):
        name = canonical_key(key)
        val, closed = _close(val.rstrip())
        if not closed and not whole(key, name, val):
            return out  # the line ends inside or right after this value: maybe cut
        got = value(name, val)
        if got is not None and got[0] not in out:
            out[got[0]] = got[1]
    return out


def _maybe_learn(body: str, out: dict[str, Any]) -> None:
    global _learnt, _misses
    _misses += 1
    if not out or (_learnt >= 64 and _misses % 256):
        return  # an irregular log: stop compiling a regex per line
    shape = _build_shape(body, out)
    if shape is not None:
        _learnt += 1
        _shapes.insert(0, shape)
        del _shapes[MAX_SHAPES:]


def _build_shape(body: str, out: dict[str, Any]) -> Shape | None:
    sep, items = _split(body)
    tail = items.pop()
    pieces: list[str] = []
    names: list[str] = []
    convs: list[Callable[[str], Any]] = []
    for item in items:
        key, s, val = item.partition(": ")
        vp = _value_pattern(val) if s and valid_key(key) else None
        if vp is None:
            return None
        pieces.append(re.escape(key) + ": " + vp[0])
        names.append(_shape_name(key, val))
        convs.append(vp[1])
    if tail:
        key, s, val = tail.partition(": ")
        core, _ = _close(val.rstrip())
        vp = _value_pattern(core, last=True) if s and valid_key(key) else None
        if vp is None:
            return None
        pieces.append(re.escape(key) + ": " + vp[0] + re.escape(val[len(core):]))
        names.append(_shape_name(key, core))
        convs.append(vp[1])
        pattern = re.escape(sep).join(pieces)
    else:
        pattern = re.escape(sep).join(pieces) + re.escape(sep)
    if len(set(names)) != len(names):
        return None
    shape = Shape(re.compile(pattern), tuple(names), tuple(convs))
    m = shape.rx.fullmatch(body)
    if m is None:
        return None
    got = shape.fields(m.groups())
    if got != out or any(type(got[k]) is not type(out[k]) for k in got):
        return None  # the shape must say exactly what the slow path says
    return shape


def _shape_name(key: str, val: str) -> str:
    name = canonical_key(key)
    got = value(name, val)
    return got[0] if got is not None else name


def clear_shapes() -> None:
    """Forget learnt layouts (tests compare the two paths)."""
    global _learnt, _misses
    _shapes.clear()
    _learnt = _misses = 0
