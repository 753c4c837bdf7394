"""The engine version in a scorecard: the published schema's field, labelled by the server's engine."""

from __future__ import annotations

import toy_engine

from collectors.engines import ENGINES
from export.rows import provenance_rows
from scorecard.model import ENGINE_VERSION_FIELD, Scorecard


def test_the_version_field_is_the_published_schemas() -> None:
    assert ENGINE_VERSION_FIELD == "sglang_version"  # scorecard.schema.json v1: every engine's version


def test_the_version_is_labelled_by_the_cards_engine(monkeypatch) -> None:
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)
    prov = {ENGINE_VERSION_FIELD: "9.9", "pitwall_version": "1"}
    toy = Scorecard(subject={}, provenance=prov, figures={}, dimensions={}, engine="toy")
    assert ("Toy version", "9.9") in provenance_rows(toy)
    assert ("SGLang version", "9.9") in provenance_rows(Scorecard(subject={}, provenance=prov, figures={},
                                                                  dimensions={}))

