"""The ``key: value`` fields of a Prefill/Decode record body: names, values, intactness, speed.

Grammar (reference/sglang-interfaces.md §1.2-1.5): fields are separated by ``, `` (0.1.20+) or
``. `` (0.1.14) and start right at a separator, so ``full token usage`` is never read as
``token usage``. Keys are mapped to canonical snake_case names (KEY_MAP; anything else is
slugged: ``est. read BW (GB/s per GPU)`` -> ``est_read_bw_gb_s_per_gpu``). Values are SGLang
numbers as written — ``-?[0-9]{1,20}(.[0-9]{1,20})?`` with an optional ``%`` (kept as the number
written: ``20.00%`` -> 20.0) — or ``True``/``False``; ``nan``, ``1e5``, ``1_0``, ``²`` or a cut
``0.`` are refused, never guessed.

Intactness: every pair but the last is followed by a separator. The last one is kept only when
the record ended with a separator (``, ``, ``,`` or 0.1.14's ``%.``) or its key is one that ends
a record in some version (TERMINAL_KEYS); otherwise the line may have been cut inside it.

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
    """A value as written (see the module docstring), or None."""
    b = _BOOL.get(v)
    if b is not None:
        return b
    if v[-1:] == "%":
        v = v[:-1]
    if _NUMBER.fullmatch(v) is None:
        return None
    return float(v) if "." in v else int(v)


def _value_pattern(v: str) -> tuple[str, Callable[[str], Any]] | None:
    if v in _BOOL:
        return "(True|False)", _TO_BOOL
    pct = "%" if v[-1:] == "%" else ""
    core = v[:-1] if pct else v
    if _NUMBER.fullmatch(core) is None:
        return None
    return (f"({_FLOAT}){pct}", float) if "." in core else (f"({_INT}){pct}", int)


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
        name = canonical_key(key)
        if name not in out:
            num = number(val)
            if num is not None:
                out[name] = num
    key, sep, val = tail.partition(": ")
    if sep and valid_key(key):
        name = canonical_key(key)
        val = val.rstrip()
        if val[-1:] == "," or val[-2:] == "%.":
            val = val[:-1]  # a closing separator (0.1.14 ends with `20.00%.`): the pair is whole
        elif name not in TERMINAL_KEYS:
            return out  # the line ends inside or right after this value: maybe cut
        if name not in out:
            num = number(val)
            if num is not None:
                out[name] = num
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
        names.append(canonical_key(key))
        convs.append(vp[1])
    if tail:
        key, s, val = tail.partition(": ")
        core = val.rstrip()
        if core[-1:] == "," or core[-2:] == "%.":
            core = core[:-1]
        vp = _value_pattern(core) if s and valid_key(key) else None
        if vp is None:
            return None
        pieces.append(re.escape(key) + ": " + vp[0] + re.escape(val[len(core):]))
        names.append(canonical_key(key))
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


def clear_shapes() -> None:
    """Forget learnt layouts (tests compare the two paths)."""
    global _learnt, _misses
    _shapes.clear()
    _learnt = _misses = 0
