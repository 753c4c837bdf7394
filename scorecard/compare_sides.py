"""What each side of a comparison ran and produced: the settings that differ between the cards'
launches (flags and env, or each side's whole command line between engines) and how many of a
candidate run's outputs matched the baseline run's (its probe's output check). Pure."""

from __future__ import annotations

import json
from typing import Any

from collectors.engines import DEFAULT_ENGINE, display_name
from scorecard.model import ENGINE_VERSION_FIELD, Scorecard


def _flat(prefix: str, d: dict[str, Any] | None) -> dict[str, str]:
    return {f"{prefix}{k}": json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
            for k, v in (d or {}).items()}


def engine_of(card: Scorecard) -> str:
    """The engine of the card's server (the subject's, else the card's own label; an old card: the default)."""
    if card.subject.get("engine"):
        return str(card.subject["engine"])
    if card.subject.get("no_server"):  # `pitwall probe --url`: nothing says which engine answered
        return "unknown"
    return str(card.engine or DEFAULT_ENGINE)


def config_of(card: Scorecard, *, argv: bool = False) -> dict[str, str]:
    """Flags (server args, else argv; argv alone with `argv`) and env of a scorecard's launch,
    flattened to strings."""
    prov = card.provenance
    out = {"profile": str(card.subject.get("profile_name") or "—"),
           "engine": display_name(engine_of(card)),
           # the schema's field keeps its first engine's name (ENGINE_VERSION_FIELD); a row says what it is
           "engine version": str(prov.get(ENGINE_VERSION_FIELD) or "unknown")}
    if prov.get("server_args") and not argv:
        out.update(_flat("flag.", prov["server_args"]))
    elif prov.get("argv"):
        out["argv"] = " ".join(prov["argv"])
    out.update(_flat("env.", prov.get("env")))
    return out


def config_diff(cards: list[Scorecard]) -> list[dict[str, Any]]:
    """The settings that differ between the cards' launches. Servers of different engines name
    their arguments in different vocabularies (hundreds of server args that have no counterpart),
    so between engines each side's command line is shown whole instead of arg by arg."""
    engines = {engine_of(c) for c in cards}
    configs = [config_of(c, argv=len(engines) > 1) for c in cards]
    keys = sorted(set().union(*configs))
    rows = []
    for k in keys:
        vals = [c.get(k) for c in configs]
        if len(set(vals)) > 1:
            rows.append({"key": k, "values": ["(unset)" if v is None else v for v in vals]})
    return rows


def output_sentence(card: Scorecard, base: Scorecard) -> str:
    """How many of `card`'s outputs matched `base`'s run (its probe's consistency check), in words;
    "" when its run was not checked against that run."""
    check = card.provenance.get("output_check") or {}
    if not check or check.get("baseline_run_id") != base.subject.get("run_id") or base.subject.get("run_id") is None:
        return ""
    if check.get("error"):
        return f"Outputs not checked: {check['error']}."
    n, diff = int(check.get("compared") or 0), int(check.get("differing") or 0)
    if n == 0:
        return ("Outputs not compared: no successful request of this run answered a prompt the "
                "baseline run answered.")
    pn, pdiff = int(check.get("prompts_compared") or 0), int(check.get("prompts_differing") or 0)
    text = (f"Outputs: {n - diff} of {n} requests gave the baseline run's output for the same prompt "
            f"({pn - pdiff} of {pn} prompts alike)")
    warnings = check.get("warnings") or []
    return text + (f"; but {'; '.join(warnings)}, so a difference may not mean anything." if warnings else ".")
