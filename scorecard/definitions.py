"""Figures whose definition depends on the engine (collectors/base.py Engine.definitions): the
scorecard says the definition next to such a figure, and Compare sets two cards' figures against
each other only when their engines define it alike."""

from __future__ import annotations

from collectors.engines import ENGINES
from scorecard.compare_sides import engine_of
from scorecard.model import Scorecard


def definition(card: Scorecard, key: str) -> str | None:
    """How the engine of `card`'s server defines figure `key`, where it is engine-specific."""
    eng = ENGINES.get(engine_of(card))
    return None if eng is None else eng.definitions.get(key)


def label(card: Scorecard) -> None:
    """Append each engine-specific definition to its figure's note (in place), after what the
    note already says (its first part names the series, which Compare reads)."""
    for key, fig in card.figures.items():
        text = definition(card, key)
        if text and fig.value is not None and text not in fig.note:
            fig.note = f"{fig.note}; {text}" if fig.note else f"; {text}"


def defined_apart(a: Scorecard, b: Scorecard, key: str) -> bool:
    """True when the two cards' engines differ and define figure `key` differently."""
    if engine_of(a) == engine_of(b):
        return False
    da, db = definition(a, key), definition(b, key)
    return (da is not None or db is not None) and da != db
