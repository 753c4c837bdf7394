"""collectors.http.get_capped: a total deadline and a body cap on every control-plane read, the
cap counted after decompression (compression bombs hold at most the cap plus one piece)."""

from __future__ import annotations

import pytest
from hostile_http import MIB, HostileServer, TracedPeak, bomb

from collectors.base import CollectorError
from collectors.http import (
    BODY_CAPS,
    CapExceeded,
    DeadlineExceeded,
    body_cap,
    capped_client,
    get_capped,
)
from collectors.http_decode import EncodingError


def test_caps_table_names_every_endpoint_once():
    assert body_cap("/metrics") == 16 * MIB
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
    assert "/metrics body passed 1 MiB (limit), counted after decompression" in str(err.value)


@pytest.mark.parametrize(("mode", "encoding"), [("gzipbomb", "gzip, gzip"), ("deflatebomb", "deflate, gzip")])
def test_compression_bomb_is_capped_after_decompression(mode, encoding):
    # ~3 KiB on the wire that inflate to 256 MiB; a 1 MiB cap holds at most 1 MiB plus one 64 KiB
    # piece (and zlib's 32 KiB windows): well under 16 MiB, where decoding whole chunks peaks at 256 MiB+
    bomb(encoding, 256 * MIB)  # built before measuring
    with HostileServer(mode) as srv:
        with TracedPeak() as peak, pytest.raises(CapExceeded) as err:
            get_capped(None, srv.url + "/metrics", deadline_s=20.0, max_bytes=1 * MIB)
        sent = srv.last_headers
    assert peak.bytes < 16 * MIB, f"held {peak.bytes / MIB:.0f} MiB reading a 1 MiB-capped bomb"
    assert "/metrics body passed 1 MiB (limit), counted after decompression" in str(err.value)
    # only what Pitwall decodes is asked for
    assert sent.get("Accept-Encoding") == "gzip, deflate"


def test_a_bomb_under_the_default_metrics_cap_is_read_whole():
    # 2 MiB inflated, far under /metrics' 16 MiB: decoded exactly, stacked stages in order
    with HostileServer("gzipbomb", bomb_bytes=2 * MIB) as srv:
        resp = get_capped(None, srv.url + "/metrics", deadline_s=20.0)
    assert len(resp.content) == 2 * MIB
    assert resp.content.startswith(b'sglang:num_running_reqs{model_name="m"} 1\n')


def test_broken_gzip_is_a_clear_error_naming_the_url():
    with HostileServer("badgzip") as srv, pytest.raises(EncodingError) as err:
        get_capped(None, srv.url + "/metrics", deadline_s=10.0)
    assert isinstance(err.value, CollectorError)
    msg = str(err.value)
    assert srv.url + "/metrics" in msg and "broken gzip body" in msg


def test_an_encoding_pitwall_does_not_decode_is_refused():
    with HostileServer("brotli") as srv, pytest.raises(EncodingError) as err:
        get_capped(None, srv.url + "/server_info", deadline_s=10.0)
    assert "Content-Encoding 'br'" in str(err.value) and srv.url in str(err.value)


def test_raw_bytes_that_inflate_to_nothing_have_their_own_cap():
    # 64 MiB of empty deflate blocks decode to 0 bytes; the raw cap of a 1 MiB read
    # (1 MiB + 1/64 of it + 64 KiB = 1104 KiB) stops it long before the end
    with HostileServer("emptygzip", big_bytes=64 * MIB) as srv, pytest.raises(CapExceeded) as err:
        get_capped(None, srv.url + "/metrics", deadline_s=20.0, max_bytes=1 * MIB)
    assert "/metrics compressed body passed 1104 KiB (limit)" in str(err.value)


def test_small_body_is_read_whole():
    with HostileServer("big", big_bytes=1000) as srv:
        resp = get_capped(None, srv.url + "/metrics", deadline_s=10.0)
        health = get_capped(None, srv.url + "/health", deadline_s=10.0)
    assert resp.status_code == 200 and len(resp.content) == 1000
    assert health.status_code == 200 and health.content == b""
