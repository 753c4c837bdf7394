"""dcgm-exporter start-up races (collectors/gpu_dcgm.py DcgmFleet): an exporter that does not
answer yet while Pitwall starts is waited for, not an error; past the grace it is one event whose
advice fits how Pitwall was started (collectors/registry.py dcgm_advice, settings' dcgm_origin).

Real sockets on 127.0.0.1: a port with nothing listening, then a real HTTP server on that port
serving the golden dcgm-exporter payload (the race as the demo has it). The grace is driven by
an explicit clock, never by sleeping.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

from pwtest import free_port

from collectors.base import CollectorContext
from collectors.gpu import GpuCollector
from collectors.gpu_dcgm import DcgmFleet
from collectors.registry import build_collectors, dcgm_advice
from config.settings import load_settings

#: the exporter's read deadline: the real server answers at once, a loaded host may need more; a
#: port with nothing listening is refused at once whatever the deadline
READ_S = 20.0
PAYLOAD = (Path(__file__).resolve().parents[1] / "fixtures" / "dcgm-exporter-4.1.1-4.0.4-h20-mig.prom").read_bytes()


class _Exporter(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(PAYLOAD)))
        self.end_headers()
        self.wfile.write(PAYLOAD)

    def log_message(self, *args: object) -> None:
        pass


def _ctx() -> CollectorContext:
    return CollectorContext(servers=[], load_state=lambda k: None, save_state=lambda k, v: None, now=lambda: 1.0)


def test_an_exporter_starting_after_pitwall_is_waited_for_not_an_error() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    now = [0.0]
    fleet = DcgmFleet([url], deadline_s=READ_S, grace_s=60.0, clock=lambda: now[0])
    collector = GpuCollector(backend_factory=lambda: fleet)
    first = collector.poll(_ctx())  # nothing listens yet: refused
    assert first.events == [] and first.samples == []
    assert fleet.waiting() == [url]
    now[0] = 20.0
    assert collector.poll(_ctx()).events == []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        up = collector.poll(_ctx())  # the exporter came up within the grace: data, and no start-up error
        # (this golden payload has a field written as text: that one is its own event, module doc)
        assert not [e for e in up.events if "did not answer" in e.message]
        assert any(s.metric.startswith("gpu.") for s in up.samples)
        assert fleet.waiting() == []
    finally:
        server.shutdown()
        server.server_close()
    now[0] = 100.0  # it answered once: going away now is an error at once, grace or not
    [gone] = collector.poll(_ctx()).events
    assert gone.kind == "collector_error" and "did not answer" in gone.message


def test_past_the_grace_a_silent_exporter_is_one_event_with_the_demos_advice() -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    now = [0.0]
    fleet = DcgmFleet([url], deadline_s=READ_S, grace_s=60.0, advice=dcgm_advice("demo"), clock=lambda: now[0])
    collector = GpuCollector(backend_factory=lambda: fleet)
    assert collector.poll(_ctx()).events == []
    now[0] = 61.0
    [ev] = collector.poll(_ctx()).events
    assert ev.kind == "collector_error" and ev.severity == "warning"
    # a newcomer running the demo has no pitwall.toml: the advice names the variable and how to make one
    assert "demo" in ev.message and "PITWALL_GPU_DCGM_URL" in ev.message and "create a pitwall.toml" in ev.message
    assert "gpu.dcgm_url in pitwall.toml" not in ev.message
    for t in (63.0, 70.0, 300.0):  # the same state lasting is not a new event
        now[0] = t
        assert collector.poll(_ctx()).events == []


def test_the_advice_follows_where_the_exporter_url_came_from(tmp_path: Path) -> None:
    env = {"PITWALL_DATA_DIR": str(tmp_path / "data"), "PITWALL_DEMO_PORT": "31000"}
    assert load_settings(env=env, cwd=tmp_path).gpu["dcgm_origin"] == "demo"
    with_env = {**env, "PITWALL_GPU_DCGM_URL": "http://node1:9400/metrics"}
    assert load_settings(env=with_env, cwd=tmp_path).gpu["dcgm_origin"] == "PITWALL_GPU_DCGM_URL"
    (tmp_path / "pitwall.toml").write_text('[gpu]\ndcgm_url = "http://node2:9400/metrics"\n', encoding="utf-8")
    origin = load_settings(env=env, cwd=tmp_path).gpu["dcgm_origin"]
    assert origin.endswith("pitwall.toml")
    assert "PITWALL_GPU_DCGM_URL points" in dcgm_advice("PITWALL_GPU_DCGM_URL")
    assert f"in {origin}" in dcgm_advice(origin)
    # the registry hands the advice to the exporters it builds
    [gpu], errors = build_collectors({}, names={"gpu"}, gpu={"dcgm_url": "http://127.0.0.1:9/metrics",
                                                           "dcgm_origin": "demo"})
    assert not errors and isinstance(gpu, GpuCollector)
