"""The runner's own /metrics answers only requests addressed to it (DNS-rebinding guard): real
HTTP requests to a real MetricsServer on 127.0.0.1, one with `Host: evil.example`."""

from __future__ import annotations

import http.client

import pytest
from prometheus_client.core import GaugeMetricFamily

from runner.own_metrics import MetricsServer, allowed_host, split_host


class _One:
    def collect(self):
        yield GaugeMetricFamily("pitwall_test_up", "A test gauge.", value=1)


@pytest.fixture
def server():
    srv = MetricsServer(_One(), host="127.0.0.1", port=0)  # type: ignore[arg-type]
    srv.start()
    yield srv
    srv.close()


def _get(port: int, host: str | None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", "/metrics", skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def test_a_rebound_name_is_refused_with_one_line(server):
    status, body = _get(server.port, f"evil.example:{server.port}")
    assert status == 421
    assert body.count("\n") == 1 and "'evil.example:" in body and "DNS-rebinding guard" in body
    assert "pitwall_test_up" not in body
    assert _get(server.port, "evil.example")[0] == 421


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "LOCALHOST"])
def test_loopback_names_with_the_port_are_answered(server, name):
    status, body = _get(server.port, f"{name}:{server.port}")
    assert status == 200 and "pitwall_test_up 1.0" in body


def test_a_loopback_name_with_another_port_is_refused(server):
    assert _get(server.port, f"127.0.0.1:{server.port + 1}")[0] == 421


def test_split_host():
    assert split_host("[::1]:9464") == ("::1", 9464)
    assert split_host("Example.COM.:80") == ("example.com", 80)
    assert split_host("::1") == ("::1", None)


def test_allowed_host_rules():
    assert allowed_host("[::1]:9464", bound="127.0.0.1", port=9464)
    assert not allowed_host("10.0.0.5:9464", bound="127.0.0.1", port=9464)  # loopback bind: names only
    assert allowed_host("10.0.0.5:9464", bound="0.0.0.0", port=9464)  # an address cannot be rebound
    assert allowed_host("node-3.lan:9464", bound="node-3.lan", port=9464)
    assert not allowed_host("evil.example:9464", bound="0.0.0.0", port=9464)
    assert allowed_host(None, bound="127.0.0.1", port=9464)  # no Host: not a browser
    assert allowed_host("localhost", bound="127.0.0.1", port=80)
