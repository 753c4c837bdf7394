"""Scraping an engine's `/metrics`: every server at once under one deadline per poll, each payload
parsed within bounds (collectors/promtext.py), windowed through the engine's alias table
(collectors/promwindow.py), with the limits and failures reported once per episode
(collectors/promnotes.py) and, where the engine keeps a catalogue of its families, one
`metric_drift` event per launch whose families changed. Each engine subclasses
`PromScrapeCollector` with its name, table, hint and catalogue (collectors/<engine>/metrics.py,
whose docstring has its key table).

Bounds, each hit leaving ONE `collector_error` event per server per episode (a run of scrapes
that hit it) naming the server and the setting: samples parsed per scrape
(`runner.metrics_max_series`; a family past it is skipped whole), parse CPU time per scrape
(`runner.metrics_parse_budget_s`), per-rank / per-stage keys per figure
(`runner.metrics_max_rank_keys`; the aggregate is kept), and one deadline for the whole poll
(`runner.metrics_deadline_s`; a server that misses it gets its own event, the others' rows come
back). Non-finite series and malformed lines are reported the same way, once per episode.
A metric the server does not export gives no sample (never 0): `absent_keys()` lists those keys,
kept in the collector's state (`<name>:<server_id>:window` -> `"absent"`) for the dashboard's
"not exported by this server/version".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import httpx

from collectors.base import (
    CollectorContext,
    CollectorError,
    EventRow,
    PollResult,
    SampleRow,
    ServerTarget,
)
from collectors.fanout import WORKERS, ServerPool
from collectors.http import DeadlineExceeded, auth_headers, capped_client, get_capped
from collectors.promalias import AliasTable
from collectors.promnotes import Episodes, notes_for
from collectors.promtext import ParsedMetrics, ParseLimits, parse_metrics
from collectors.promwindow import DEFAULT_MAX_DETAIL_KEYS, Window, absent_keys, window

MAX_REPORTED = 20  # families one drift event lists (the rest are counted)
SETTLE_S = 120.0  # seconds after an epoch's first traffic by which its steady families exist


class Drift(Protocol):
    """One family's change between launches, as an engine's catalogue reports it."""

    family: str
    change: str
    before: Any
    after: Any
    keys: tuple[str, ...]
    served_by: str | None

    def sentence(self) -> str: ...


#: (state before, launch id, the scrape, ts, settle_s=) -> (state after, the drift found)
CatalogStep = Callable[..., tuple[Any, list[Any]]]


SOURCE = "metrics"
WAIT_S = 2.0  # a poll waits this long for its scrapes; a slower one is handed in by a later poll


@dataclass(slots=True)
class Snapshot:
    """One scrape's rows and new window state, and what was left out (for events)."""

    rows: list[SampleRow]
    state: dict[str, Any]
    window: Window = field(repr=False)


def snapshot(
    table: AliasTable,
    server: ServerTarget,
    parsed: ParsedMetrics,
    prev: dict[str, Any] | None,
    ts: float,
    max_detail_keys: int = DEFAULT_MAX_DETAIL_KEYS,
) -> Snapshot:
    """The rows of one scrape of `server` taken at `ts`, the new window state and the notes. Pure.

    The one conversion from a scrape to rows: the direct /metrics scrape and the Prometheus
    source (collectors/prometheus_source.py, which rebuilds each scrape from Prometheus's stored
    samples) both go through it, so a server reads the same either way. Every value is finite.
    """
    w = window(table, parsed, prev, ts, max_detail_keys)
    w.state["absent"] = absent_keys(table, parsed)
    rows = [
        SampleRow(ts, server.id, k, v, SOURCE, server.launch_id) for k, v in sorted(w.values.items())
    ]
    return Snapshot(rows, w.state, w)


