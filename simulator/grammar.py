"""Constrained decoding as SGLang's xgrammar backend presents it: compile on first use of a
grammar key (cached after, failures too), refusal of a bad grammar, and output that follows it.

Keys are SGLang's: ("json", schema string), ("regex", pattern), ("ebnf", grammar). A request's
output is one instance of the grammar, drawn from the request's seeded generator: a JSON document
valid against the schema (object, array, string with pattern / length / enum / const, integer and
number ranges, boolean, null, anyOf / oneOf, local $ref), a string matching the regex, or a
sentence of the EBNF grammar (a GBNF subset: quoted strings, rule names, groups, [classes], * + ?).
Then EOS ends it (finish reason "stop"), unless max_new_tokens cuts it first ("length").

Errors carry xgrammar 0.2.7's message text (RuntimeError strings, with its source position
prefix) behind SGLang's "Failed to compile {key} grammar: ", and the keyword check of
sglang/srt/constrained/json_schema_validation.py ("JSON Schema at # is not supported by xgrammar").

Compile cost (a simulator choice, model seconds): COMPILE_BASE_S + COMPILE_PER_CHAR_S x length.
"""

from __future__ import annotations

import json
import random
import re
import string
import time
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from simulator import tokenizer

COMPILE_BASE_S = 0.05
COMPILE_PER_CHAR_S = 0.0005
JSON_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
# sglang/srt/constrained/json_schema_validation.py, _XGRAMMAR_UNSUPPORTED_KEYWORDS
XGRAMMAR_UNSUPPORTED = frozenset({
    "contains", "dependentRequired", "dependentSchemas", "else", "if", "maxContains",
    "minContains", "multipleOf", "not", "then", "uniqueItems"})
MAX_REPEAT_EXTRA = 3


class GrammarError(ValueError):
    """A grammar that does not compile; str() is SGLang's abort message."""


def _xg(where: str, msg: str) -> str:
    return f"[{time.strftime('%H:%M:%S')}] /project/cpp/{where}: {msg}\n"


def compile_cost_s(key: tuple[str, str]) -> float:
    return COMPILE_BASE_S + COMPILE_PER_CHAR_S * len(key[1])


class Grammar:
    """A compiled grammar: `sample(rng)` draws one output text."""

    def __init__(self, key: tuple[str, str]) -> None:
        self.kind, self.text = key
        try:
            if self.kind == "json":
                self._schema = _check_schema(self.text)
            elif self.kind == "regex":
                self._regex = _parse_regex(self.text)
            elif self.kind == "ebnf":
                self._rules = _parse_ebnf(self.text)
            else:
                raise GrammarError(f"Invalid key_type: {self.kind}={self.text}")
        except GrammarError as exc:
            raise GrammarError(f"Failed to compile {self.kind} grammar: {exc}") from None

    def sample(self, rng: random.Random) -> str:
        if self.kind == "json":
            return json.dumps(_instance(self._schema, self._schema, rng, 0))
        if self.kind == "regex":
            return _regex_text(self._regex, rng)
        return _ebnf_text(self._rules, "root", rng, 0)


# ------------------------------------------------------------------ JSON schema
def _check_schema(text: str) -> dict[str, Any]:
    try:
        schema = json.loads(text)  # dispatch_json parses with Python's json first
    except json.JSONDecodeError as exc:
        raise GrammarError(str(exc)) from None
    if not isinstance(schema, dict | bool):
        raise GrammarError(_xg("json_schema_converter.cc:4175", "Schema should be an object or bool"))
    _walk(schema, "#")
    return schema if isinstance(schema, dict) else {}


