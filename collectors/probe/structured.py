"""Structured-output probes: the constraint a request carries and the check of each output.

`--structured json-schema|regex|ebnf` adds one constraint to every request, in the engine's forms
(OpenAI `response_format` and the engine's extensions of the OpenAI API; a native API places it
where its engine reads it: its NativeApi.build_body, collectors/native_api.py):

| API | json-schema | regex | ebnf |
|---|---|---|---|
| OpenAI (chat, completions) | `response_format` `{"type": "json_schema", "json_schema": {"name", "schema"}}` | top-level `regex` (the engine's extension of the OpenAI API) | top-level `ebnf` (likewise) |

Each finished output is checked: JSON parse plus `jsonschema` validation, or `re.fullmatch` of the
pattern. EBNF outputs are not checked (no EBNF matcher here): their verdict is `valid: None`.
A failed check is labelled `truncated` when the length limit cut the output (finish reason
`length`), else `invalid_json`, `schema_mismatch` or `regex_mismatch`.

A JSON schema gets a top-level `"$comment"` naming the run (`nonce`), so the server's grammar
cache (keyed by the exact schema string) has never seen it: the run's first request pays the
grammar compile, which the report shows as the cold-grammar TTFT.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from storage.errors import RequestError

KINDS = ("json-schema", "regex", "ebnf")
FAILURES = ("truncated", "invalid_json", "schema_mismatch", "regex_mismatch")
MAX_SPEC_BYTES = 256 * 1024

#: the bundled schema: a support-inbox extraction, the shape of real JSON-mode traffic
DEFAULT_SCHEMA: dict[str, Any] = {
    "title": "support_ticket",
    "type": "object",
    "properties": {
        "customer": {"type": "string", "maxLength": 40},
        "product": {"type": "string", "maxLength": 40},
        "intent": {"enum": ["purchase", "support", "refund", "cancel", "other"]},
        "urgency": {"type": "integer", "minimum": 1, "maximum": 5},
        "needs_human": {"type": "boolean"},
        "order_ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99999},
                      "maxItems": 3},
    },
    "required": ["customer", "product", "intent", "urgency", "needs_human", "order_ids"],
    "additionalProperties": False,
}
DEFAULT_PATTERN = r"(yes|no), confidence [1-9][0-9]?%"
DEFAULT_EBNF = 'root ::= "answer: " ("yes" | "no") ", because " [a-z ]+ "."'


class StructuredError(RequestError, ValueError):
    """A constraint that cannot be used; the message says what to fix."""


def load_spec(kind: str, *, schema_file: str | None = None, pattern: str | None = None) -> str:
    """The constraint text of `kind`: the schema file's JSON (checked against the JSON Schema
    meta-schema), the pattern (compiled by `re`), or the bundled default."""
    if kind not in KINDS:
        raise StructuredError(f"Unknown --structured {kind!r}; use one of {list(KINDS)}.")
    if kind == "json-schema":
        if pattern is not None:
            raise StructuredError("--pattern goes with --structured regex or ebnf; use --schema FILE here.")
        if schema_file is None:
            return json.dumps(DEFAULT_SCHEMA, sort_keys=True)
        return _schema_text(Path(schema_file))
    if schema_file is not None:
        raise StructuredError("--schema FILE goes with --structured json-schema; use --pattern here.")
    text = pattern if pattern is not None else (DEFAULT_PATTERN if kind == "regex" else DEFAULT_EBNF)
    if not text:
        raise StructuredError("--pattern is empty; give a regular expression or EBNF grammar.")
    if kind == "regex":
        try:
            re.compile(text)
        except re.error as exc:
            raise StructuredError(f"--pattern is not a valid regular expression ({exc}).") from None
    return text


def _schema_text(path: Path) -> str:
    try:
        raw = path.expanduser().read_bytes()[: MAX_SPEC_BYTES + 1]
    except OSError as exc:
        raise StructuredError(f"cannot read --schema {path} ({exc.strerror or exc}).") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise StructuredError(f"--schema {path} is over {MAX_SPEC_BYTES // 1024} KiB; use a smaller schema.")
    try:
        schema = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise StructuredError(f"--schema {path} is not JSON ({exc}); fix the file.") from None
    if not isinstance(schema, dict):
        raise StructuredError(f"--schema {path} must hold a JSON object (a JSON Schema).")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise StructuredError(f"--schema {path} is not a valid JSON Schema ({exc.message}).") from None
    return json.dumps(schema, sort_keys=True)


def spec_hash(kind: str | None, spec: str | None) -> str | None:
    """16-hex SHA-256 of the constraint (for the workload fingerprint)."""
    if not kind or spec is None:
        return None
    return hashlib.sha256(f"{kind}\n{spec}".encode()).hexdigest()[:16]


def wire_spec(kind: str, spec: str, nonce: str | None) -> str:
    """The constraint as sent: a JSON schema gains `"$comment": "pitwall <nonce>"` (see module)."""
    if kind != "json-schema" or not nonce:
        return spec
    return json.dumps({"$comment": f"pitwall {nonce}", **json.loads(spec)})


def openai_fields(kind: str, wire: str) -> dict[str, Any]:
    """The top-level body fields of the constraint in an OpenAI request (chat, completions); a
    native API places it itself (NativeApi.build_body)."""
    if kind == "json-schema":
        schema = json.loads(wire)
        name = str(schema.get("title") or "pitwall_probe")
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": schema}}}
    return {kind: wire}


@lru_cache(maxsize=8)
def _validator(spec: str) -> Any:
    schema = json.loads(spec)
    return jsonschema.validators.validator_for(schema)(schema)


@lru_cache(maxsize=8)
def _pattern(spec: str) -> re.Pattern[str]:
    return re.compile(spec)


def check(kind: str, spec: str, text: str, finish_reason: str | None) -> dict[str, Any]:
    """The verdict of one finished output: {"valid": bool | None, "failure": str | None}."""
    failure: str | None
    if kind == "ebnf":
        return {"valid": None, "failure": None}
    if kind == "regex":
        failure = None if _pattern(spec).fullmatch(text) else "regex_mismatch"
    else:
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            failure = "invalid_json"
        else:
            failure = None if _validator(spec).is_valid(doc) else "schema_mismatch"
    if failure is not None and finish_reason == "length":
        failure = "truncated"
    return {"valid": failure is None, "failure": failure}


def report(kind: str, spec: str, backend: str | None, levels: list[tuple[float, list[Any]]]
           ) -> dict[str, Any]:
    """The sweep report's `structured` block from each level's records (RequestRecord, whose
    `detail["structured"]` holds `check()`'s verdict).

    valid_rate = valid / finished (successful, measured) requests; None for unchecked EBNF.
    cold_ttft_s is the run's first request (a schema the server has not compiled: see the module
    docstring), warm_ttft_p50_s the first level's measured p50 without it."""
    measured = [r for _, recs in levels for r in recs if not r.warmup]
    finished = [r for r in measured if r.ok]
    verdicts = [(r.detail or {}).get("structured") or {} for r in finished]
    valid = sum(1 for v in verdicts if v.get("valid") is True)
    failures = {f: sum(1 for v in verdicts if v.get("failure") == f) for f in FAILURES}
    refused = [r for _, recs in levels for r in recs
               if (r.error_kind or "").startswith("http_4")]
    out: dict[str, Any] = {
        "kind": kind, "spec_hash": spec_hash(kind, spec), "grammar_backend": backend,
        "checked": kind != "ebnf", "finished": len(finished),
        "valid": valid if kind != "ebnf" else None,
        "valid_rate": valid / len(finished) if finished and kind != "ebnf" else None,
        "failures": failures if kind != "ebnf" else {},
        "by_level": [_level_validity(value, recs, kind) for value, recs in levels],
        "refused": ({"requests": len(refused), "error_kind": refused[0].error_kind,
                     "message": refused[0].error_detail} if refused else None),
    }
    out.update(_cold_grammar(levels))
    return out


def _level_validity(value: float, recs: list[Any], kind: str) -> dict[str, Any]:
    done = [r for r in recs if r.ok and not r.warmup]
    ok = sum(1 for r in done if ((r.detail or {}).get("structured") or {}).get("valid") is True)
    return {"level": value, "finished": len(done),
            "valid_rate": ok / len(done) if done and kind != "ebnf" else None}


def _cold_grammar(levels: list[tuple[float, list[Any]]]) -> dict[str, Any]:
    if not levels or not levels[0][1]:
        return {"cold_ttft_s": None, "warm_ttft_p50_s": None, "cold_extra_s": None}
    recs = sorted(levels[0][1], key=lambda r: r.seq)
    first = recs[0]
    cold = first.ttft_s if first.ok and first.seq == 0 else None
    warm = sorted(r.ttft_s for r in recs[1:] if r.ok and not r.warmup and r.ttft_s is not None)
    p50 = float(statistics.median(warm)) if warm else None
    return {"cold_ttft_s": cold, "warm_ttft_p50_s": p50,
            "cold_extra_s": cold - p50 if cold is not None and p50 is not None else None}
