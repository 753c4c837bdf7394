"""What in Pitwall reads a series: the scorecard figures, the Server page's charts and the alert
rules that would go without input if it stopped (the metric drift guard names them:
the engine's metrics catalogue).

- scorecard figures: scorecard/metric_specs.py SERVER_SERIES (the server series each figure reads,
  its fallbacks included);
- charts: present/panels.py PANELS (a panel's series and its fallback);
- alert rules: threshold rules whose stored series is one of the keys (runner/alerts/rules.py
  `Rule.series`), from the rule set the runner evaluates now (the file's `[[alerts]]`, the
  defaults and the UI's edits).

A key may be a pattern with one `<...>` part (a split gauge: `metrics.<alias>.<module>`): it
matches every key with that stem.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from present.panels import PANELS
from scorecard.metric_specs import SERVER_SERIES, spec


def _matches(keys: set[str], key: str) -> bool:
    return key in keys or any("<" in k and key.startswith(k.split("<", 1)[0]) for k in keys)


_PCT = re.compile(r"\bp(50|95|99)\b")


def _figures(figs: list[str]) -> list[str]:
    """One phrase a figure, the percentiles of one quantity as one ('Server ITL p50/p95/p99
    (histogram)' for server_itl_p50_s, _p95_s, _p99_s)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for fig in figs:
        label = spec(fig).label
        m = _PCT.search(label)
        groups.setdefault(_PCT.sub("p*", label) if m else label, []).append((m.group(1) if m else "", fig))
    out = []
    for shape, members in groups.items():
        pcts = [p for p, _ in members if p]
        label = shape.replace("p*", "p" + "/p".join(pcts)) if len(pcts) == len(members) > 1 else spec(members[0][1]).label
        word = "figures" if len(members) > 1 else "figure"
        out.append(f"scorecard {word} {label!r} ({', '.join(f for _, f in members)})")
    return out


def dependents(keys: Iterable[str], rules: Iterable[Any] = ()) -> list[str]:
    """Phrases naming what reads any of `keys`, figures first; [] when nothing does."""
    wanted = set(keys)
    out = _figures([fig for fig, series in SERVER_SERIES.items() if any(_matches(wanted, k) for k in series)])
    out += [f"chart {p.title!r} (Server page)" for p in PANELS
            if any(_matches(wanted, k) for k, _ in (*p.series, *p.fallback))]
    for rule in rules:
        if getattr(rule, "kind", "") == "threshold" and _matches(wanted, rule.series()[0]):
            out.append(f"alert rule {rule.name!r}")
    return out


def resolver(rules: Callable[[], Iterable[Any]] | None = None) -> Callable[[Iterable[str]], list[str]]:
    """`dependents` bound to the rules in force at each call (the runner's rule source)."""
    def resolve(keys: Iterable[str]) -> list[str]:
        return dependents(keys, rules() if rules is not None else ())

    return resolve
