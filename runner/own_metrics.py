"""Pitwall's own Prometheus `/metrics`, served by the runner (settings `metrics.port`,
`metrics.host`; loopback by default, off when the port is 0).

The figures are read from storage at scrape time by a prometheus_client collector
(`PitwallCollector`, below), so a scrape always sees what the runner last stored and the
scheduler loop does no extra work. The HTTP server is a threading WSGI
server in a daemon thread around prometheus_client's WSGI app; `close()` stops it with the runner.

DNS rebinding guard: a web page can make a browser send requests to 127.0.0.1 under its own name
(evil.example resolved to 127.0.0.1), so a request is answered only when its Host header names
this server (`allowed_host`): bound to loopback, `127.0.0.1`, `localhost` or `[::1]` with the
port listened on; bound elsewhere, the configured `metrics.host`, this machine's name, or any IP
address (an address in the Host header cannot be rebound). Any other Host gets 421 and one line
saying why. Cross-check: `curl -s -o /dev/null -w '%{http_code}' -H 'Host: evil.example'
http://127.0.0.1:$PORT/metrics` prints 421.

Series (all prefixed `pitwall_`; `server` is the configured name):

- `server_up{server}`: 1 health check passing, 0 failing, absent with no recent health sample.
- `request_ttft_seconds{server,source,quantile}` (source `probe` | `canary`, quantile 0.5 / 0.99)
  and `request_success_ratio{server,source}`, `requests{server,source}`: over the last
  WINDOW_S of probe requests and canary samples.
- `grade{server,dimension}`: the scorecard grade of latency, throughput, cost, stability as
  1 pass, 0.5 warn, 0 fail (absent: no grade yet).
- `events_total{server,kind}`: events stored per kind (within retention).
- `alerts_firing{server,rule,severity}`: 1 per firing alert; `alerts_firing_count`.
- `collector_lag_seconds{server}`: age of the server's newest sample.
- runner health (of the runner serving it, runner.host): `runner_heartbeat_age_seconds`, `runner_cpu_percent`, `runner_loop_lag_seconds`,
  `runner_rows_per_second`, `alerts_last_eval_age_seconds`.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.engine import Engine

from runner.alerts.engine import STATE_KEY
from runner.self_metrics import SELF_SERVER_ID, self_source
from storage import repo
from storage import series_keys as sk
from storage.kinds import OPEN_ALERT_STATES
from storage.models import Server

log = logging.getLogger("pitwall.metrics")

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: (engine, server, now, settings) -> {dimension: pass|warn|fail|none}: the scorecard's grades
Grades = Callable[[Engine, Server, float, Any], dict[str, str]]


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    return host.lower() in _LOOPBACK_NAMES or (_is_ip(host) and ipaddress.ip_address(host).is_loopback)


def split_host(header: str) -> tuple[str, int | None]:
    """A Host header as (name lower case, port or None): "[::1]:9464" -> ("::1", 9464)."""
    h = header.strip().lower()
    if h.startswith("["):
        name, _, rest = h[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif h.count(":") == 1:
        name, _, port = h.partition(":")
    else:
        name, port = h, ""
    return name.rstrip("."), (int(port) if port.isdigit() else None)


def allowed_host(header: str | None, *, bound: str, port: int) -> bool:
    """Whether a request with this Host header is addressed to a server bound to bound:port.

    No Host header at all (HTTP/1.0 tools; browsers always send one) is allowed; a header without
    a port means port 80."""
    if header is None:
        return True
    name, hport = split_host(header)
    if (hport or 80) != port:
        return False
    if _is_loopback(bound):
        return name in _LOOPBACK_NAMES or name == bound.lower()
    machine = {socket.gethostname().lower(), socket.getfqdn().lower()}
    return _is_ip(name) or name in _LOOPBACK_NAMES or name == bound.lower() or name in machine


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # one thread per request, not joined at close


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


class MetricsServer:
    """`/metrics` of one registry holding `collector`, on host:port once `start()` ran."""

    def __init__(self, collector: Collector, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def _app(self) -> Callable[[dict[str, Any], Any], Iterable[bytes]]:
        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            host = environ.get("HTTP_HOST")
            if allowed_host(host, bound=self.host, port=self.port):
                return metrics(environ, start_response)
            body = (f"Host {host!r} does not name this server ({self.host}:{self.port}); Pitwall's "
                    "/metrics answers only requests addressed to it (DNS-rebinding guard).\n").encode()
            start_response("421 Misdirected Request", [("Content-Type", "text/plain; charset=utf-8"),
                                                       ("Content-Length", str(len(body)))])
            return [body]

        return app

    def start(self) -> None:
        """Listen (once); a port in use is logged with what to do and the runner goes on without it."""
        if self._server is not None:
            return
        try:
            family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM,
                                        flags=socket.AI_PASSIVE)[0][0]
            server_class = type("_BoundServer", (_Server,), {"address_family": family})
            server: WSGIServer = make_server(self.host, self.port, self._app(), server_class, handler_class=_Quiet)
        except OSError as exc:
            log.error("Pitwall's /metrics could not listen on %s:%s (%s); pick a free metrics.port "
                      "(PITWALL_METRICS_PORT) or 0 to turn it off.", self.host, self.port, exc)
            return
        self.port = int(server.server_address[1])
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="pitwall-metrics", daemon=True)
        self._thread.start()
        log.info("Pitwall's own /metrics on http://%s:%s/metrics", self.host, self.port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


WINDOW_S = 300.0
GRADE_VALUE = {"pass": 1.0, "warn": 0.5, "fail": 0.0}
RUNNER_SERIES = {sk.SELF_CPU_PCT: ("runner_cpu_percent", "CPU of the runner process, percent of one core."),
                 sk.SELF_LOOP_LAG_S: ("runner_loop_lag_seconds", "Worst scheduler loop lag of the last interval."),
                 sk.SELF_ROWS_PER_S: ("runner_rows_per_second", "Rows the runner wrote per second.")}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class PitwallCollector(Collector):
    """A prometheus_client collector over storage; one scrape = one read of each figure."""

    def __init__(self, engine: Engine, settings: Any = None, grades: Grades | None = None) -> None:
        self.engine, self.settings, self.grades = engine, settings, grades

    def collect(self) -> Iterator[Metric]:
        try:
            yield from self._collect(time.time())
        except Exception as exc:  # a locked or restarting database: an empty scrape, said in the log
            log.warning("Pitwall /metrics could not read storage: %s", exc)

    def _collect(self, now: float) -> Iterator[Metric]:
        up = GaugeMetricFamily("pitwall_server_up", "Health check passing (1) or failing (0).", labels=["server"])
        ttft = GaugeMetricFamily("pitwall_request_ttft_seconds", f"TTFT of probe / canary requests, last {WINDOW_S:.0f} s.",
                                 labels=["server", "source", "quantile"])
        ok = GaugeMetricFamily("pitwall_request_success_ratio", "Share of probe / canary requests that succeeded.",
                               labels=["server", "source"])
        count = GaugeMetricFamily("pitwall_requests", f"Probe / canary requests in the last {WINDOW_S:.0f} s.",
                                  labels=["server", "source"])
        grade = GaugeMetricFamily("pitwall_grade", "Scorecard grade: 1 pass, 0.5 warn, 0 fail.",
                                  labels=["server", "dimension"])
        events = CounterMetricFamily("pitwall_events", "Events stored, by kind (within retention).",
                                     labels=["server", "kind"])
        lag = GaugeMetricFamily("pitwall_collector_lag_seconds", "Age of the newest sample of a server.",
                                labels=["server"])
        for s in repo.list_servers(self.engine):
            if s.id is None:
                continue
            name = s.name
            health = repo.latest_samples(self.engine, server_id=s.id, metrics=[sk.API_HEALTH_OK], max_age_s=120.0)
            if sk.API_HEALTH_OK in health:
                up.add_metric([name], 1.0 if health[sk.API_HEALTH_OK][1] >= 1 else 0.0)
            for source, (oks, firsts) in (("probe", self._probe(s.id, now)), ("canary", self._canary(s.id, now))):
                if not oks:
                    continue
                count.add_metric([name, source], float(len(oks)))
                ok.add_metric([name, source], sum(oks) / len(oks))
                for q in (0.5, 0.99) if firsts else ():
                    ttft.add_metric([name, source, str(q)], _quantile(firsts, q))
            g = self.grades(self.engine, s, now, self.settings) if self.grades is not None else {}
            for dim, value in g.items():
                if value in GRADE_VALUE:
                    grade.add_metric([name, dim], GRADE_VALUE[value])
            for kind, n in sorted(repo.count_events(self.engine, server_id=s.id, since=0.0).items()):
                events.add_metric([name, kind], float(n))
            newest = repo.newest_sample_ts(self.engine, server_id=s.id, since=0.0)
            if newest is not None:
                lag.add_metric([name], max(0.0, now - newest))
        yield from (up, ttft, ok, count, grade, events, lag)
        yield from self._alerts()
        yield from self._runner(now)

    def _probe(self, server_id: int, now: float) -> tuple[list[bool], list[float]]:
        """(ok per measured probe request, TTFT of those that have one) in the window."""
        rows = repo.probe_outcomes(self.engine, server_id=server_id, since=now - WINDOW_S)
        return [good for _, good, _, _ in rows], [t for _, good, t, _ in rows if good and t is not None]

    def _canary(self, server_id: int, now: float) -> tuple[list[bool], list[float]]:
        """(ok per canary request, TTFT per canary request that streamed) in the window."""
        _, oks = repo.sample_points(self.engine, server_id=server_id, metric=sk.CANARY_OK, since=now - WINDOW_S)
        _, firsts = repo.sample_points(self.engine, server_id=server_id, metric=sk.CANARY_TTFT_S, since=now - WINDOW_S)
        return [bool(v >= 1) for v in oks], [float(v) for v in firsts]

    def _alerts(self) -> Iterator[Metric]:
        names = {int(s.id): s.name for s in repo.list_servers(self.engine, include_retired=True) if s.id is not None}
        firing = GaugeMetricFamily("pitwall_alerts_firing", "1 per firing alert.", labels=["server", "rule", "severity"])
        n = 0
        for a in repo.list_alerts(self.engine, states=OPEN_ALERT_STATES, limit=1000):
            if a.state == "firing":
                firing.add_metric([names.get(a.server_id or -1, ""), a.rule, a.severity], 1.0)
                n += 1
        yield firing
        yield GaugeMetricFamily("pitwall_alerts_firing_count", "Alerts firing now.", value=float(n))

    def _runner(self, now: float) -> Iterator[Metric]:
        host = str((getattr(self.settings, "runner", None) or {}).get("host") or socket.gethostname())
        lease = repo.get_lease(self.engine, scope=repo.host_scope(host))  # this runner's host lease
        beat = getattr(lease, "heartbeat_at", None) if lease is not None else None
        if beat is not None:
            yield GaugeMetricFamily("pitwall_runner_heartbeat_age_seconds", "Seconds since the runner's last heartbeat.",
                                    value=max(0.0, now - float(beat)))
        latest = repo.latest_samples(self.engine, server_id=SELF_SERVER_ID, metrics=list(RUNNER_SERIES),
                                     source=self_source(host))
        for metric, (series, text) in RUNNER_SERIES.items():
            if metric in latest:
                yield GaugeMetricFamily(f"pitwall_{series}", text, value=latest[metric][1])
        last = repo.load_state(self.engine, key=STATE_KEY) or {}
        at = max((float(v.get("at") or 0.0) for v in last.values() if isinstance(v, dict)), default=0.0)
        if at:
            yield GaugeMetricFamily("pitwall_alerts_last_eval_age_seconds", "Seconds since the last alert evaluation.",
                                    value=max(0.0, now - at))


def build_exporter(settings: Any, engine: Engine, grades: Grades | None = None) -> MetricsServer | None:
    """The runner's `/metrics` from settings `metrics.port` / `metrics.host`; None when the port is 0.
    `grades`: the scorecard's grade per dimension of a server (the CLI's wiring injects it: the
    runner does not import the scorecard); without it no `pitwall_grade` series."""
    port = int((settings.metrics or {}).get("port") or 0)
    if port <= 0:
        return None
    host = str(settings.metrics.get("host") or "127.0.0.1")
    return MetricsServer(PitwallCollector(engine, settings, grades), host=host, port=port)