def _walk(node: Any, pointer: str) -> None:
    if not isinstance(node, dict):
        return
    bad = sorted(XGRAMMAR_UNSUPPORTED.intersection(node))
    if bad:
        raise GrammarError(f"JSON Schema at {pointer} is not supported by xgrammar: "
                           f"keyword(s) {', '.join(bad)} would be ignored")
    t = node.get("type")
    for one in t if isinstance(t, list) else [t] if t is not None else []:
        if not isinstance(one, str):
            raise GrammarError(_xg("json_schema_converter.cc:4175", "Type should be a string"))
        if one not in JSON_TYPES:
            raise GrammarError(_xg("json_schema_converter.cc:4175", f'Unsupported type "{one}"'))
    for key in ("properties", "$defs", "definitions"):
        for name, child in (node.get(key) or {}).items():
            _walk(child, f"{pointer}/{key}/{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            _walk(node[key], f"{pointer}/{key}")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, child in enumerate(node.get(key) or []):
            _walk(child, f"{pointer}/{key}/{i}")
    if "pattern" in node:
        _parse_regex(str(node["pattern"]))


def _resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        cur: Any = root
        for part in ref[2:].split("/"):
            cur = cur.get(part, {}) if isinstance(cur, dict) else {}
        return cur if isinstance(cur, dict) else {}
    return node


def _instance(root: dict[str, Any], node: Any, rng: random.Random, depth: int) -> Any:
    if not isinstance(node, dict):
        return {}
    node = _resolve(root, node)
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return rng.choice(node["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and node[key]:
            return _instance(root, rng.choice(node[key]), rng, depth + 1)
    if isinstance(node.get("allOf"), list) and node["allOf"]:
        merged: dict[str, Any] = {}
        for part in node["allOf"]:
            merged.update(_resolve(root, part))
        return _instance(root, merged, rng, depth + 1)
    t = node.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t is None:
        t = "object" if "properties" in node else "string"
    return _TYPED[t](root, node, rng, depth)


def _object(root: dict[str, Any], node: dict[str, Any], rng: random.Random, depth: int) -> Any:
    props = node.get("properties") or {}
    required = set(node.get("required") or [])
    return {k: _instance(root, v, rng, depth + 1) for k, v in props.items()
            if k in required or (depth < 3 and rng.random() < 0.5)}


def _array(root: dict[str, Any], node: dict[str, Any], rng: random.Random, depth: int) -> Any:
    lo = int(node.get("minItems", 0))
    hi = int(node.get("maxItems", lo + MAX_REPEAT_EXTRA))
    items = node.get("items") if isinstance(node.get("items"), dict) else {"type": "integer"}
    return [_instance(root, items, rng, depth + 1) for _ in range(rng.randint(lo, max(lo, hi)))]


def _string(root: dict[str, Any], node: dict[str, Any], rng: random.Random, depth: int) -> Any:
    if "pattern" in node:
        return _regex_text(_parse_regex(str(node["pattern"])), rng)
    lo = int(node.get("minLength", 1))
    hi = int(node.get("maxLength", max(lo, 24)))
    out = ""
    while len(out) < lo or (len(out) < hi and rng.random() < 0.7):
        word = rng.choice(tokenizer.WORDS)
        out = f"{out} {word}" if out else word
    out = out[:hi]
    return out + "x" * (lo - len(out))


def _integer(root: dict[str, Any], node: dict[str, Any], rng: random.Random, depth: int) -> Any:
    lo = int(node.get("minimum", node.get("exclusiveMinimum", -1) + 1))
    hi = int(node.get("maximum", node.get("exclusiveMaximum", lo + 1001) - 1))
    return rng.randint(lo, max(lo, hi))


def _number(root: dict[str, Any], node: dict[str, Any], rng: random.Random, depth: int) -> Any:
    lo = float(node.get("minimum", 0.0))
    hi = float(node.get("maximum", lo + 100.0))
    return round(rng.uniform(lo, hi), 2) if hi > lo else lo


_TYPED = {
    "object": _object, "array": _array, "string": _string, "integer": _integer, "number": _number,
    "boolean": lambda _r, _n, rng, _d: rng.random() < 0.5, "null": lambda *_: None,
}


# ------------------------------------------------------------------ regex
def _parse_regex(pattern: str) -> Any:
    try:
        return sre_parse.parse(pattern)
    except re.error as exc:
        raise GrammarError(_xg("regex_converter.cc:83",
                               f"Regex parsing error at position {exc.pos}: {exc.msg}")) from None


_CATEGORY = {sre_c.CATEGORY_DIGIT: string.digits, sre_c.CATEGORY_WORD: string.ascii_letters + "_",
             sre_c.CATEGORY_SPACE: " "}
_PRINTABLE = string.ascii_letters + string.digits + " "


def _in_choice(items: list[Any], rng: random.Random) -> str:
    pool: list[str] = []
    negate = False
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            pool.append(chr(av))
        elif op is sre_c.RANGE:
            pool.extend(chr(c) for c in range(av[0], min(av[1], av[0] + 200) + 1))
        elif op is sre_c.CATEGORY:
            pool.extend(_CATEGORY.get(av, "a"))
    if negate:
        pool = [c for c in _PRINTABLE if c not in pool]
    return rng.choice(pool or ["a"])


def _regex_text(parsed: Any, rng: random.Random) -> str:
    out: list[str] = []
    for op, av in parsed:
        if op is sre_c.LITERAL:
            out.append(chr(av))
        elif op is sre_c.NOT_LITERAL:
            out.append(next(c for c in _PRINTABLE if ord(c) != av))
        elif op is sre_c.ANY:
            out.append(rng.choice(string.ascii_lowercase))
        elif op is sre_c.IN:
            out.append(_in_choice(av, rng))
        elif op is sre_c.BRANCH:
            out.append(_regex_text(rng.choice(av[1]), rng))
        elif op is sre_c.SUBPATTERN:
            out.append(_regex_text(av[-1], rng))
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
            lo, hi, sub = av
            hi = lo + MAX_REPEAT_EXTRA if hi is sre_c.MAXREPEAT else hi
            out.extend(_regex_text(sub, rng) for _ in range(rng.randint(lo, max(lo, hi))))
    return "".join(out)


# ------------------------------------------------------------------ EBNF (GBNF subset)
_EBNF_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(\[(?:[^\]\\]|\\.)*\])|([A-Za-z_][\w-]*)|(::=|[()|*+?]))')


def _parse_ebnf(text: str) -> dict[str, list[list[Any]]]:
    rules: dict[str, list[list[Any]]] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, body = line.partition("::=")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w-]*", name.strip()):
            raise GrammarError(_xg("grammar_parser.cc:820",
                                   f"EBNF parser error at line {lineno}, column 1: Expect rule name"))
        rules[name.strip()] = _ebnf_alts(body, lineno)
    if "root" not in rules:
        raise GrammarError(_xg("grammar_parser.cc:820", 'EBNF parser error: The root rule with name "root" is not found'))
    for alts in rules.values():
        for ref in _refs(alts):
            if ref not in rules:
                raise GrammarError(_xg("grammar_parser.cc:820", f'EBNF parser error: Rule "{ref}" is not defined'))
    return rules


