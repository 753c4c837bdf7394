"""A server's scorecard grades over the last FIGURE_WINDOW_S: what the Overview's cards and
Pitwall's own `/metrics` (runner/own_metrics.py, injected by cli/wiring.py) show.

`server_grades(engine, server, now, settings, figures=...)` builds the server's scorecard over
the window (scorecard/build.py) and returns ServerGrades: per dimension `pass`, `warn`, `fail`
or `none` ("no grade yet"), why, the values (base units, METRIC_SPECS) and sources (probe,
canary, server…) of the figure keys asked for, and the dimensions with no target set ("no
target set", not "no grade yet"). A scorecard that cannot be built (a bad `[slo]` table, a
scorecard bug) reads "none" everywhere with the reason; it never raises, so neither the
Overview nor the exporter breaks on one server.

Cross-check a grade with `pitwall export --server NAME --since 15m --format md`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy.engine import Engine

from scorecard.build import build_scorecard
from scorecard.metric_specs import DIMENSIONS
from storage.models import Server

#: the window (seconds) the Overview's figures and grades cover
FIGURE_WINDOW_S = 15 * 60
log = logging.getLogger("pitwall.overview")


class ServerGrades(NamedTuple):
    grades: dict[str, str]  # dimension -> pass | warn | fail | none
    reasons: dict[str, str]  # dimension -> why (up to four reasons)
    figures: dict[str, float | None]  # figure key -> value, base units
    sources: dict[str, str]  # figure key -> its source (probe, canary, server…)
    no_target: tuple[str, ...]  # dimensions with no target set


def server_grades(engine: Engine, server: Server, now: float, settings: Any = None,
                  figures: Sequence[str] = ()) -> ServerGrades:
    """The grades of `server`'s scorecard over the last FIGURE_WINDOW_S before `now` (epoch s),
    with the `figures` keys' values and sources (module docstring)."""
    unset: list[str] = []
    out = {d: "none" for d in DIMENSIONS}
    why: dict[str, str] = {}
    figs: dict[str, float | None] = {}
    sources: dict[str, str] = {}
    try:
        card = build_scorecard(
            engine,
            server=server.name,
            since_s=FIGURE_WINDOW_S,
            settings_slo=getattr(settings, "slo", None),
            electricity_usd_per_kwh=getattr(settings, "electricity_usd_per_kwh", None),
            now=now,
        )
    except Exception as exc:  # a scorecard bug or a bad [slo] table must not blank the Overview
        log.warning("scorecard for %s failed: %s", server.name, exc)
        why = {d: f"no scorecard: {exc}" for d in DIMENSIONS}
        return ServerGrades(out, why, figs, sources, tuple(unset))
    for d in DIMENSIONS:
        dim = card.dimensions.get(d)
        if dim is not None:
            out[d] = dim.grade or "none"
            if dim.no_target and out[d] == "none":
                unset.append(d)
            if dim.reasons:
                why[d] = "; ".join(dim.reasons[:4])
    for key in figures:
        figs[key] = card.value(key)
        fig = card.figures.get(key)
        if fig is not None and fig.source:
            sources[key] = fig.source
    return ServerGrades(out, why, figs, sources, tuple(unset))


def grades_only(engine: Engine, server: Server, now: float, settings: Any = None) -> dict[str, str]:
    """{dimension: pass|warn|fail|none} of the server (runner/own_metrics.py's `Grades`)."""
    return server_grades(engine, server, now, settings).grades
