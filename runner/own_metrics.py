"""Pitwall's own Prometheus `/metrics`, served by the runner (settings `metrics.port`,
`metrics.host`; loopback by default, off when the port is 0).

The figures are read from storage at scrape time by a prometheus_client collector that the
services layer builds (dashboard/services/own_metrics.py), so a scrape always sees what the
runner last stored and the scheduler loop does no extra work. The HTTP server is a threading WSGI
server in a daemon thread around prometheus_client's WSGI app; `close()` stops it with the runner.

DNS rebinding guard: a web page can make a browser send requests to 127.0.0.1 under its own name
(evil.example resolved to 127.0.0.1), so a request is answered only when its Host header names
this server (`allowed_host`): bound to loopback, `127.0.0.1`, `localhost` or `[::1]` with the
port listened on; bound elsewhere, the configured `metrics.host`, this machine's name, or any IP
address (an address in the Host header cannot be rebound). Any other Host gets 421 and one line
saying why. Cross-check: `curl -s -o /dev/null -w '%{http_code}' -H 'Host: evil.example'
http://127.0.0.1:$PORT/metrics` prints 421.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.registry import Collector

log = logging.getLogger("pitwall.metrics")

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


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
