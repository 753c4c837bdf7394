"""What a scrape left out, as events: one `collector_error` per server per kind per episode.

Shared by every engine's direct /metrics scrape (collectors/promscrape.py) and the Prometheus source
(collectors/prometheus_source.py), so a server read either way reports the same limits the same
way. Kinds: `malformed` (lines the parser skipped), `series` (families past
runner.metrics_max_series), `budget` (past runner.metrics_parse_budget_s of CPU), `ranks` (per-rank
keys past runner.metrics_max_rank_keys), `nonfinite` (+Inf, -Inf or NaN series skipped). A kind
reported once is quiet until a scrape without it ends the episode; the next one is news.
"""

from __future__ import annotations

import threading

from collectors.base import EventRow, ServerTarget
from collectors.promtext import ParsedMetrics
from collectors.promwindow import Window

KINDS = ("malformed", "series", "budget", "ranks", "nonfinite")
Notes = dict[str, tuple[str, str | None]]  # kind -> (message, raw excerpt)


def names(items: list[str], most: int = 5) -> str:
    head = ", ".join(items[:most])
    return head + (f" and {len(items) - most} more" if len(items) > most else "")


def notes_for(who: str, parsed: ParsedMetrics | None, window: Window | None,
              max_rank_keys: int) -> Notes:
    """The notes of one read: `who` opens each message ("Server 'a' /metrics")."""
    notes: Notes = {}
    if parsed is not None and parsed.errors:
        notes["malformed"] = (
            f"{who}: {len(parsed.errors)} malformed line(s) were skipped (first: "
            f"{parsed.errors[0]}); the rest was read. Fix the exporter.",
            "\n".join(parsed.errors[:20]))
    limits = parsed.limits if parsed is not None else []
    series = [text for kind, text in limits if kind == "series"]
    if series:
        notes["series"] = (
            f"{who}: {series[0]} (runner.metrics_max_series, the limit); figures of the skipped "
            "families are missing until it is raised or the exporter's label explosion is fixed.",
            "\n".join(series[:20]))
    budget = [text for kind, text in limits if kind == "budget"]
    if budget:
        notes["budget"] = (
            f"{who}: {budget[0]} (runner.metrics_parse_budget_s, the limit); figures after that "
            "point are missing until the payload shrinks or the budget is raised.", None)
    if window is not None and window.capped:
        notes["ranks"] = (
            f"{who}: {names(window.capped)} passed {max_rank_keys} per-rank keys per figure "
            "(runner.metrics_max_rank_keys, the limit); keys past it were dropped, the aggregate "
            "over every rank is kept.", None)
    if window is not None and window.nonfinite:
        notes["nonfinite"] = (
            f"{who}: non-finite values (+Inf, -Inf or NaN) in {names(window.nonfinite)}; those "
            "series are skipped until they read a number again (a bug in the exporter).",
            "\n".join(window.nonfinite[:20]))
    return notes


class Episodes:
    """Which (server, kind) episodes were reported; thread-safe (servers are read at once)."""

    def __init__(self) -> None:
        self._open: set[tuple[int, str]] = set()
        self._lock = threading.Lock()

    def events(self, server: ServerTarget, notes: Notes, ts: float) -> list[EventRow]:
        """An event for each kind in `notes` not already reported; ends the episodes of the
        kinds absent from `notes`."""
        out: list[EventRow] = []
        with self._lock:
            for kind in KINDS:
                episode = (server.id, kind)
                if kind not in notes:
                    self._open.discard(episode)
                    continue
                if episode in self._open:
                    continue
                self._open.add(episode)
                message, raw = notes[kind]
                out.append(EventRow(ts, server.id, "collector_error", message, raw=raw,
                                    launch_id=server.launch_id))
        return out
