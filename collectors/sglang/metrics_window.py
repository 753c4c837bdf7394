"""SGLang's scrapes -> Pitwall `metrics.*` values: the engine-neutral window arithmetic
(collectors/promwindow.py, whose docstring has the rules) over SGLang's alias table
(metrics_alias.py). Pure.

SGLang's particulars the rules answer: SGLang creates a labelled series, e.g. `status="error"`, on
its first event, so its first value is the increase; its multiprocess registry shows a family
only once it was first written (the radix cache's evictions, HiCache's load-backs, the first
abort), so a family born since a whole scrape counts from zero.
"""

from __future__ import annotations

from typing import Any

from collectors import promwindow
from collectors.promtext import ParsedMetrics
from collectors.promwindow import DEFAULT_MAX_DETAIL_KEYS as DEFAULT_MAX_DETAIL_KEYS
from collectors.promwindow import QUANTILES as QUANTILES
from collectors.promwindow import Extracted as Extracted
from collectors.promwindow import Window as Window
from collectors.sglang.metrics_alias import TABLE


def extract(parsed: ParsedMetrics) -> Extracted:
    """Group the samples Pitwall knows by alias; others (and `_created`) are ignored. Pure."""
    return promwindow.extract(TABLE, parsed)


def absent_keys(parsed: ParsedMetrics) -> list[str]:
    """Pitwall `metrics.*` keys this payload cannot feed: "not exported by this server/version"."""
    return promwindow.absent_keys(TABLE, parsed)


def compute(
    parsed: ParsedMetrics, prev: dict[str, Any] | None, ts: float
) -> tuple[dict[str, float], dict[str, Any]]:
    """(metric key -> value, new state) for one scrape at `ts` given the previous state. Pure."""
    w = window(parsed, prev, ts)
    return w.values, w.state


def window(
    parsed: ParsedMetrics,
    prev: dict[str, Any] | None,
    ts: float,
    max_detail_keys: int = DEFAULT_MAX_DETAIL_KEYS,
) -> Window:
    """The values, state and notes of one scrape at `ts` given the previous state. Pure."""
    return promwindow.window(TABLE, parsed, prev, ts, max_detail_keys)
