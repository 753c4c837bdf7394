"""The request lines of SGLang's `--log-requests` as data: a tolerant reader of the Python reprs
they print.

A request line is `Receive: obj=GenerateReqInput(rid='…', text='…', …)`, `Finish: obj=…, out={…}`
(0.4.1+), `in=…, out={…}` (0.4.0), or `Receive OpenAI: obj={…}` (0.5.10+, level 2 and up), after an
optional `[2025-03-03 17:53:04] ` prefix (`.123` with SGLANG_LOG_MS=1; none at all in 0.5.8–0.5.11).
The reprs are Python's, not JSON, with one twist: at level 2 a string or list longer than 2048 is
printed as its first half, ` ... `, and its last half (`'abc…' ... '…xyz'`, `[0, 1, …] ... […, 9]`).
0.4.1 printed strings in double quotes without escaping and dict keys bare (`{max_new_tokens: 16}`).

`parse_call(text)` reads `obj=…, out=…, headers=…` into a dict by keyword, through Python's own
tokenizer and parser (never eval): the ` ... ` between two values becomes a join whose result is an
`Elided` value (its length is not the original's), a bare name is its own text (`nan` and `inf`
are floats), and a constructor `Name(k=v, …)` is a dict with `"__class__": "Name"`. Fields are read
by name, never by position: their order changed in 0.5.3, 0.5.7, 0.5.10 and 0.5.15.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Any

from storage.errors import CollectorError

#: `[2025-03-03 17:53:04] `, `[2025-03-03 17:53:04.123] `, `[2025-03-03 17:53:04 TP0] ` (scheduler lines)
PREFIX = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)(?: [^\]]*)?\] ")
KINDS = (("Receive OpenAI: ", "openai"), ("Receive: ", "receive"), ("Finish: ", "finish"), ("in=", "finish"))


class ElidedStr(str):
    """A string SGLang printed cut in the middle: its text and length are not the original's."""


class ElidedList(list):
    """A list SGLang printed cut in the middle."""


def split_line(line: str) -> tuple[str | None, str | None, str]:
    """(bracketed time or None, kind or None, the rest after the marker) of one log line;
    kind is "receive", "finish", "openai", "json" (a `--log-requests-format json` record) or None."""
    stamp = None
    m = PREFIX.match(line)
    body = line[m.end():] if m else line
    if m:
        stamp = m.group(1)
    if body.startswith("{") and '"event": "request.' in body[:400]:
        return stamp, "json", body
    for marker, kind in KINDS:
        if body.startswith(marker):
            rest = body[len(marker):]
            return stamp, kind, ("in_=" + rest) if marker == "in=" else rest
    return stamp, None, body


def _join_elisions(text: str) -> str:
    """`a ... b` -> `a + b` outside string literals (same length: token positions hold)."""
    if " ... " not in text:
        return text
    out = []
    pos = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP and tok.string == "..." and tok.start[0] == 1:
                out.append(text[pos:tok.start[1]])
                out.append("+")
                pos = tok.end[1]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # an unterminated line: the parser reports it
    out.append(text[pos:])
    return "".join(out)


class ReprError(CollectorError, ValueError):
    """A repr this reader cannot read; the message says where."""


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {(_key(k) if k is not None else "**"): _value(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.Name):
        return {"nan": float("nan"), "inf": float("inf")}.get(node.id, node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _value(node.operand)
        if isinstance(operand, (int, float)):
            return -operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left), _value(node.right)
        if isinstance(left, str) and isinstance(right, str):
            return ElidedStr(left + right)
        if isinstance(left, list) and isinstance(right, list):
            return ElidedList(left + right)
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        fields: dict[str, Any] = {"__class__": name}
        fields.update({kw.arg or "**": _value(kw.value) for kw in node.keywords})
        if node.args:
            fields["__args__"] = [_value(a) for a in node.args]
        return fields
    raise ReprError(f"cannot read {type(node).__name__} at column {getattr(node, 'col_offset', '?')}")


def _key(node: ast.AST) -> Any:
    value = _value(node)
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def parse_call(rest: str) -> dict[str, Any]:
    """`obj=…, out=…` (the rest of a request line) -> {"obj": …, "out": …}."""
    try:
        tree = ast.parse("_(" + _join_elisions(rest) + ")", mode="eval")
    except SyntaxError as exc:
        raise ReprError(f"not a readable repr ({exc.msg} at column {max((exc.offset or 3) - 2, 1)})") from None
    call = tree.body
    if not isinstance(call, ast.Call) or call.args:
        raise ReprError("not a list of name=value fields")
    return {kw.arg or "**": _value(kw.value) for kw in call.keywords}


def parse_value(text: str) -> Any:
    """One repr (`{…}` of a `Receive OpenAI:` line)."""
    return parse_call("v=" + text)["v"]
