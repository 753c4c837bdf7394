"""Prometheus as a source: a server already scraped by a Prometheus is read through its HTTP API
instead of being scraped again (the direct /metrics collector skips every server with a
`prometheus_url`).

Each poll reads, per server, every stored sample of its engine's series since the last poll
(`{<the engine's __name__ matcher>, <selector>}[window]`, a range-vector instant query), and the
server's engine converts them (the Engine's `prometheus`, collectors/base.py PromReader). Why raw
samples and not `query_range`: Prometheus stamps every sample of one scrape with that scrape's
time, so grouping the raw samples by timestamp rebuilds each scrape exactly as the server served
it, and each is fed through the direct collector's own conversion (gauges, counter rates,
windowed histogram quantiles). The rows are the ones the direct scrape would have stored,
stamped with Prometheus's scrape times. A scrape Prometheus missed (server down, network) has no
samples, so nothing is stored for it: gaps stay gaps, never the last value carried forward (what
`query_range` does for up to 5 minutes).

The labels Prometheus added (the target's job, instance and relabelled labels, read from `up`)
are stripped first, so rank labels (`dp_rank`, `tp_rank`, ...) are judged as on the server.

State: `prometheus_source:<server_id>` -> {"pos": end of the last window read (s), "last": newest
sample time seen (s), "since": where reading began (s), "window": the conversion's window state}, saved through ctx like the log
tailer's offset, so a poll that fails moves nothing forward and a restart resumes where it left.
Windows end `settle` seconds before now (one scrape interval: Prometheus writes a scrape only
after reading it, within its scrape_timeout <= scrape_interval), and read at most `max_window_s`
(catch-up after downtime goes in bounded steps; at most `max_backlog_s` back).

| key | unit | meaning | cross-check |
|---|---|---|---|
| metrics.* | as the direct scrape | exactly the direct metrics collector's keys | `curl $PROM/api/v1/query?query=<metric>{instance="h:p"}` |
| prometheus.staleness_s | s | age of the newest sample of the engine's series Prometheus holds for the server, at poll time | `time() - timestamp(<metric>{...})` |

The scrape interval (for `settle` and the staleness figure's meaning) is the target's
`scrapeInterval` from /api/v1/targets, 15 s when Prometheus does not say.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from collectors.base import (
    CollectorContext,
    CollectorError,
    EventRow,
    PollResult,
    PromReader,
    SampleRow,
    ServerTarget,
)
from collectors.engines import DEFAULT_ENGINE, get_engine
from collectors.fanout import ServerPool
from collectors.prometheus_api import PromClient, ScrapeTarget, Series, TooLarge, matchers
from storage import series_keys as sk

SOURCE = "prometheus"
STALENESS_KEY = sk.PROMETHEUS_STALENESS_S
WAIT_S = 2.0  # a poll waits this long for its servers; a slower read is handed in by a later poll
TARGET_TTL_S = 300.0  # re-read a server's scrape target (interval, labels) this often, seconds


@dataclass(slots=True)
class _Known:
    target: ScrapeTarget
    read_at: float  # time.monotonic() of the read


class PrometheusSourceCollector:
    """Reads the servers that have a `prometheus_url` through that Prometheus, each `interval_s`."""

    name = "prometheus_source"

    def __init__(self, interval_s: float = 5.0, *, deadline_s: float = 20.0,
                 max_window_s: float = 600.0, first_window_s: float = 300.0,
                 max_backlog_s: float = 86400.0, max_bytes: int | None = None) -> None:
        """`max_window_s`: seconds of samples read per poll at most (catch-up); `first_window_s`:
        history read on a server's first poll; `max_backlog_s`: never further back than this;
        `deadline_s`: one API call in total; `max_bytes`: one API answer (default BODY_CAP)."""
        self.interval_s = interval_s
        self.deadline_s = deadline_s
        self.max_window_s = max_window_s
        self.first_window_s = first_window_s
        self.max_backlog_s = max_backlog_s
        self.max_bytes = max_bytes
        self._clients: dict[str, PromClient] = {}
        self._known: dict[tuple[str, str], _Known] = {}
        self._last_error: dict[int, str] = {}
        self.max_series: int | None = None  # samples per server per scrape converted; None: the engine's default
        self.max_rank_keys: int | None = None  # None: the engine's default
        self._servers = ServerPool(self.name)
        self._readers: dict[str, PromReader] = {}  # engine name -> its reader (holds its episodes)

    def state_key(self, server_id: int) -> str:
        return f"{self.name}:{server_id}"

    def poll(self, ctx: CollectorContext) -> PollResult:
        servers = [s for s in ctx.servers if s.prometheus_url and s.serving]
        # every server at once; a read still running after WAIT_S is handed in by a later poll
        fan = self._servers.poll_servers(ctx, servers, self._poll_server, wait_s=WAIT_S)
        result = fan.result
        failures: list[str] = []
        for server, exc in fan.failed:
            msg = str(exc) if isinstance(exc, CollectorError) else (
                f"Server {server.name!r}: reading it through Prometheus failed "
                f"({type(exc).__name__}: {exc}).")
            failures.append(msg)
            self._known.pop(self._known_key(server), None)  # re-read the target next time
            if self._last_error.get(server.id) != msg:
                self._last_error[server.id] = msg
                result.events.append(EventRow(ctx.now(), server.id, "collector_error", msg,
                                              launch_id=server.launch_id))
        for server in fan.done:
            self._last_error.pop(server.id, None)
        if failures and len(failures) == len(servers) and not result.samples:
            raise CollectorError("; ".join(failures))
        return result

    def configure(self, runner: dict[str, Any]) -> None:
        """The `runner.metrics_max_series` / `_max_rank_keys` settings, as the direct scrape."""
        if runner.get("metrics_max_series") is not None:
            self.max_series = int(runner["metrics_max_series"])
        if runner.get("metrics_max_rank_keys") is not None:
            self.max_rank_keys = int(runner["metrics_max_rank_keys"])

    def _reader(self, server: ServerTarget) -> PromReader:
        """The server's engine's reader; CollectorError when that engine has none."""
        name = server.engine or DEFAULT_ENGINE
        if name not in self._readers:
            engine = get_engine(name)
            if engine.prometheus is None:
                raise CollectorError(f"Server {server.name!r}: Pitwall cannot read {engine.display_name}'s series "
                                     "through Prometheus; remove its prometheus_url so its /metrics is scraped directly.")
            self._readers[name] = engine.prometheus()
        return self._readers[name]

    def _client(self, url: str) -> PromClient:
        if url not in self._clients:
            kw: dict[str, Any] = {"deadline_s": self.deadline_s}
            if self.max_bytes is not None:
                kw["max_bytes"] = self.max_bytes
            self._clients[url] = PromClient(url, **kw)
        return self._clients[url]

    @staticmethod
    def _known_key(server: ServerTarget) -> tuple[str, str]:
        return (str(server.prometheus_url).rstrip("/"), server.prometheus_selector or "")

    def _target(self, client: PromClient, server: ServerTarget, selector: str) -> ScrapeTarget:
        key = self._known_key(server)
        known = self._known.get(key)
        if known is None or time.monotonic() - known.read_at > TARGET_TTL_S:
            target = client.target(selector)
            if target is None:
                raise CollectorError(
                    f"Server {server.name!r}: selector {{{selector}}} matches no target in "
                    f"Prometheus {client.url} (no `up` series); set prometheus_selector to the "
                    "labels its /targets page shows for this server (e.g. instance=\"host:port\")."
                )
            known = self._known[key] = _Known(target, time.monotonic())
        return known.target

    def _poll_server(self, ctx: CollectorContext, server: ServerTarget) -> PollResult:
        selector = matchers(server.prometheus_selector or "")
        if not selector:
            raise CollectorError(f"Server {server.name!r} has a prometheus_url but an empty "
                                 "prometheus_selector; set label matchers such as instance=\"host:port\".")
        reader = self._reader(server)
        client = self._client(str(server.prometheus_url))
        target = self._target(client, server, selector)
        key = self.state_key(server.id)
        saved = ctx.load_state(key) or {}
        now = ctx.now()
        end = now - target.interval_s
        pos = saved.get("pos")
        start = float(pos) if isinstance(pos, int | float) else end - self.first_window_s
        start = max(start, end - self.max_backlog_s)
        end = min(end, start + self.max_window_s)
        # when Pitwall began reading this server (not the history it read back to): "no series"
        # is judged 3 scrape intervals after it, so a server that just became ready, which
        # Prometheus has not scraped yet, is not reported
        since = float(saved.get("since", now))
        last = saved.get("last") if isinstance(saved.get("last"), int | float) else None
        window = saved.get("window")
        out = PollResult()
        if end > start:
            series = self._read(client, server, reader, selector, start, end, target.interval_s)
            converted, window, newest = reader.convert(
                server, series, set(target.labels), start, window, now,
                self.max_series if self.max_series is not None else reader.max_series,
                self.max_rank_keys if self.max_rank_keys is not None else reader.max_rank_keys)
            out.extend(converted)
            if newest is not None:
                last = newest
            elif last is None and end - since >= 3 * target.interval_s:
                self._no_series(client, server, reader, selector, target)
        if end > start or pos is None:
            ctx.save_state(key, {"pos": max(start, end), "last": last, "window": window,
                                 "since": since})
        if last is not None:
            out.samples.append(SampleRow(now, server.id, STALENESS_KEY, max(0.0, now - last),
                                         SOURCE, server.launch_id))
        return out

    def _read(self, client: PromClient, server: ServerTarget, reader: PromReader, selector: str,
              start: float, end: float, interval_s: float) -> list[Series]:
        """The raw samples of (start, end]; an answer over the cap is read again in halves down
        to a few scrape intervals, then reported."""
        span = end - start
        while True:
            try:
                found: list[Series] = []
                t = start
                while t < end:
                    stop = min(end, t + span)
                    found.extend(client.raw(f"{reader.names},{selector}", stop, stop - t))
                    t = stop
                return found
            except TooLarge as exc:
                if span <= 4 * interval_s:
                    raise CollectorError(f"Server {server.name!r}: {exc}") from exc
                span /= 2

    def _no_series(self, client: PromClient, server: ServerTarget, reader: PromReader, selector: str,
                   target: ScrapeTarget) -> None:
        """Nothing read and nothing ever read: say why (target down, or none of the engine's series)."""
        fresh = client.target(selector) or target
        if fresh.health == "up":
            raise CollectorError(
                f"Server {server.name!r}: Prometheus {client.url} scrapes it ({{{selector}}}) but "
                f"holds no {reader.series_label} series for it; {reader.no_series_hint}."
            )
        raise CollectorError(
            f"Server {server.name!r}: Prometheus {client.url} reports its target down (up=0) "
            f"and holds no {reader.series_label} samples for it; check the server and Prometheus's /targets page."
        )

    def close(self) -> None:
        self._servers.close()
        for c in self._clients.values():
            c.close()
        self._clients.clear()
