"""Stand-in tokenizer: length ~ text length, shared prefixes share ids, seeded generation."""

from __future__ import annotations

from simulator import tokenizer


def test_length_tracks_text_and_prefixes_share_ids() -> None:
    a = tokenizer.encode("You are a helpful assistant. Question one?")
    b = tokenizer.encode("You are a helpful assistant. Question two?")
    # " helpful" is 8 chars -> " hel" + "pful"; roughly len(text) / 4 tokens overall.
    assert 8 <= len(a) <= 16
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert common >= 8
    assert tokenizer.encode("") == [1]


def test_generation_is_reproducible_per_seed() -> None:
    ids = tokenizer.encode("hello")

    def run(server_seed: int, req_seed: int | None) -> list[int]:
        g = tokenizer.Generator(server_seed, req_seed, ids)
        return [g.next_id() for _ in range(20)]

    assert run(0, None) == run(0, None)
    assert run(0, None) != run(1, None)
    assert run(0, 5) != run(0, None)
    text = tokenizer.decode(run(0, None))
    assert len(text.split()) == 20 and text.startswith(" ")
