"""The ``sglang serve`` diffusion server stand-in (``--sim-kind image``) and its PNG writer.

API (reference §6): POST /v1/images/generations {prompt, size "WxH" | width/height,
num_inference_steps (default 50), n (1, capped at 10), response_format b64_json|url, seed} ->
{id, created, data: [{b64_json | url, revised_prompt, file_path}], inference_time_s,
peak_memory_mb, usage: {prompt_tokens, image_count, ...}}; GET /v1/images/{id}/content;
/health, /health_generate, /model_info, /server_info, /v1/models, /metrics (--enable-metrics).
One request runs at a time (others queue), as in the diffusion scheduler.

Time model (model seconds): per denoising step 2 x params x latent_tokens x 2 (CFG) x n /
(FLOPS x MFU) with latent_tokens = (W/16) x (H/16); text encoding 0.05 s; VAE decoding
0.25 s per megapixel per image. Params: --sim-model-params or the name's ``<N>B``, else 20B
(Qwen-Image). Peak memory = weights (2 B/param) + 2.5 GB per megapixel x n, in MB.

Logs: ``[MM-DD HH:MM:SS] [TextEncodingStage] started...`` / ``... finished in 0.0500 seconds``
for TextEncoding, LatentPreparation, TimestepPreparation, Denoising and Decoding stages (not for
the warm-up request), a tqdm-style bar on stderr, ``Pixel data generated successfully in X
seconds``, ``Peak memory usage: X MB``, ``Completed batch processing. Generated N outputs in X
seconds``, and ``The server is fired up and ready to roll!``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import re
import struct
import sys
import time
import uuid
import zlib
from collections import OrderedDict
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from simulator import lifecycle, logfmt, tokenizer
from simulator.costmodel import GPUS, MFU, parse_params
from simulator.llm_api import json_response
from simulator.metrics import DiffusionMetrics

STAGES = ("TextEncodingStage", "LatentPreparationStage", "TimestepPreparationStage",
          "DenoisingStage", "DecodingStage")


def png_bytes(width: int, height: int, seed: int) -> bytes:
    """A real RGB PNG (8-bit, no interlace) with a seed-dependent gradient."""
    r0, g0, b0 = seed % 256, (seed // 256) % 256, (seed // 65536) % 256
    reds = bytes((r0 + x * 255 // max(width - 1, 1)) % 256 for x in range(width))
    blues = bytes([b0]) * width
    rows = bytearray()
    for y in range(height):
        line = bytearray(3 * width)
        line[0::3] = reds
        line[1::3] = bytes([(g0 + y * 255 // max(height - 1, 1)) % 256]) * width
        line[2::3] = blues
        rows.append(0)  # filter type None
        rows.extend(line)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows, 6))
            + chunk(b"IEND", b""))


def parse_size(body: dict[str, Any]) -> tuple[int, int]:
    w, h = body.get("width"), body.get("height")
    if isinstance(w, int) and isinstance(h, int):
        return w, h
    m = re.fullmatch(r"(\d+)x(\d+)", str(body.get("size") or "1024x1024"))
    if not m:
        raise ValueError(f"size must look like '1024x1024', got {body.get('size')!r}.")
    return int(m.group(1)), int(m.group(2))


class ImageServer:
    def __init__(self, ns: argparse.Namespace, log: logfmt.LogWriter) -> None:
        self.ns = ns
        self.log = log
        self.gpu = GPUS[ns.sim_gpu]
        m = re.search(r"(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", ns.model_path.rsplit("/", 1)[-1])
        self.params = (parse_params(ns.sim_model_params) if ns.sim_model_params else None) or \
            (float(m.group(1)) * 1e9 if m else 20e9)
        self.speed = ns.sim_speed
        self.ready = False
        self.lock = asyncio.Lock()
        self.queued = 0
        self.images: OrderedDict[str, bytes] = OrderedDict()
        self.metrics = DiffusionMetrics() if ns.enable_metrics else None
        self.started_at = time.time()
        self.gpus = max(ns.num_gpus, ns.tp_size)

    def step_time(self, w: int, h: int, n: int) -> float:
        tokens = (w / 16) * (h / 16)
        return 2 * self.params * tokens * 2 * n / (self.gpu.bf16_flops * MFU * self.gpus)

    async def msleep(self, model_s: float) -> None:
        await asyncio.sleep(model_s / self.speed)

    async def startup(self) -> int:
        load_s = self.ns.sim_startup_s if self.ns.sim_startup_s is not None else \
            self.params * 2 / 5e9 + 3.0
        self.log.log(f"Loading pipeline from {self.ns.model_path} on {self.gpus} GPU(s)")
        await self.msleep(load_s)
        self.log.log(f"Pipeline loaded in {load_s:.2f} seconds")
        app = web.Application(middlewares=[lifecycle.make_middleware(self.log, None)])
        self.add_routes(app)
        runner = await lifecycle.bind(app, self.ns.host, self.ns.port, self.log)
        if runner is None:
            return 1
        stop = lifecycle.install_signal_stop()
        await self.generate({"prompt": "warmup", "size": "256x256", "num_inference_steps": 2},
                            warmup=True)
        self.ready = True
        self.log.log("The server is fired up and ready to roll!")
        await stop.wait()
        await lifecycle.shutdown(runner, self.log)
        return 0

    async def generate(self, body: dict[str, Any], *, warmup: bool = False) -> dict[str, Any]:
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("prompt is required.")
        w, h = parse_size(body)
        if not (16 <= w <= 4096 and 16 <= h <= 4096):
            raise ValueError(f"size {w}x{h} is outside 16..4096 pixels per side.")
        steps = int(body.get("num_inference_steps") or 50)
        n = min(int(body.get("n") or 1), 10)
        fmt = body.get("response_format") or "url"
        if fmt not in ("url", "b64_json"):
            raise ValueError("response_format must be 'url' or 'b64_json'.")
        seed = body.get("seed")
        seed = int(seed[0] if isinstance(seed, list) else seed) if seed is not None else \
            zlib.crc32(prompt.encode()) ^ self.ns.sim_seed
        m = self.metrics
        lab = m.labels if m else {}
        t_arrive = time.monotonic()
        self.queued += 1
        if m:
            m.queue.labels(**lab).set(self.queued)
        async with self.lock:
            self.queued -= 1
            t_start = time.monotonic()
            if m:
                m.queue.labels(**lab).set(self.queued)
                m.running.labels(**lab).set(1)
                m.queue_time.labels(**lab).observe((t_start - t_arrive) * self.speed)
                m.batch_size.labels(**lab).observe(n)
            mp = w * h / 1e6
            durations = (0.05, 0.01, 0.001, self.step_time(w, h, n) * steps, 0.25 * mp * n)
            total = 0.0
            for stage, d in zip(STAGES, durations, strict=True):
                if not warmup:
                    self.log.log(f"[{stage}] started...")
                await self.msleep(d)
                total += d
                if stage == "DenoisingStage" and not warmup:
                    rate = steps / d if d > 0 else 0.0
                    sys.stderr.write(f"100%|{'█' * 10}| {steps}/{steps} "
                                     f"[00:{int(d) % 60:02d}<00:00, {rate:6.2f}it/s]\n")
                    sys.stderr.flush()
                if not warmup:
                    self.log.log(f"[{stage}] finished in {d:.4f} seconds")
                if m and not warmup:
                    m.stage.labels(**lab, stage=stage).observe(d)
            peak_mb = (self.params * 2 / self.gpus + 2.5e9 * mp * n) / 1e6
            if not warmup:
                self.log.log(f"Pixel data generated successfully in {total:.2f} seconds")
                self.log.log(f"Peak memory usage: {peak_mb:.2f} MB")
                self.log.log(f"Completed batch processing. Generated {n} outputs in "
                             f"{total:.2f} seconds")
            if m:
                m.running.labels(**lab).set(0)
                m.requests.labels(**lab, status="success",
                                  is_warmup=str(warmup).lower()).inc()
                m.latency.labels(**lab, status="success",
                                 is_warmup=str(warmup).lower()).observe(total)
        data = []
        pw, ph = min(w, 512), min(h, 512)  # keep the PNG small: at most 512 px a side
        for i in range(n):
            img = png_bytes(pw, ph, seed + i)
            image_id = uuid.uuid4().hex
            self.images[image_id] = img
            while len(self.images) > 64:
                self.images.popitem(last=False)
            item: dict[str, Any] = {"revised_prompt": prompt,
                                    "file_path": f"{self.ns.output_path.rstrip('/')}/"
                                                 f"{image_id}.png"}
            if fmt == "b64_json":
                item["b64_json"] = base64.b64encode(img).decode()
            else:
                item["url"] = f"http://{self.ns.host}:{self.ns.port}/v1/images/{image_id}/content"
            data.append(item)
        return {"id": uuid.uuid4().hex, "created": int(time.time()), "data": data,
                "inference_time_s": total, "peak_memory_mb": peak_mb,
                "usage": {"prompt_tokens": len(tokenizer.encode(prompt)), "image_count": n,
                          "total_tokens": len(tokenizer.encode(prompt))}}

    def add_routes(self, app: web.Application) -> None:
        async def generations(request: web.Request) -> web.StreamResponse:
            try:
                body = await request.json()
                if not isinstance(body, dict):
                    raise ValueError("The request body must be a JSON object.")
                return json_response(await self.generate(body))
            except ValueError as exc:
                return json_response({"error": {"message": str(exc), "type": "BadRequestError",
                                                "code": 400}}, status=400)

        async def content(request: web.Request) -> web.StreamResponse:
            img = self.images.get(request.match_info["image_id"])
            if img is None:
                return json_response({"detail": "Image not found"}, status=404)
            return web.Response(body=img, content_type="image/png")

        async def health(request: web.Request) -> web.StreamResponse:
            return web.Response(status=200 if self.ready else 503)

        async def model_info(request: web.Request) -> web.StreamResponse:
            return json_response({"model_path": self.ns.model_path, "is_generation": True,
                                  "model_type": "diffusion", "num_gpus": self.gpus})

        async def server_info(request: web.Request) -> web.StreamResponse:
            info = {k: v for k, v in vars(self.ns).items() if not k.startswith("sim_")}
            info.update(version="0.5.23", num_gpus=self.gpus, queue_size=self.queued)
            return json_response(info)

        async def models(request: web.Request) -> web.StreamResponse:
            return json_response({"object": "list", "data": [{
                "id": self.ns.served_model_name or self.ns.model_path, "object": "model",
                "created": int(self.started_at), "owned_by": "sglang"}]})

        async def metrics(request: web.Request) -> web.StreamResponse:
            if self.metrics is None:
                return json_response({"detail": "Not Found"}, status=404)
            return web.Response(body=self.metrics.render(),
                                headers={"Content-Type": CONTENT_TYPE_LATEST})

        r = app.router
        r.add_post("/v1/images/generations", generations)
        r.add_get("/v1/images/{image_id}/content", content)
        for p in ("/health", "/health_generate", "/liveness"):
            r.add_get(p, health)
        r.add_get("/model_info", model_info)
        r.add_get("/server_info", server_info)
        r.add_get("/v1/models", models)
        r.add_get("/metrics", metrics)
