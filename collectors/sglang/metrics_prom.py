"""SGLang's series read back from a Prometheus (the Engine's `prometheus`; the collector is
collectors/prometheus_source.py): which names to ask for, and each stored scrape fed through the
direct scrape's own conversion (`snapshot` in metrics.py), so the rows are the ones the direct
scrape would have stored, stamped with Prometheus's scrape times.

Prometheus stamps every sample of one scrape with that scrape's time, so grouping the raw samples
by timestamp rebuilds each scrape as the server served it (`snapshots`). The labels Prometheus
added (the target's job, instance and relabelled labels) are stripped first, so rank labels
(`dp_rank`, `tp_rank`, ...) are judged as on the server.
"""

from __future__ import annotations

from typing import Any

from collectors.base import PollResult, ServerTarget
from collectors.prometheus_api import Series
from collectors.promnotes import Episodes, notes_for
from collectors.promtext import DEFAULT_MAX_SERIES, ParsedMetrics, ParsedSample
from collectors.sglang.metrics import compute, snapshot
from collectors.sglang.metrics_alias import source_names
from collectors.sglang.metrics_window import DEFAULT_MAX_DETAIL_KEYS, Window

#: `__name__` matcher of the series read (SGLang's `sglang:` and re-published `sglang_`)
NAMES = '__name__=~"sglang[:_].*"'


def snapshots(series: list[Series], strip: set[str], after: float) -> dict[float, ParsedMetrics]:
    """Raw API series -> one ParsedMetrics per scrape timestamp later than `after`. Pure.

    `strip`: label names Prometheus added (the target's labels); `__name__` becomes the name.
    """
    out: dict[float, ParsedMetrics] = {}
    for s in series:
        labels = {k: v for k, v in s.labels.items() if k != "__name__" and k not in strip}
        for ts, value in s.points:
            if ts > after:
                snap = out.setdefault(ts, ParsedMetrics())
                snap.samples.append(ParsedSample(s.name, labels, value, s.name, "unknown"))
    return out


def cap_series(parsed: ParsedMetrics, max_series: int) -> ParsedMetrics:
    """`parsed` with whole families left out once `max_series` samples are kept (as the direct
    scrape's parser does: never part of a family, so no sum over only some ranks), each noted in
    `.limits`. Pure; `parsed` itself when it is under the cap."""
    if len(parsed.samples) <= max_series:
        return parsed
    families: dict[str, list[ParsedSample]] = {}
    for sample in parsed.samples:
        families.setdefault(sample.family, []).append(sample)
    out = ParsedMetrics()
    for family, samples in families.items():
        if len(out.samples) + len(samples) > max_series:
            out.limits.append(("series", f"family {family} has {len(samples):,} series, over the "
                                         f"{max_series:,}-sample limit per scrape; it was skipped"))
            continue
        out.samples.extend(samples)
    return out


class PromReader:
    """One per collector: converts a server's raw series and remembers its limit episodes (one
    event when a limit starts to bite, not one per poll)."""

    names = NAMES
    series_label = "sglang:*"  # how messages name the series read
    no_series_hint = ("start SGLang with --enable-metrics, or check that the selector names the "
                      "SGLang server and not another exporter")
    max_series = DEFAULT_MAX_SERIES  # samples per server per scrape converted
    max_rank_keys = DEFAULT_MAX_DETAIL_KEYS

    def __init__(self) -> None:
        self._episodes = Episodes()

    def range_names(self, metrics: list[str]) -> str:
        """The `__name__` matcher of only the series `metrics` (metrics.* keys) need; ValueError
        naming them when none is read from SGLang's metrics."""
        bases = source_names(metrics)
        if not bases:
            raise ValueError(f"None of {metrics} is read from SGLang's metrics; pass metrics.* keys.")
        return '__name__=~"sglang[:_](' + "|".join(bases) + ')(_total|_bucket|_sum|_count)?"'

    def steps(self, series: list[Series], strip: set[str]) -> dict[float, ParsedMetrics]:
        """`query_range` series -> one scrape-like set of samples per step (ms-rounded time)."""
        out: dict[float, ParsedMetrics] = {}
        for s in series:
            labels = {k: v for k, v in s.labels.items() if k != "__name__" and k not in strip}
            for ts, value in s.points:
                out.setdefault(round(ts, 3), ParsedMetrics()).samples.append(
                    ParsedSample(s.name, labels, value, s.name, "unknown"))
        return out

    def values_at(self, step: Any, state: Any, ts: float) -> tuple[dict[str, float], Any]:
        """One step -> ({metrics.* key: value}, the state the next step is computed against),
        through the direct collector's own conversion (`compute` in metrics.py)."""
        return compute(step, state, ts)

    def convert(self, server: ServerTarget, series: list[Series], strip: set[str], after: float,
                state: Any, now: float, max_series: int, max_rank_keys: int) -> tuple[PollResult, Any, float | None]:
        """(rows and limit events, the conversion's window state, the newest scrape time read or None)."""
        out = PollResult()
        snaps = snapshots(series, strip, after)
        seen = ParsedMetrics()  # what this read left out, for the events
        nonfinite: set[str] = set()
        capped: set[str] = set()
        for ts in sorted(snaps):
            parsed = cap_series(snaps[ts], max_series)
            seen.limits.extend(lim for lim in parsed.limits if lim not in seen.limits)
            snap = snapshot(server, parsed, state, ts, max_rank_keys)
            state = snap.state
            out.samples.extend(snap.rows)
            nonfinite.update(snap.window.nonfinite)
            capped.update(snap.window.capped)
        notes = notes_for(f"Server {server.name!r} through Prometheus", seen,
                          Window({}, {}, sorted(nonfinite), sorted(capped)), max_rank_keys)
        out.events.extend(self._episodes.events(server, notes, now))
        return out, state, (max(snaps) if snaps else None)
