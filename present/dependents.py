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

from collections.abc import Callable, Iterable
from typing import Any

from present.panels import PANELS
from scorecard.metric_specs import SERVER_SERIES, spec


def _matches(keys: set[str], key: str) -> bool:
    return key in keys or any("<" in k and key.startswith(k.split("<", 1)[0]) for k in keys)


def dependents(keys: Iterable[str], rules: Iterable[Any] = ()) -> list[str]:
    """Phrases naming what reads any of `keys`, figures first; [] when nothing does."""
    wanted = set(keys)
    out = [f"scorecard figure {spec(fig).label!r} ({fig})" for fig, series in SERVER_SERIES.items()
           if any(_matches(wanted, k) for k in series)]
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
