"""collectors.http.get_capped: a total deadline and a body cap on every control-plane read."""

from __future__ import annotations

import pytest
from hostile_http import MIB, HostileServer

from collectors.base import CollectorError
from collectors.http import (
    BODY_CAPS,
    CapExceeded,
    DeadlineExceeded,
    body_cap,
    capped_client,
    get_capped,
)


def test_caps_table_names_every_endpoint_once():
    assert body_cap("/metrics") == 32 * MIB
    assert body_cap("/health") == 64 * 1024
    assert body_cap("/server_info") == 4 * MIB
    assert body_cap("/unknown") == 4 * MIB
    assert all(v > 0 for v in BODY_CAPS.values())


def test_dripping_head_hits_the_total_deadline():
    # one byte every 0.2 s: no single read ever times out (5 s), only the total deadline ends it
    with HostileServer("drip", drip_s=0.2) as srv:
        client = capped_client(timeout_s=5.0)
        with pytest.raises(DeadlineExceeded) as err:
            get_capped(client, srv.url + "/metrics", deadline_s=1.5)
        client.close()
    assert isinstance(err.value, CollectorError)
    assert "/metrics took longer than 1.5 s in total (limit)" in str(err.value)


def test_dripping_head_without_a_client_also_ends():
    with HostileServer("drip", drip_s=0.2) as srv, pytest.raises(DeadlineExceeded):
        get_capped(None, srv.url + "/health", deadline_s=1.0)


def test_big_body_hits_the_cap_without_reading_it_all():
    # 64 MiB offered, 1 MiB cap
    with HostileServer("big", big_bytes=64 * MIB) as srv:
        with pytest.raises(CapExceeded) as err:
            get_capped(None, srv.url + "/metrics", deadline_s=10.0, max_bytes=1 * MIB)
    assert "/metrics body passed 1 MiB (limit)" in str(err.value)


def test_small_body_is_read_whole():
    with HostileServer("big", big_bytes=1000) as srv:
        resp = get_capped(None, srv.url + "/metrics", deadline_s=10.0)
        health = get_capped(None, srv.url + "/health", deadline_s=10.0)
    assert resp.status_code == 200 and len(resp.content) == 1000
    assert health.status_code == 200 and health.content == b""
