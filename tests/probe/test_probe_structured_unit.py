"""The structured-output check and the simulator's grammars, as pure functions."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest

from collectors.probe import structured
from collectors.probe.sse import ServerStreamError, StreamParser
from simulator import grammar, tokenizer


@pytest.mark.parametrize(("text", "finish", "failure"), [
    ('{"a": 1}', "stop", None),
    ('{"a": "x"}', "stop", "schema_mismatch"),
    ('{"a": ', "stop", "invalid_json"),
    ('{"a": ', "length", "truncated"),
])
def test_check_json(text: str, finish: str, failure: str | None) -> None:
    spec = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    assert structured.check("json-schema", spec, text, finish) == {"valid": failure is None, "failure": failure}


def test_check_regex_is_a_full_match() -> None:
    assert structured.check("regex", "ab+", "abbb", "stop")["valid"] is True
    assert structured.check("regex", "ab+", "abbbc", "stop")["failure"] == "regex_mismatch"


def test_generate_abort_chunk_is_a_client_error() -> None:
    p = StreamParser("generate")
    chunk = {"text": "", "meta_info": {"finish_reason": {
        "type": "abort", "message": "Failed to compile json grammar: x", "status_code": 400}}}
    with pytest.raises(ServerStreamError) as exc:
        p.feed_obj(chunk)
    assert exc.value.kind == "http_400"


@pytest.mark.parametrize("seed", range(20))
def test_simulator_outputs_follow_the_grammar(seed: int) -> None:
    rng = random.Random(seed)
    spec = structured.load_spec("json-schema")
    doc = grammar.Grammar(("json", spec)).sample(rng)
    jsonschema.validate(json.loads(doc), structured.DEFAULT_SCHEMA)
    assert tokenizer.decode(tokenizer.encode_output(doc)) == doc
    pat = r"(yes|no), confidence [1-9][0-9]?%|[A-Z]{2}\d{3}"
    assert re.fullmatch(pat, grammar.Grammar(("regex", pat)).sample(rng))
    sentence = grammar.Grammar(("ebnf", structured.DEFAULT_EBNF)).sample(rng)
    assert re.fullmatch(r"answer: (yes|no), because [a-z ]+\.", sentence)


@pytest.mark.parametrize(("key", "needle"), [
    (("json", '{"type": "strin"}'), 'Unsupported type "strin"'),
    (("json", "{not json"), "Expecting property name"),
    (("json", '{"type": "array", "uniqueItems": true}'), "JSON Schema at # is not supported by xgrammar"),
    (("regex", "(abc"), "Regex parsing error at position"),
    (("ebnf", "root ::= foo"), 'Rule "foo" is not defined'),
])
def test_simulator_refuses_like_xgrammar(key: tuple[str, str], needle: str) -> None:
    with pytest.raises(grammar.GrammarError) as exc:
        grammar.Grammar(key)
    assert str(exc.value).startswith(f"Failed to compile {key[0]} grammar: ") and needle in str(exc.value)
