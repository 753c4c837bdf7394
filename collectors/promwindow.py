"""One scrape (plus the previous scrape's state) -> Pitwall `metrics.*` values, for any engine's
alias table (collectors/promalias.py). Pure. The arithmetic is collectors/prommath.py.

Windows: gauges are taken as they are; counters become per-second rates and histograms windowed
quantiles over the time between two scrapes, from per-series deltas:

- a series that went down restarted (the server restarted) and counts from zero;
- a series that first appears in a family already seen in the previous scrape counts from zero
  (engines create a labelled series, e.g. `status="error"`, on its first event, so its first
  value IS the increase; Prometheus `rate()` loses that first failure, Pitwall must not);
- on the first scrape of a server every series is its own baseline (nothing to window yet);
- a family absent from the last scrape, which read the whole payload (no parse bound, no bad
  line), counts from zero too: a multiprocess registry shows a family only once it was first
  written, so its first value is the increase since then; after a scrape a bound cut short, or
  state from a Pitwall that did not read the family, it is its own baseline (its start is not known);
- a family a scrape lost keeps its last baseline, so its counts go on from there if it returns;
- a counter family that is exported but has no series for a figure (no `status="error"` series
  because nothing failed yet) gives 0 for that figure, not "not exported".

Non-finite inputs (`+Inf`, `-Inf`, `NaN` values; the `le="+Inf"` bucket bound is normal) are
never used: the series is left out of gauges, rates and histogram windows for that scrape, its
last good value is kept as the baseline, and its name is listed in `Window.nonfinite`. A value
that still comes out non-finite (an overflow) is dropped the same way: no non-finite value ever
leaves this module, in values or in state.

Per-rank and per-stage detail keys (`metrics.token_usage.tp3`, `..._p99_s.DenoisingStage`) are
capped at `max_detail_keys` per figure (natural order kept); the aggregate over every rank is
always computed. What was capped is listed in `Window.capped`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from collectors.promalias import (
    AliasTable,
    LabelKey,
    excluded,
    label_key,
    pitwall_keys,
    split_priority,
)
from collectors.prommath import bucket_delta, counter_delta, histogram_quantile, parse_le
from collectors.promtext import ParsedMetrics
from storage import series_keys as sk

QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
DEFAULT_MAX_DETAIL_KEYS = 256  # per-rank / per-stage keys per figure (256 ranks: a huge server)


@dataclass(slots=True)
class _Hist:
    buckets: dict[float, float] = field(default_factory=dict)
    sum: float | None = None
    count: float | None = None


@dataclass(slots=True)
class Extracted:
    """One scrape's engine series by Pitwall alias (first era name present wins)."""

    gauges: dict[str, dict[LabelKey, float]] = field(default_factory=dict)
    counters: dict[str, dict[LabelKey, float]] = field(default_factory=dict)
    hists: dict[str, dict[LabelKey, _Hist]] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)  # alias key -> the engine's base name used
    #: alias key -> label keys of series left out for a non-finite value (baseline kept)
    bad: dict[str, set[LabelKey]] = field(default_factory=dict)
    nonfinite: list[str] = field(default_factory=list)  # `name{labels}` of those samples


@dataclass(slots=True)
class Window:
    """`values`: metric key -> value (all finite); `state`: the next scrape's baseline."""

    values: dict[str, float]
    state: dict[str, Any]
    nonfinite: list[str] = field(default_factory=list)  # series left out (name{labels})
    capped: list[str] = field(default_factory=list)  # figures whose detail keys were capped


def _series_name(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}" if inner else name


