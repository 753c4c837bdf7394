"""Prompt sets and request bodies (collectors/probe/workloads.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.probe.workloads import (
    Prompt,
    WorkloadError,
    WorkloadSpec,
    build_prompts,
    parse_jsonl,
    prompts_hash,
    request_body,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_builtin_set_ships_and_is_stable() -> None:
    a, b = build_prompts(WorkloadSpec()), build_prompts(WorkloadSpec())
    assert len(a) == 24 and prompts_hash(a) == prompts_hash(b)


def test_synthetic_prompts_have_exact_word_count() -> None:
    ps = build_prompts(WorkloadSpec(prompt_set="synthetic", input_tokens=37, num_prompts=5, seed=3))
    assert [len(p.text.split()) for p in ps] == [37] * 5
    other = build_prompts(WorkloadSpec(prompt_set="synthetic", input_tokens=37, num_prompts=5, seed=4))
    assert prompts_hash(ps) != prompts_hash(other)


def test_shared_prefix_templates_times_suffixes() -> None:
    ps = build_prompts(WorkloadSpec(prompt_set="shared-prefix", prefix_templates=3,
                                    suffixes_per_template=4, prefix_tokens=20))
    assert len(ps) == 12  # 3 templates x 4 suffixes
    prefixes = {p.text.split("\n\n")[0] for p in ps}
    assert len(prefixes) == 3  # each template's 4 prompts share one prefix
    assert all(len(x.split()) == 22 for x in prefixes)  # "Template N." + 20 words


def test_jsonl_file_and_errors() -> None:
    ps = build_prompts(WorkloadSpec(prompt_set=str(FIXTURES / "prompts-small.jsonl")))
    assert [p.id for p in ps] == ["a", "b", "p2"]
    assert ps[1].messages is not None and ps[1].max_new_tokens == 4
    with pytest.raises(WorkloadError, match="line 2 is not JSON"):
        parse_jsonl('{"prompt": "x"}\n{oops\n')
    with pytest.raises(WorkloadError, match='no "prompt"'):
        parse_jsonl('{"id": 1}\n')
    with pytest.raises(WorkloadError, match="neither"):
        build_prompts(WorkloadSpec(prompt_set="no-such-set"))


def test_request_bodies() -> None:
    spec = WorkloadSpec(max_new_tokens=9, ignore_eos=True, temperature=0.0, top_k=5)
    path, body = request_body("generate", Prompt("x", "hello"), spec)
    assert path == "/generate" and body["stream"] is True
    assert body["sampling_params"] == {"temperature": 0.0, "top_k": 5, "max_new_tokens": 9, "ignore_eos": True}
    path, body = request_body("chat", Prompt("x", "hello"), spec)
    assert path == "/v1/chat/completions" and body["messages"] == [{"role": "user", "content": "hello"}]
    assert body["max_tokens"] == 9 and body["stream_options"] == {"include_usage": True}
    path, body = request_body("images", Prompt("x", "a cat"), WorkloadSpec(image_size="256x256", image_steps=4))
    assert path == "/v1/images/generations" and body["size"] == "256x256" and body["num_inference_steps"] == 4
    with pytest.raises(WorkloadError):
        request_body("embeddings", Prompt("x", "y"), spec)
