"""`--sim-kind image`: the diffusion server API, a real PNG, its log style and metrics (§6)."""

from __future__ import annotations

import base64
import re
import struct
import zlib

from conftest import FAST, StartSim
from prometheus_client.parser import text_string_to_metric_families
from sim_forms import DIFFUSION_PREFIX

from simulator.image_server import png_bytes


def test_png_is_valid() -> None:
    png = png_bytes(3, 2, seed=7)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    length, tag = struct.unpack(">I4s", png[8:16])
    assert tag == b"IHDR" and struct.unpack(">II", png[16:24]) == (3, 2)
    idat_at = png.index(b"IDAT")
    (n,) = struct.unpack(">I", png[idat_at - 4:idat_at])
    raw = zlib.decompress(png[idat_at + 4: idat_at + 4 + n])
    assert len(raw) == 2 * (1 + 3 * 3)  # 2 rows x (filter byte + 3 px x RGB)


def test_image_generation_api_logs_and_metrics(start_sim: StartSim) -> None:
    sim = start_sim(*FAST, "--sim-kind", "image", "--enable-metrics", model="Qwen/Qwen-Image")
    with sim.client() as c:
        r = c.post("/v1/images/generations", json={
            "prompt": "a red fox", "size": "256x128", "num_inference_steps": 4, "n": 2,
            "response_format": "b64_json"})
        assert r.status_code == 200
        out = r.json()
        assert {"id", "created", "data", "inference_time_s", "peak_memory_mb", "usage"} <= set(out)
        assert len(out["data"]) == 2 and out["usage"]["image_count"] == 2
        png = base64.b64decode(out["data"][0]["b64_json"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", png[16:24]) == (256, 128)
        url = c.post("/v1/images/generations", json={"prompt": "x", "size": "64x64",
                                                     "num_inference_steps": 2}).json()
        path = url["data"][0]["url"].split(str(sim.port), 1)[1]
        assert c.get(path).content[:8] == b"\x89PNG\r\n\x1a\n"
        assert c.post("/v1/images/generations", json={"prompt": "x", "size": "big"}
                      ).status_code == 400
        text = c.get("/metrics").text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["sglang:diffusion_requests"].type == "counter"
    assert fams["sglang:diffusion_request_latency_seconds"].type == "histogram"
    assert fams["sglang:diffusion_num_queue_reqs"].type == "gauge"
    done = [s for s in fams["sglang:diffusion_requests"].samples
            if s.name.endswith("_total") and s.labels["is_warmup"] == "false"]
    assert sum(s.value for s in done) == 2
    assert {"role", "replica", "status", "is_warmup"} == set(done[0].labels)
    log = sim.log()
    msgs = [m.group("msg") for m in map(DIFFUSION_PREFIX.match, log.splitlines()) if m]
    for stage in ("TextEncodingStage", "DenoisingStage", "DecodingStage"):
        assert f"[{stage}] started..." in msgs
        assert any(re.fullmatch(rf"\[{stage}\] finished in \d+\.\d{{4}} seconds", m)
                   for m in msgs)
    assert "The server is fired up and ready to roll!" in msgs
    assert any(re.fullmatch(r"Peak memory usage: [\d.]+ MB", m) for m in msgs)
