"""Pitwall's own Prometheus `/metrics`, served by the runner (settings `metrics.port`,
`metrics.host`; loopback by default, off when the port is 0).

The figures are read from storage at scrape time by a prometheus_client collector that the
services layer builds (dashboard/services/own_metrics.py), so a scrape always sees what the
runner last stored and the scheduler loop does no extra work. The HTTP server is
prometheus_client's own, in its daemon thread; `close()` stops it with the runner.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.registry import Collector

log = logging.getLogger("pitwall.metrics")


class MetricsServer:
    """`/metrics` of one registry holding `collector`, on host:port once `start()` ran."""

    def __init__(self, collector: Collector, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._server: Any = None
        self._thread: Any = None

    def start(self) -> None:
        """Listen (once); a port in use is logged with what to do and the runner goes on without it."""
        if self._server is not None:
            return
        try:
            self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as exc:
            log.error("Pitwall's /metrics could not listen on %s:%s (%s); pick a free metrics.port "
                      "(PITWALL_METRICS_PORT) or 0 to turn it off.", self.host, self.port, exc)
            return
        self.port = int(self._server.server_address[1])
        log.info("Pitwall's own /metrics on http://%s:%s/metrics", self.host, self.port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