def _ebnf_alts(body: str, lineno: int) -> list[list[Any]]:
    tokens: list[str] = []
    pos = 0
    while pos < len(body.rstrip()):
        m = _EBNF_TOKEN.match(body, pos)
        if not m:
            raise GrammarError(_xg("grammar_parser.cc:820",
                                   f"EBNF parser error at line {lineno}, column {pos + 1}: Unexpected character"))
        tokens.append(m.group(0).strip())
        pos = m.end()
    alts, rest = _seq_alts(tokens, 0)
    if rest != len(tokens):
        raise GrammarError(_xg("grammar_parser.cc:820", f"EBNF parser error at line {lineno}: Unbalanced parenthesis"))
    return alts


def _seq_alts(tokens: list[str], i: int) -> tuple[list[list[Any]], int]:
    alts: list[list[Any]] = [[]]
    while i < len(tokens) and tokens[i] != ")":
        tok = tokens[i]
        i += 1
        if tok == "|":
            alts.append([])
            continue
        item: Any
        if tok == "(":
            sub, i = _seq_alts(tokens, i)
            i += 1  # ")"
            item = ("group", sub)
        elif tok in ("*", "+", "?"):
            if not alts[-1]:
                raise GrammarError(_xg("grammar_parser.cc:820", "EBNF parser error: Expect element"))
            alts[-1][-1] = ("repeat", tok, alts[-1][-1])
            continue
        elif tok.startswith('"'):
            item = ("lit", json.loads(tok))
        elif tok.startswith("["):
            item = ("class", tok)
        else:
            item = ("ref", tok)
        alts[-1].append(item)
    return alts, i


def _refs(alts: list[list[Any]]) -> list[str]:
    out: list[str] = []
    for seq in alts:
        for item in seq:
            while item[0] == "repeat":
                item = item[2]
            if item[0] == "ref":
                out.append(item[1])
            elif item[0] == "group":
                out.extend(_refs(item[1]))
    return out


def _ebnf_text(rules: dict[str, list[list[Any]]], name: str, rng: random.Random, depth: int) -> str:
    return _alts_text(rules, rules[name], rng, depth)


def _alts_text(rules: dict[str, list[list[Any]]], alts: list[list[Any]], rng: random.Random,
               depth: int) -> str:
    seq = alts[0] if depth > 20 else rng.choice(alts)
    return "".join(_item_text(rules, item, rng, depth + 1) for item in seq)


def _item_text(rules: dict[str, list[list[Any]]], item: Any, rng: random.Random, depth: int) -> str:
    kind = item[0]
    if kind == "lit":
        return str(item[1])
    if kind == "class":
        return _regex_text(_parse_regex(item[1]), rng)
    if kind == "ref":
        return _ebnf_text(rules, item[1], rng, depth)
    if kind == "group":
        return _alts_text(rules, item[1], rng, depth)
    lo, hi = {"*": (0, MAX_REPEAT_EXTRA), "+": (1, MAX_REPEAT_EXTRA), "?": (0, 1)}[item[1]]
    return "".join(_item_text(rules, item[2], rng, depth) for _ in range(rng.randint(lo, hi)))


class GrammarCache:
    """Compiled grammars and compile failures by key, like the backend's cache; `pending` holds
    the compile in flight so concurrent first users wait for the same one."""

    def __init__(self) -> None:
        self.done: dict[tuple[str, str], Grammar | GrammarError] = {}
        self.pending: dict[tuple[str, str], Any] = {}
