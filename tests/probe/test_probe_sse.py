"""Pure SSE parsing of SGLang /generate and OpenAI streams (collectors/probe/sse.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.probe.sse import (
    InvalidResponse,
    ServerStreamError,
    StreamParser,
    hash_output,
    parse_image_response,
)


def _line(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n"


def test_generate_cumulative_text_counts_tokens_from_meta_info() -> None:
    p = StreamParser("generate")
    # chunk 1: 1 token; chunk 2: cumulative count 1 -> 4, i.e. one chunk carrying 3 tokens
    assert p.feed(_line({"text": "Hi", "meta_info": {"prompt_tokens": 7, "completion_tokens": 1, "cached_tokens": 5}})) == 1
    assert p.feed(b"\n") == 0
    assert p.feed(_line({"text": "Hi there you", "meta_info": {"prompt_tokens": 7, "completion_tokens": 4, "cached_tokens": 5}})) == 3
    assert p.feed(b"data: [DONE]\n") == 0
    assert p.done and p.output_text() == "Hi there you"
    assert (p.tokens_in, p.tokens_out, p.tokens_cached) == (7, 4, 5)
    assert p.output_hash() == hash_output("Hi there you")


def test_generate_incremental_text_is_appended() -> None:
    p = StreamParser("generate")
    p.feed(_line({"text": "ab", "meta_info": {"completion_tokens": 1}}))
    p.feed(_line({"text": "cd", "meta_info": {"completion_tokens": 2}}))  # not an extension of "ab"
    assert p.output_text() == "abcd"


def test_chat_reasoning_channel_counts_as_first_token() -> None:
    p = StreamParser("chat")
    assert p.feed(_line({"choices": [{"delta": {"role": "assistant"}}]})) == 0
    assert not p.visible
    assert p.feed(_line({"choices": [{"delta": {"reasoning_content": "think"}}]})) == 1
    assert p.visible
    assert p.feed(_line({"choices": [{"delta": {"content": "answer"}}]})) == 1
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 8}}
    assert p.feed(_line({"choices": [], "usage": usage})) == 0
    assert (p.tokens_in, p.tokens_out, p.tokens_cached) == (9, 2, 8)
    assert p.output_text() == "answer"
    assert p.output_hash() != hash_output("answer")  # reasoning is part of the hash


def test_completions_continuous_usage_counts_several_tokens() -> None:
    p = StreamParser("completions")
    assert p.feed(_line({"choices": [{"text": "a"}], "usage": {"completion_tokens": 1}})) == 1
    assert p.feed(_line({"choices": [{"text": "bcd"}], "usage": {"completion_tokens": 4}})) == 3


@pytest.mark.parametrize("line", [b"data: {not json\n", b"data: [1, 2]\n", b'data: {"text": "x"}\n'])
def test_invalid_chunks_raise(line: bytes) -> None:
    with pytest.raises(InvalidResponse):
        StreamParser("generate").feed(line)


def test_error_object_in_stream() -> None:
    with pytest.raises(ServerStreamError) as exc:
        StreamParser("chat").feed(_line({"error": {"message": "boom", "code": 503}}))
    assert exc.value.kind == "http_503"
    with pytest.raises(ServerStreamError) as exc2:
        StreamParser("generate").feed(_line({"error": "aborted"}))
    assert exc2.value.kind == "server_error"


def test_image_response() -> None:
    n, h = parse_image_response({"data": [{"b64_json": "AAA"}, {"b64_json": "BBB"}]})
    assert n == 2 and h == hash_output("AAA\nBBB")
    with pytest.raises(InvalidResponse):
        parse_image_response({"data": []})


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize(
    ("api", "tokens_in", "tokens_out", "cached", "text", "token_chunks"),
    [
        # /generate: the first chunk carries 1 token with empty text (a held-back partial
        # character), then one token per chunk; counts from meta_info (6 out, 4 in, 3 cached)
        ("generate", 4, 6, 3, "\ufffdZJZJZ", [1, 1, 1, 1, 1, 1]),
        # chat: role chunk with content "" and reasoning_content null is not a token; 5 content
        # chunks; usage chunk: 16 prompt, 5 completion, 1 cached (--enable-cache-report)
        ("chat", 16, 5, 1, " c  c  c", [1, 1, 1, 1, 1]),
        # completions: first chunk text "" (not counted), 4 visible chunks, usage says 5 tokens
        ("completions", 4, 5, 3, "\ufffdZJZJ", [1, 1, 1, 1]),
    ],
)
def test_real_sglang_0523_streams(api: str, tokens_in: int, tokens_out: int, cached: int,
                                  text: str, token_chunks: list[int]) -> None:
    p = StreamParser(api)
    counts = []
    with open(FIXTURES / f"sglang-0.5.23-real-cpu-{api}-stream.sse", "rb") as fh:
        for line in fh:
            counts.append(p.feed(line))
    assert p.done and p.visible
    assert (p.tokens_in, p.tokens_out, p.tokens_cached) == (tokens_in, tokens_out, cached)
    assert p.output_text() == text
    assert [n for n in counts if n] == token_chunks


def test_generate_incremental_mode_from_output_ids() -> None:
    # incremental streaming: output_ids holds only the new ids, so a repeated token is appended
    p = StreamParser("generate")
    p.feed(_line({"text": " c", "output_ids": [5], "meta_info": {"completion_tokens": 1}}))
    p.feed(_line({"text": " c", "output_ids": [5], "meta_info": {"completion_tokens": 2}}))
    p.feed(_line({"text": " c", "output_ids": [5], "meta_info": {"completion_tokens": 3}}))
    assert p.output_text() == " c c c" and p.counted == 3


def test_an_incomplete_character_at_the_end_hashes_like_held_back_bytes() -> None:
    # the same greedy tokens ending inside a multi-byte character: vLLM holds the bytes back,
    # SGLang shows U+FFFD (measured on one model served by both)
    assert hash_output("ro\ufffd") == hash_output("ro") != hash_output("r\ufffdo")
    assert hash_output("\ufffd\ufffd") == hash_output("")
