"""The Scorecard value: plain dataclasses that serialise to the export JSON (schema version 1).

A Scorecard names what it scores (`subject`: server, launch, profile, probe run, window, headline
load level, latency source) and where its numbers come from (`provenance`: Pitwall and engine
versions, server args, GPU model and driver, workload fingerprint and spec, client self-check),
then holds one `Figure` per METRIC_SPECS key, the per-level table of the probe run, a grade per
dimension with the reasons, and small chart data (bucketed series, events) so an export can be
redrawn from the JSON alone. The JSON shape is scorecard.schema.json next to this file
(SCHEMA_PATH; shipped as package data).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from collectors.engines import DEFAULT_ENGINE
from present.format import launch_label
from scorecard.metric_specs import DIMENSIONS, METRIC_SPECS

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("scorecard.schema.json")


def _engine_version_field() -> str:
    """The provenance field holding the server's engine version, as the published schema names it:
    its one `*_version` property besides pitwall_version. Every engine's version goes there (the
    name predates the engine seam; the schema is published, so it stays)."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    names = [n for n in schema["$defs"]["scorecard"]["properties"]["provenance"]["properties"]
             if n.endswith("_version") and n != "pitwall_version"]
    if len(names) != 1:
        raise RuntimeError(f"{SCHEMA_PATH.name} should name one engine version field in provenance, not {names}; "
                           "restore the shipped schema.")
    return names[0]


#: provenance key of the engine's version ("unknown" when the server did not say)
ENGINE_VERSION_FIELD = _engine_version_field()

# Figure.status values
OK = "ok"
MISSING = "missing"  # the inputs are not there (no samples, no probes)
NOT_CONFIGURED = "not_configured"  # a price or target is not set: never shown as 0
NOT_APPLICABLE = "not_applicable"  # e.g. images/min on an LLM server


@dataclass
class Figure:
    key: str
    value: float | None = None
    status: str = MISSING
    source: str = ""  # probe | canary | server | events | gpu | config
    note: str = ""  # e.g. "canary only", "clamped at the last bucket", "not configured: ..."
    grade: str = "none"  # pass | warn | fail | none
    target: float | None = None
    warn: float | None = None
    flagged: bool = False  # a caveat the reader must see (clamped histogram, assumed GPU count)


@dataclass
class DimensionGrade:
    grade: str = "none"
    reasons: list[str] = field(default_factory=list)
    no_target: bool = False  # no figure of the dimension has a target: "no target set", not "no grade yet"


@dataclass
class Scorecard:
    subject: dict[str, Any]
    provenance: dict[str, Any]
    figures: dict[str, Figure]
    dimensions: dict[str, DimensionGrade]
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    levels: list[dict[str, Any]] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)  # {metric, ts, value}
    events: list[dict[str, Any]] = field(default_factory=list)  # {ts, kind, severity, message}
    notes: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    #: the server's engine (collectors/engines.py), for labels; not exported (schema v1 has no
    #: field for it), so a scorecard read back from JSON names the default engine
    engine: str = DEFAULT_ENGINE

    @property
    def title(self) -> str:
        s = self.subject
        parts = [s.get("server") or "?"]
        if s.get("profile_name"):
            parts.append(f"profile {s['profile_name']}")
        if s.get("launch_id") is not None:
            parts.append(launch_label(None, s.get("launch_number")))
        if s.get("run_id") is not None:
            parts.append(f"run #{s['run_id']}")
        return " · ".join(parts)

    def value(self, key: str) -> float | None:
        fig = self.figures.get(key)
        return None if fig is None else fig.value

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["engine"]
        d["title"] = self.title
        # keep the figure order of METRIC_SPECS, so exports read in table order
        d["figures"] = [asdict(self.figures[s.key]) for s in METRIC_SPECS if s.key in self.figures]
        d["dimensions"] = {k: asdict(self.dimensions[k]) for k in DIMENSIONS}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scorecard:
        figures = {f["key"]: Figure(**f) for f in d["figures"]}
        dims = {k: DimensionGrade(**v) for k, v in d["dimensions"].items()}
        return cls(
            subject=d["subject"],
            provenance=d["provenance"],
            figures=figures,
            dimensions=dims,
            errors_by_kind=d.get("errors_by_kind", {}),
            levels=d.get("levels", []),
            series=d.get("series", []),
            events=d.get("events", []),
            notes=d.get("notes", []),
            schema_version=d.get("schema_version", SCHEMA_VERSION),
        )