class PromScrapeCollector:
    """Scrapes `{base_url}/metrics` of every server each `interval_s` seconds, all at once, except
    servers with a `prometheus_url`: those are read through Prometheus (prometheus_source.py).

    A subclass names the engine's `table` (collectors/promalias.py), `enable_hint` (what to do
    when a server answers 404: how the engine turns its metrics on) and `catalog_step` (its
    families' catalogue, None: no drift guard)."""

    name: str
    table: ClassVar[AliasTable]
    enable_hint: ClassVar[str] = "turn the server's metrics on"
    catalog_step: ClassVar[CatalogStep | None] = None

    def __init__(
        self,
        interval_s: float = 5.0,
        timeout_s: float = 3.0,
        deadline_s: float = 10.0,
        *,
        limits: ParseLimits | None = None,
        max_rank_keys: int = DEFAULT_MAX_DETAIL_KEYS,
        workers: int = WORKERS,  # servers scraped at once (collectors/fanout.py)
    ) -> None:
        """`timeout_s`: per socket read, seconds; `deadline_s`: a whole poll (every server's
        scrape and parse), seconds; `limits`: series and CPU time per payload; `max_rank_keys`:
        per-rank / per-stage keys per figure."""
        self.interval_s = interval_s
        self.deadline_s = max(deadline_s, timeout_s)
        self.limits = limits or ParseLimits()
        self.max_rank_keys = max_rank_keys
        self._client = capped_client(timeout_s)
        self._servers = ServerPool(self.name, max_workers=max(1, workers))
        self._last_error: dict[int, str] = {}
        self._episodes = Episodes()  # one event per server per limit per episode
        #: Pitwall keys -> phrases naming what reads them (present/dependents.py, set by the
        #: runner's assembly); without it a drift event names the keys alone
        self.dependents: Callable[[Iterable[str]], list[str]] | None = None
        self.drift_settle_s = SETTLE_S

    def set_dependents(self, resolve: Callable[[Iterable[str]], list[str]]) -> None:
        self.dependents = resolve

    def configure(self, runner: dict[str, Any]) -> None:
        """Take the `runner.metrics_*` settings (config/settings.py); missing keys keep defaults.
        Raises ValueError naming a setting that is not above 0."""
        for k in ("metrics_max_series", "metrics_parse_budget_s", "metrics_deadline_s",
                  "metrics_max_rank_keys", "metrics_drift_settle_s"):
            if k in runner and not runner[k] > 0:
                self.close()
                raise ValueError(f"Setting runner.{k} is {runner[k]}; expected a number above 0 "
                                 "(README lists its default).")
        self.limits = ParseLimits(
            max_series=int(runner.get("metrics_max_series", self.limits.max_series)),
            budget_s=float(runner.get("metrics_parse_budget_s", self.limits.budget_s)),
        )
        self.max_rank_keys = int(runner.get("metrics_max_rank_keys", self.max_rank_keys))
        self.deadline_s = float(runner.get("metrics_deadline_s", self.deadline_s))
        self.drift_settle_s = float(runner.get("metrics_drift_settle_s", self.drift_settle_s))

    def scrape(self, server: ServerTarget, deadline_s: float | None = None) -> str:
        """The payload text; raises CollectorError with what to do on any failure."""
        url = server.metrics_endpoint
        headers = auth_headers(server.api_key)
        try:
            resp = get_capped(self._client, url, headers=headers,
                              deadline_s=self.deadline_s if deadline_s is None else deadline_s)
        except DeadlineExceeded:
            raise  # _poll_one names the server and the poll's setting
        except CollectorError as exc:  # a cap or an encoding: its message names the limit
            raise CollectorError(f"Server {server.name!r}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise CollectorError(
                f"Could not reach {url} ({type(exc).__name__}: {exc}); check that server "
                f"{server.name!r} is running and its {'metrics_url' if server.metrics_url else 'base_url'} is right."
            ) from exc
        if resp.status_code == 404:
            raise CollectorError(
                f"{url} returned 404: server {server.name!r} exports no Prometheus metrics; "
                f"{self.enable_hint}."
            )
        if resp.status_code in (401, 403):
            raise CollectorError(
                f"{url} refused the request ({resp.status_code}): set the server's api_key."
            )
        if resp.status_code != 200:
            raise CollectorError(
                f"{url} returned HTTP {resp.status_code}; the server may be starting or failing."
            )
        return resp.text

    def _late(self, server: ServerTarget) -> CollectorError:
        return CollectorError(
            f"Server {server.name!r}: scraping and parsing /metrics did not finish within the "
            f"poll's {self.deadline_s:g} s deadline (runner.metrics_deadline_s, the limit); its "
            "figures are missing until it answers in time, the other servers' are kept."
        )

    def _poll_one(self, ctx: CollectorContext, server: ServerTarget) -> PollResult:
        """In a worker thread (collectors/fanout.py): scrape, parse and turn into rows; the
        window state it saves is kept only if the whole of it finishes within the poll."""
        try:
            text = self.scrape(server)
        except DeadlineExceeded as exc:
            raise self._late(server) from exc
        return self._ingest(ctx, server, parse_metrics(text, self.limits), ctx.now())

    def poll(self, ctx: CollectorContext) -> PollResult:
        # a server with a prometheus_url is read through that Prometheus (prometheus_source)
        servers = [s for s in ctx.servers if s.serving and not s.prometheus_url]
        # a scrape still running after WAIT_S is handed in by a later poll (collectors/fanout.py);
        # its own deadline (runner.metrics_deadline_s) ends it
        fan = self._servers.poll_servers(ctx, servers, self._poll_one, wait_s=min(WAIT_S, self.deadline_s))
        result = fan.result
        failures: list[str] = []
        for server, exc in fan.failed:
            msg = str(exc) if isinstance(exc, CollectorError) else (
                f"Server {server.name!r}: reading /metrics failed ({type(exc).__name__}: {exc}); "
                "its figures are missing until it answers normally.")
            failures.append(msg)
            if self._last_error.get(server.id) != msg:  # once per episode
                self._last_error[server.id] = msg
                result.events.append(EventRow(ctx.now(), server.id, "collector_error", msg,
                                              launch_id=server.launch_id))
        for server in fan.done:
            self._last_error.pop(server.id, None)
        if failures and len(failures) == len(servers) and not result.samples:
            raise CollectorError(failures[0] if len(failures) == 1 else "; ".join(failures))
        return result

    def ingest(
        self, ctx: CollectorContext, server: ServerTarget, text: str, ts: float
    ) -> PollResult:
        """Parse one payload for one server, update its window state, return its rows."""
        return self._ingest(ctx, server, parse_metrics(text, self.limits), ts)

    def _ingest(
        self, ctx: CollectorContext, server: ServerTarget, parsed: ParsedMetrics, ts: float
    ) -> PollResult:
        key = f"{self.name}:{server.id}:window"
        out = PollResult()
        snap = snapshot(self.table, server, parsed, ctx.load_state(key), ts, self.max_rank_keys)
        out.samples = snap.rows
        ctx.save_state(key, snap.state)
        notes = notes_for(f"Server {server.name!r} /metrics", parsed, snap.window, self.max_rank_keys)
        out.events = self._episodes.events(server, notes, ts)
        step = type(self).catalog_step
        if step is None:
            return out
        cat_key = f"{self.name}:{server.id}:catalog"
        before = ctx.load_state(cat_key)
        catalog, drift = step(before, server.launch_id, parsed, ts, settle_s=self.drift_settle_s)
        if catalog != before:  # most scrapes change nothing: no write on the poll's hot path
            ctx.save_state(cat_key, catalog)
        if drift:
            out.events.append(self._drift_event(server, drift, ts))
        return out

    def _drift_event(self, server: ServerTarget, drift: list[Drift], ts: float) -> EventRow:
        """ONE `metric_drift` event for what one epoch's judgement found: each family, what it fed
        and what reads that; a warning when a figure lost its input, info when every family is a
        rename Pitwall reads through or fed nothing of Pitwall's."""
        when = (f"since launch #{server.launch_id}" if server.launch_id is not None
                else "since the server restarted")
        parts, losing = [], False
        for d in drift[:MAX_REPORTED]:
            readers = (self.dependents(d.keys) if self.dependents is not None else list(d.keys)) if d.keys else []
            fed = f" It fed {'; '.join(readers)}." if readers else " Nothing in Pitwall read it."
            losing = losing or bool(readers and not d.served_by)
            parts.append(f"{d.sentence()}.{fed}")
        if len(drift) > MAX_REPORTED:
            parts.append(f"And {len(drift) - MAX_REPORTED} more families ({', '.join(d.family for d in drift[MAX_REPORTED:])[:500]}).")
            losing = losing or any(d.keys and not d.served_by for d in drift[MAX_REPORTED:])
        advice = (" Those figures stay empty until the server exports the family again: check the "
                  "release notes of the version now running, and the launch flags." if losing else "")
        msg = f"Server {server.name!r}: /metrics changed {when}. " + " ".join(parts) + advice
        raw = json.dumps([{"family": d.family, "change": d.change, "before": d.before, "after": d.after,
                           "keys": list(d.keys), "served_by": d.served_by} for d in drift[:MAX_REPORTED]])
        if losing:
            return EventRow(ts, server.id, "metric_drift", msg, raw=raw, launch_id=server.launch_id)
        return EventRow(ts, server.id, "metric_drift", msg, severity="info", raw=raw, launch_id=server.launch_id,
                        severity_reason="every change is a rename Pitwall reads, or feeds nothing of Pitwall's")

    def close(self) -> None:
        self._servers.close()
        self._client.close()
