"""Every external reader goes through the one bounded read (collectors/http.py get_capped): a
compression bomb from dcgm-exporter, Prometheus, an SGLang server's /server_info and /generate
(the canary) or an alert receiver is stopped at the reader's cap counted after decompression,
with memory bounded, and a broken stream is an error naming the URL."""

from __future__ import annotations

import pytest
from hostile_http import MIB, HostileServer, TracedPeak, bomb

from collectors.base import CollectorError, ServerTarget
from collectors.canary import canary_once
from collectors.gpu_dcgm import DcgmBackend
from collectors.http import capped_client
from collectors.prometheus_api import PromClient, TooLarge
from collectors.sglang.api import SGLangApiCollector
from runner.alerts.deliver import Receiver, post

BOMB = 256 * MIB  # each reader's cap is at most 64 MiB; inflating whole chunks would hold 256 MiB+
HELD = 96 * MIB  # the most any of these reads may hold: its cap (<= 64 MiB) and some pieces


@pytest.fixture(scope="module", autouse=True)
def _bomb_built() -> None:
    bomb("gzip, gzip", BOMB)  # built once, before any memory is measured


def test_dcgm_exporter_bomb():
    with HostileServer("gzipbomb", bomb_bytes=BOMB) as srv, TracedPeak() as peak:
        with pytest.raises(CollectorError) as err:
            DcgmBackend(srv.url + "/metrics", deadline_s=20.0).read_raw()
    assert peak.bytes < HELD, f"held {peak.bytes / MIB:.0f} MiB"
    assert "body passed 16 MiB (limit), counted after decompression" in str(err.value)


def test_prometheus_bomb():
    with HostileServer("gzipbomb", bomb_bytes=BOMB) as srv, TracedPeak() as peak:
        with pytest.raises(TooLarge) as err:
            PromClient(srv.url, deadline_s=20.0).api("query", {"query": "up"})
    assert peak.bytes < HELD, f"held {peak.bytes / MIB:.0f} MiB"
    assert "passed 64 MiB (limit), counted after decompression" in str(err.value)


def test_prometheus_broken_gzip_names_prometheus_and_the_encoding():
    with HostileServer("badgzip") as srv, pytest.raises(CollectorError) as err:
        PromClient(srv.url, deadline_s=10.0).api("query", {"query": "up"})
    msg = str(err.value)
    assert msg.startswith(f"Prometheus {srv.url}:") and "broken gzip body" in msg
    assert "shorter window" not in msg  # not a size or time problem


def test_sglang_health_bomb():
    api = SGLangApiCollector(timeout_s=20.0, deadline_s=20.0)
    with HostileServer("gzipbomb", bomb_bytes=BOMB) as srv, TracedPeak() as peak:
        ok, _, detail = api.check_health(ServerTarget(id=1, name="s", base_url=srv.url))
    assert peak.bytes < HELD, f"held {peak.bytes / MIB:.0f} MiB"
    assert not ok and "/health body passed 64 KiB (limit), counted after decompression" in detail


@pytest.mark.parametrize("kind", ["llm", "image"])
def test_canary_bomb_is_too_large(kind):
    target = ServerTarget(id=1, name="s", base_url="", kind=kind)
    with HostileServer("gzipbomb", bomb_bytes=BOMB) as srv, capped_client(20.0) as client:
        target.base_url = srv.url
        with TracedPeak() as peak:
            out = canary_once(client, target, 20.0)
    assert peak.bytes < HELD, f"held {peak.bytes / MIB:.0f} MiB"
    assert out["error_kind"] == "too_large"
    assert "passed 4 MiB (limit), counted after decompression" in str(out["detail"])


def test_canary_broken_gzip_is_an_invalid_response():
    with HostileServer("badgzip") as srv, capped_client(10.0) as client:
        out = canary_once(client, ServerTarget(id=1, name="s", base_url=srv.url), 10.0)
    assert out["error_kind"] == "invalid_response" and "broken gzip body" in str(out["detail"])


def test_alert_receiver_bomb_answer():
    with HostileServer("gzipbomb", bomb_bytes=BOMB) as srv, TracedPeak() as peak:
        error = post(Receiver("webhook", srv.url + "/hook/secret"), [{"status": "firing"}],
                     now=0.0, deadline_s=20.0, expire_s=60.0)
    assert peak.bytes < 8 * MIB, f"held {peak.bytes / MIB:.0f} MiB"
    assert error is not None and "passed 64 KiB (limit), counted after decompression" in error
    assert "secret" not in error  # the webhook's path is its credential