def extract(table: AliasTable, parsed: ParsedMetrics) -> Extracted:
    """Group the samples Pitwall knows by alias; others (and `_created`) are ignored. Pure."""
    by_base: dict[tuple[str, str], list[tuple[str, dict[str, str], float]]] = {}
    out = Extracted()
    for s in parsed.samples:
        hits = table.lookup.get(s.name)
        if hits is None:
            continue
        finite = math.isfinite(s.value)
        if not finite:
            out.nonfinite.append(_series_name(s.name, s.labels))
        for alias, base, part in hits:
            rows = by_base.setdefault((alias.key, base), [])  # the family is exported
            if (alias.exclude or alias.only) and excluded(alias, s.labels):
                continue
            if not finite:
                out.bad.setdefault(alias.key, set()).add(label_key(s.labels))
                continue
            rows.append((part, s.labels, s.value))
    keys = dict.fromkeys(k for k, _ in by_base)
    for key in keys:
        alias = table.by_key[key]
        base = next(b for b in alias.names if (key, b) in by_base)
        out.source[key] = base
        bad = out.bad.get(key, set())
        rows = [r for r in by_base[(key, base)] if not bad or label_key(r[1]) not in bad]
        if alias.kind == "gauge":
            gauge = {label_key(lb): v for _, lb, v in rows}
            if not table.priority_gauges:
                out.gauges[key] = gauge
                continue
            out.gauges[key], breakdown = split_priority(gauge)
            own = table.priority_breakdown.get(key)
            if breakdown and own is not None and own not in keys:  # the older form: one family
                out.gauges[own] = breakdown
        elif alias.kind == "counter":
            series: dict[LabelKey, float] = {}
            for _, lb, v in rows:
                lk = label_key(lb)
                series[lk] = series.get(lk, 0.0) + v  # `x` and `x_total` never coexist; be safe
            out.counters[key] = series
        else:
            hists: dict[LabelKey, _Hist] = {}
            for part, lb, v in rows:
                h = hists.setdefault(label_key(lb), _Hist())
                if part == "bucket":
                    le = parse_le(lb.get("le", ""))
                    if le is not None:
                        h.buckets[le] = v
                elif part == "sum":
                    h.sum = v
                else:
                    h.count = v
            out.hists[key] = hists
    return out


def absent_keys(table: AliasTable, parsed: ParsedMetrics) -> list[str]:
    """Pitwall `metrics.*` keys this payload cannot feed: "not exported by this server/version".

    A family that is exported counts as present even when no series of it feeds a figure yet
    (no failed request so far): that figure reads 0, it is not "not exported"."""
    ex = extract(table, parsed)
    present = set(ex.gauges) | set(ex.counters) | set(ex.hists)
    produced = {k for a in table.aliases if a.key in present for k in pitwall_keys(a)}
    produced |= {out for out, num, den in table.ratios if {num, den} <= present}
    # an image server exports its family group and an LLM server the rest: each is judged against
    # its own group, so an LLM's "not exported" list never fills with image keys
    group = next((g for g in sorted({table.group_of(k) for k in present}) if g), "")
    every = {k for a in table.aliases if table.group_of(a.key) == group and a.key not in table.optional
             for k in pitwall_keys(a)}
    every |= {out for out, num, _ in table.ratios if table.group_of(num) == group}
    return sorted(every - produced)


def _sid(lk: LabelKey) -> str:
    return json.dumps([list(p) for p in lk], separators=(",", ":"))


