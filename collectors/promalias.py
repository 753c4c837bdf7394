"""An engine's table of Prometheus names -> Pitwall `metrics.*` keys, and how series combine. Pure.

Each engine folder writes its own `AliasTable` (the names of every era of its `/metrics`, its rank
labels, its derived figures); the window arithmetic (collectors/promwindow.py) reads any table the
same way, so two engines' figures under one key are computed alike and differ only where the
engines define them differently (which the engine's table says in `Alias.meaning`).

Combining a figure's series (`agg`):

- `sum` (counts, token totals, counters, histogram buckets): series are grouped by every label
  except the table's replica labels (ranks of one model replica that report the same value: they
  would double-count); within a group the max is taken, and groups are summed.
- `mean` (0-1 ratios, per-batch averages): the mean over every series.

Per-rank detail keeps, for gauges, one value per rank when a rank label takes several values:
`metrics.num_running_reqs.dp1` (only the table's rank labels that vary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from storage import series_keys as sk

LabelKey = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Alias:
    """One Pitwall quantity: its key (a gauge/rate key, or a histogram stem) and source names."""

    key: str
    kind: str  # gauge | counter | histogram
    names: tuple[str, ...]  # base names without prefix (and without _total), newest era first
    agg: str = "sum"  # sum | mean
    meaning: str = ""
    exclude: tuple[tuple[str, str], ...] = ()  # (label, value) pairs whose series are dropped
    only: tuple[tuple[str, str], ...] = ()  # (label, value) pairs a series must carry to count
    split: str | None = None  # one set of keys (histograms) or one key (gauges) per label value
    unit: str = "_s"  # histograms: key unit suffix ("" for counts)
    scale: float = 1.0  # to base units: 1e-3 for a family in ms, 2**20 for MiB, 0.01 for percent
    router: bool = False  # a router family: its names are whole (no table prefix is put before them)


def _no_derived(values: dict[str, float], deltas: dict[str, float]) -> None:
    return None


def _one_group(key: str) -> str:
    return ""


_PARTS = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class AliasTable:
    """One engine's names and rules.

    prefixes: put before every alias name (the engine's `<engine>:`); replica_labels / rank_labels: see
    the module docstring (rank label -> detail-suffix letters, in suffix order); priority_gauges:
    a gauge family with a `priority=""` series beside others holds its total there and a
    per-priority breakdown beside it (split_priority); priority_breakdown: such a gauge -> the
    alias key its breakdown feeds; ratios: (output key, numerator alias, denominator alias)
    of counter windows (a token-weighted hit rate); derived(values, counter deltas): figures built
    from the others, in place; group_of(alias key): the family group a server exports as a whole
    (an image server's vs an LLM's): "not exported" is judged within the group a payload has.
    """

    aliases: tuple[Alias, ...]
    prefixes: tuple[str, ...]
    replica_labels: frozenset[str] = frozenset()
    rank_labels: tuple[tuple[str, str], ...] = ()
    priority_gauges: bool = False
    priority_breakdown: Mapping[str, str] = field(default_factory=dict)
    ratios: tuple[tuple[str, str, str], ...] = ()
    derived: Callable[[dict[str, float], dict[str, float]], None] = _no_derived
    group_of: Callable[[str], str] = _one_group
    optional: frozenset[str] = frozenset()
    by_key: dict[str, Alias] = field(init=False, repr=False, compare=False)
    lookup: dict[str, list[tuple[Alias, str, str]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_key", {a.key: a for a in self.aliases})
        object.__setattr__(self, "lookup", self._build_lookup())

    def _build_lookup(self) -> dict[str, list[tuple[Alias, str, str]]]:
        """Full sample name -> [(alias, source base name, part: value|bucket|sum|count)]; one name
        may feed several aliases (all and failed requests)."""
        out: dict[str, list[tuple[Alias, str, str]]] = {}
        for alias in self.aliases:
            for base in alias.names:
                for prefix in ("",) if alias.router else self.prefixes:
                    if alias.kind == "histogram":
                        names = [(prefix + base + part, part[1:]) for part in _PARTS]
                    elif alias.kind == "counter":
                        names = [(prefix + base + "_total", "value"), (prefix + base, "value")]
                    else:
                        names = [(prefix + base, "value")]
                    for name, part in names:
                        out.setdefault(name, []).append((alias, base, part))
        return out

    def aggregate(self, values: dict[LabelKey, float], agg: str) -> float | None:
        return aggregate(values, agg, self.replica_labels)

    def rank_detail(self, values: dict[LabelKey, float], agg: str) -> dict[str, float]:
        return rank_detail(values, agg, self.rank_labels, self.replica_labels)

    def source_names(self, keys: Iterable[str]) -> list[str]:
        """The base names (no prefix, no _total/_bucket/_sum/_count) that feed the given
        `metrics.*` keys, per-rank and per-stage detail keys included; for reading only the series
        a chart needs (Prometheus as a source). Unknown keys feed nothing."""
        wanted = set(keys)
        for out_key, num, den in self.ratios:
            if out_key in wanted:
                wanted |= {sk.metrics_key(num), sk.metrics_key(den)}
        names: set[str] = set()
        for alias in self.aliases:
            stem = sk.metrics_key(alias.key)
            if any(k == stem or k.startswith((stem + "_", stem + ".")) for k in wanted):
                names.update(alias.names)
        return sorted(names)


def pitwall_keys(alias: Alias) -> list[str]:
    """The `metrics.*` keys one alias produces (per-rank detail keys aside; a gauge split by a
    label has only its per-value keys, none of which a server must export)."""
    if alias.kind in ("gauge", "counter") and alias.split is not None:
        return []
    if alias.kind != "histogram":
        return [sk.metrics_key(alias.key)]
    stem, u = sk.metrics_key(alias.key), alias.unit
    return [f"{stem}_p50{u}", f"{stem}_p95{u}", f"{stem}_p99{u}", f"{stem}_mean{u}",
            f"{stem}_clamped"]


def split_priority(series: dict[LabelKey, float]) -> tuple[dict[LabelKey, float], dict[LabelKey, float]]:
    """(total series, per-priority series) of one gauge family: when it has `priority=""` series
    beside others, the `""` ones are the total; otherwise every series is part of the total and
    there is no breakdown."""
    values = {lk: dict(lk).get("priority") for lk in series}
    if "" not in values.values() or not any(v for v in values.values()):
        return series, {}
    return ({lk: v for lk, v in series.items() if not values[lk]},
            {lk: v for lk, v in series.items() if values[lk]})


def excluded(alias: Alias, labels: dict[str, str]) -> bool:
    """True when a series of `alias` is left out (a warm-up series of a user figure, a host pool
    other than the KV one)."""
    return any(labels.get(k) == v for k, v in alias.exclude) or any(labels.get(k) != v for k, v in alias.only)


def label_key(labels: dict[str, str], drop: Iterable[str] = ("le",)) -> LabelKey:
    dropped = set(drop)
    return tuple(sorted((k, v) for k, v in labels.items() if k not in dropped))


def aggregate(values: dict[LabelKey, float], agg: str, replica_labels: frozenset[str] = frozenset()) -> float | None:
    """Combine one quantity's series (label key -> value) by the module-doc rule."""
    if not values:
        return None
    if agg == "mean":
        return sum(values.values()) / len(values)
    groups: dict[LabelKey, float] = {}
    for lk, v in values.items():
        g = tuple((k, val) for k, val in lk if k not in replica_labels)
        groups[g] = max(groups.get(g, v), v)
    return sum(groups.values())


def rank_detail(values: dict[LabelKey, float], agg: str, rank_labels: tuple[tuple[str, str], ...],
                replica_labels: frozenset[str] = frozenset()) -> dict[str, float]:
    """Per-rank values keyed by suffix ('dp1', 'tp0pp1', ...) for the rank labels that vary."""
    varying = []
    for label, short in rank_labels:
        seen = {dict(lk).get(label) for lk in values}
        if len(seen) > 1:
            varying.append((label, short))
    if not varying:
        return {}
    buckets: dict[str, dict[LabelKey, float]] = {}
    for lk, v in values.items():
        d = dict(lk)
        suffix = "".join(f"{short}{d.get(label, 'na')}" for label, short in varying)
        buckets.setdefault(suffix, {})[lk] = v
    out = {}
    for suffix, vals in buckets.items():
        a = aggregate(vals, agg, replica_labels)
        if a is not None:
            out[suffix] = a
    return out
