"""The metric drift guard: what a server's `/metrics` exported, launch by launch, and what changed.

Per server the /metrics collector keeps a catalogue of the SGLang families it saw (name as
exported, type, label names) in its state (`sglang_metrics:<server_id>:catalog`), one for the
current epoch and one for the epoch before. An epoch is a launch (the managed server's Launch
row); a watched server, which has none, starts a new epoch when its counters go back to zero (a
restart, which is how an upgrade arrives). Families of every other exporter (`python_*`,
`process_*`) are not catalogued.

SGLang creates most families lazily: under its multiprocess registry a histogram appears with its
first observation, a counter of aborts with the first abort. So a family is judged only when the
two epochs are comparable:
- **vanished**: the previous epoch exported it by SETTLE_S after its first traffic, and the new
  epoch, SETTLE_S after its own first traffic, does not. A family that first appeared later in the
  previous epoch (after an abort, a retraction, an error) is never called vanished: the new epoch
  may simply not have met that case yet.
- **type changed** (a gauge that became a histogram) or **lost a label** (label names the
  previous epoch's family had and the new one's lacks), whenever the family appears.
"Traffic" is a positive `prompt_tokens` or `diffusion_requests` counter (the server served a
request). A scrape that a parse bound cut short (ParseLimits) or that had malformed lines is not
judged (a skipped family is not a vanished one).

Each change names the Pitwall keys the family feeds (collectors/sglang/metrics_alias.py) and,
when another family exported now feeds the same keys (a rename the alias table knows), that one:
the figures go on. The collector turns one judgement into ONE `metric_drift` event per epoch,
naming the families and what in Pitwall depended on them (the scorecard figures, charts and
alert rules a `dependents` function resolves, injected by the runner's assembly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from collectors.promscrape import MAX_REPORTED as MAX_REPORTED
from collectors.promscrape import SETTLE_S
from collectors.promtext import ParsedMetrics
from collectors.sglang.metrics_alias import ALIASES, PREFIXES, ROUTER_PREFIXES, pitwall_keys
from storage import series_keys as sk

MAX_FAMILIES = 2000  # families catalogued an epoch; a server past it is judged no further
TRAFFIC = ("prompt_tokens", "diffusion_requests")  # counter base names: a request was served
ROUTER_TRAFFIC = ("smg_router_requests", "sgl_router_requests")  # ... a router routed one


@dataclass(frozen=True)
class Drift:
    """One family that changed between two epochs."""

    family: str  # as exported, `sglang:...` (the counter's name without `_total`)
    change: str  # vanished | type | labels
    before: str  # the previous type, or its label names
    after: str  # the new type, or the label names left ("" when vanished)
    keys: tuple[str, ...]  # the Pitwall `metrics.*` keys it fed
    served_by: str | None  # a family exported now that feeds the same keys (a known rename)

    def sentence(self) -> str:
        if self.change == "vanished":
            what = f"{self.family} is no longer exported"
        elif self.change == "type":
            what = f"{self.family} changed type from {self.before} to {self.after}"
        else:
            what = f"{self.family} lost the label(s) {self.before}"
        if self.served_by:
            return f"{what}; Pitwall now reads {self.served_by} for the same figures (a rename it knows)"
        return what


def base_name(family: str) -> str | None:
    """`sglang:inter_token_latency_seconds` -> `inter_token_latency_seconds`; None for a family of
    another exporter."""
    for prefix in PREFIXES:
        if family.startswith(prefix):
            return family[len(prefix):].removesuffix("_total")
    if family.startswith(ROUTER_PREFIXES):  # the router's aliases name its families whole
        return family.removesuffix("_total")
    return None


def families_of(parsed: ParsedMetrics) -> dict[str, tuple[str, tuple[str, ...], bool]]:
    """SGLang family name -> (type, label names over all its series (`le`/`quantile` aside),
    whether it had a series: a family declared with no sample says nothing of its labels)."""
    labels: dict[str, set[str]] = {name: set() for name in parsed.families if base_name(name)}
    sampled: set[str] = set()
    for s in parsed.samples:
        if s.family in labels:
            sampled.add(s.family)
            labels[s.family].update(k for k in s.labels if k not in ("le", "quantile"))
    return {name: (parsed.families[name], tuple(sorted(names)), name in sampled) for name, names in labels.items()}


def served(parsed: ParsedMetrics) -> float | None:
    """The request-counting counters summed (warm-up included: it is a request); None when the
    scrape has no finite one (a hostile or broken server's NaN is no count: the state stays JSON)."""
    wanted = {f"{p}{b}" for p in PREFIXES for b in TRAFFIC} | set(ROUTER_TRAFFIC)
    values = [s.value for s in parsed.samples if s.family in wanted and math.isfinite(s.value)]
    return sum(v for v in values if v > 0) if values else None


def keys_of(family: str) -> tuple[str, ...]:
    """The Pitwall keys a family feeds, through the alias table."""
    base = base_name(family)
    out: list[str] = []
    for alias in ALIASES:
        if base in alias.names:
            out.extend(pitwall_keys(alias) or [f"{sk.metrics_key(alias.key)}.<{alias.split}>"])
    return tuple(out)


def _serving(keys: tuple[str, ...], now: dict[str, Any]) -> str | None:
    """The families exported now that feed every one of `keys` (a rename the alias table knows),
    or None when some key is left without input."""
    if not keys:
        return None
    names, covered = [], set()
    for name in sorted(now):
        fed = set(keys) & set(keys_of(name))
        if fed:
            names.append(name)
            covered |= fed
    return ", ".join(names) if covered >= set(keys) else None


def _new_epoch(epoch: Any, *, mid_life: bool = False) -> dict[str, Any]:
    """An epoch's entry: {"epoch", "traffic_at": ts of its first traffic or None, "served": the
    traffic counters' last sum, "judged", "mid_life": Pitwall met the server already serving (its
    steady families are not known), "overflow": it exported more than MAX_FAMILIES families,
    "families": {name: [type, [labels], first seen ts, labels known]}}."""
    return {"epoch": epoch, "traffic_at": None, "served": 0.0, "judged": False, "mid_life": mid_life,
            "overflow": False, "families": {}}


def _judgeable(ep: dict[str, Any] | None) -> bool:
    return ep is not None and ep.get("traffic_at") is not None and not ep.get("mid_life") and not ep.get("overflow")


def step(state: dict[str, Any] | None, epoch: Any, parsed: ParsedMetrics,
         ts: float, *, settle_s: float = SETTLE_S) -> tuple[dict[str, Any], list[Drift]]:
    """One scrape into the catalogue state: (new state, the drift this scrape judged). Pure.

    `epoch` is the launch id; None for a watched server, whose epoch ends when its traffic
    counters go back down (it restarted), judged on clean scrapes only. An epoch that served no
    request never replaces the one before it (nothing to compare)."""
    state = dict(state or {})
    clean = not parsed.errors and not parsed.limits
    total = served(parsed)
    cur = state.get("current")
    if cur is None:  # Pitwall meets this server; a watched one that served already is met mid-life
        # (its families' start is unknown); a managed one is met at its launch (the runner scrapes
        # it from ready, after SGLang's own warm-up request)
        cur = _new_epoch(epoch, mid_life=epoch is None and bool(total))
    restarted = epoch is None and clean and total is not None and total < float(cur.get("served") or 0.0)
    if cur.get("epoch") != epoch or restarted:
        if cur["families"] and cur.get("traffic_at") is not None:
            state["previous"] = cur
        cur = _new_epoch(epoch)
    cur = {**cur, "families": dict(cur["families"])}
    if epoch is None and clean and total is not None:  # only a watched server's restart reads it: a
        cur["served"] = total  # managed server's state then changes only when its families do
    seen = families_of(parsed)
    drift: list[Drift] = []
    prev = state.get("previous")
    old = (prev or {}).get("families", {})
    for name, (typ, labels, sampled) in seen.items():
        had = cur["families"].get(name)
        if had is None and len(cur["families"]) >= MAX_FAMILIES:
            cur["overflow"] = True  # a server that invents family names: catalogued no further
            continue
        known = had is not None and had[3]
        if had is None or (clean and sampled and not known):
            cur["families"][name] = [typ, list(labels) if sampled else [], had[2] if had else ts, sampled]
        if clean and name in old and not cur.get("overflow"):
            if had is None:  # its type, as soon as it shows
                drift.extend(_changed(name, old[name], typ, labels if sampled else None))
            elif sampled and not known:  # its labels, once it has a series
                drift.extend(_changed(name, old[name], typ, labels, labels_only=True))
    if cur["traffic_at"] is None and total:
        cur["traffic_at"] = ts
    if (clean and prev and not cur["judged"] and _judgeable(prev) and not cur.get("overflow")
            and cur["traffic_at"] is not None and ts - cur["traffic_at"] >= settle_s):
        cur["judged"] = True
        settled = prev["traffic_at"] + settle_s
        for name, entry in sorted(old.items()):
            if name not in seen and entry[2] <= settled:
                keys = keys_of(name)
                drift.append(Drift(name, "vanished", entry[0], "", keys, _serving(keys, seen)))
    state["current"] = cur
    return state, drift


def _changed(name: str, old: list[Any], typ: str, labels: tuple[str, ...] | None,
             *, labels_only: bool = False) -> list[Drift]:
    """A family's type change (when it first shows) or lost labels (once it has a series; None:
    not known yet). The old entry's labels count only where they were known."""
    keys = keys_of(name)
    if old[0] != typ and not labels_only:
        return [Drift(name, "type", old[0], typ, keys, None)]
    lost = sorted(set(old[1]) - set(labels)) if labels is not None and old[3] else []
    if lost:
        return [Drift(name, "labels", ", ".join(lost), ", ".join(labels or ()), keys, None)]
    return []