def _natural(text: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def _capped(detail: dict[str, float], limit: int) -> dict[str, float]:
    if len(detail) <= limit:
        return detail
    return {k: detail[k] for k in sorted(detail, key=_natural)[:limit]}


def window(
    table: AliasTable,
    parsed: ParsedMetrics,
    prev: dict[str, Any] | None,
    ts: float,
    max_detail_keys: int = DEFAULT_MAX_DETAIL_KEYS,
) -> Window:
    """The values, state and notes of one scrape at `ts` given the previous state. Pure."""
    ex = extract(table, parsed)
    values: dict[str, float] = {}
    capped: list[str] = []
    for key, series in ex.gauges.items():
        alias = table.by_key[key]
        if alias.split is None:
            total = table.aggregate(series, alias.agg)
            if total is not None:
                values[sk.metrics_key(key)] = total * alias.scale
            detail = table.rank_detail(series, alias.agg)
        else:
            parts: dict[str, dict[LabelKey, float]] = {}
            for lk, v in series.items():
                parts.setdefault(dict(lk).get(alias.split, ""), {})[lk] = v
            detail = {p: a for p, sub in parts.items() if (a := table.aggregate(sub, alias.agg)) is not None}
        if len(detail) > max_detail_keys:
            capped.append(f"{sk.metrics_key(key)} ({len(detail):,} {alias.split or 'rank'} keys)")
        for suffix, v in _capped(detail, max_detail_keys).items():
            values[f"{sk.metrics_key(key)}.{suffix}"] = v * alias.scale

    # "seen": the counter and histogram families this scrape read whole (no parse bound, no bad
    # line): a family absent from such a scrape and here now was first written since then
    clean = not parsed.errors and not parsed.limits
    state: dict[str, Any] = {"ts": ts, "c": {}, "h": {},
                             "seen": sorted({*ex.counters, *ex.hists}) if clean else None}
    prev_ts = prev.get("ts") if prev else None
    dt = ts - prev_ts if isinstance(prev_ts, int | float) else None
    windowed = dt is not None and dt > 0
    prev_c: dict[str, dict[str, float]] = (prev or {}).get("c", {})
    prev_h: dict[str, dict[str, Any]] = (prev or {}).get("h", {})
    prev_seen = (prev or {}).get("seen")

    def born_since(key: str) -> bool:
        """A family absent from the last scrape, which read everything (not cut by a bound, not
        from a Pitwall that did not know the family): it was written for the first time since."""
        return isinstance(prev_seen, list) and key not in prev_seen

    deltas: dict[str, float] = {}
    for key, series in ex.counters.items():
        old = prev_c.get(key)
        kept: dict[str, float | None] = {_sid(lk): v for lk, v in series.items()}
        for lk in ex.bad.get(key, ()):  # unreadable now: the last good value stays the baseline
            kept[_sid(lk)] = old.get(_sid(lk)) if old else None  # None: seen, no baseline yet
        state["c"][key] = kept
        if not windowed or (old is None and not born_since(key)):
            continue  # the first scrape, or a family whose start is not known: no baseline yet
        old = old or {}  # born since the last scrape: counts from zero
        inc: dict[LabelKey, float] = {}
        for lk, v in series.items():
            # a series new in a known family counts from zero (the engine made it on its first event)
            sid = _sid(lk)
            d = counter_delta(old[sid] if sid in old else 0.0, v)
            if d is not None:
                inc[lk] = d
        if not inc and ex.bad.get(key):
            continue  # every series unreadable: missing, not 0
        total = table.aggregate(inc, table.by_key[key].agg) or 0.0
        deltas[key] = total
        assert dt is not None
        split = table.by_key[key].split
        if split is not None:  # one rate per label value (cache_source), no aggregate key
            cparts: dict[str, dict[LabelKey, float]] = {}
            for lk, d in inc.items():
                if dict(lk).get(split):  # a series without the label (an older release) has no tier
                    cparts.setdefault(dict(lk)[split], {})[lk] = d
            for part in sorted(cparts, key=_natural)[:max_detail_keys]:
                values[f"{sk.metrics_key(key)}.{part}"] = (table.aggregate(cparts[part], table.by_key[key].agg) or 0.0) / dt
            continue
        values[sk.metrics_key(key)] = total / dt
    for out_key, num, den in table.ratios:
        if deltas.get(den, 0.0) > 0 and num in deltas:
            values[out_key] = deltas[num] / deltas[den]

    for key, hists in ex.hists.items():
        old_h = prev_h.get(key)
        kept_h: dict[str, Any] = {
            _sid(lk): {"b": {repr(le): c for le, c in h.buckets.items()}, "s": h.sum, "n": h.count}
            for lk, h in hists.items()
        }
        for lk in ex.bad.get(key, ()):
            kept_h[_sid(lk)] = old_h.get(_sid(lk)) if old_h else None
        state["h"][key] = kept_h
        if not windowed or (old_h is None and not born_since(key)):
            continue
        old_h = old_h or {}  # born since the last scrape: its first observations are the window's
        split = table.by_key[key].split
        if split is None:
            values.update(_window_hist(table, key, hists, old_h))
            continue
        hparts: dict[str, dict[LabelKey, _Hist]] = {}
        for lk, h in hists.items():
            hparts.setdefault(dict(lk).get(split, ""), {})[lk] = h
        if len(hparts) > max_detail_keys:
            capped.append(f"{sk.metrics_key(key)} ({len(hparts):,} {split} keys)")
        for part in sorted(hparts, key=_natural)[:max_detail_keys]:
            got = _window_hist(table, key, hparts[part], old_h)
            values.update({f"{k}.{part}": v for k, v in got.items()})

    table.derived(values, deltas)
    _keep_missing(state, prev_c, prev_h)

    nonfinite = list(ex.nonfinite)
    for k in [k for k, v in values.items() if not math.isfinite(v)]:
        nonfinite.append(f"{k} (computed)")
        del values[k]
    return Window(values, state, nonfinite, capped)


def _keep_missing(state: dict[str, Any], prev_c: dict[str, Any], prev_h: dict[str, Any]) -> None:
    """A family missing from this scrape keeps its last baseline: should it come back (a scrape
    that lost it, Prometheus's staleness), its counts go on from there, never from zero."""
    for part, prev_part in (("c", prev_c), ("h", prev_h)):
        for key, kept_state in prev_part.items():
            state[part].setdefault(key, kept_state)


def _window_hist(table: AliasTable, key: str, hists: dict[LabelKey, _Hist], old: dict[str, Any]) -> dict[str, float]:
    per_le: dict[float, dict[LabelKey, float]] = {}
    sums: dict[LabelKey, float] = {}
    counts: dict[LabelKey, float] = {}
    for lk, h in hists.items():
        sid = _sid(lk)
        if sid in old and old[sid] is None:
            continue  # seen before only with a non-finite value: this is its baseline
        # new in a known family: the engine made it on its first observation, count from zero
        o: dict[str, Any] = old[sid] if sid in old else {"b": {}, "s": 0.0, "n": 0.0}
        prev_b = {float(k): float(v) for k, v in o.get("b", {}).items()}
        prev_n = o.get("n") if isinstance(o.get("n"), int | float) else None
        prev_s = o.get("s") if isinstance(o.get("s"), int | float) else None
        # a count or any bucket that went down means the server restarted: count from zero
        reset = (h.count is not None and prev_n is not None and h.count < prev_n) or any(
            h.buckets.get(le, 0.0) < v for le, v in prev_b.items()
        )
        d = dict(h.buckets) if reset else bucket_delta(prev_b, h.buckets)
        if d is None:
            continue
        for le, c in d.items():
            per_le.setdefault(le, {})[lk] = c
        if h.count is not None:
            dn = h.count if reset else counter_delta(prev_n, h.count)
            if dn is not None:
                counts[lk] = dn
        if h.sum is not None:
            ds = h.sum if reset else counter_delta(prev_s, h.sum)
            if ds is not None:
                sums[lk] = ds
    alias = table.by_key[key]
    buckets = {le: table.aggregate(vals, alias.agg) or 0.0 for le, vals in per_le.items()}
    out: dict[str, float] = {}
    stem, unit = sk.metrics_key(key), alias.unit
    n = table.aggregate(counts, alias.agg)
    if n is None and buckets and math.inf in buckets:
        n = buckets[math.inf]
    if n is not None:
        out[f"{stem}_window_count"] = n
    s = table.aggregate(sums, alias.agg)
    if n and s is not None:
        out[f"{stem}_mean{unit}"] = s / n * alias.scale
    clamped = False
    for label, q in QUANTILES:
        est = histogram_quantile(q, buckets)
        if est is not None:
            out[f"{stem}_{label}{unit}"] = est.value * alias.scale
            clamped = clamped or est.clamped
    if f"{stem}_p50{unit}" in out:
        out[f"{stem}_clamped"] = 1.0 if clamped else 0.0
    return out
