"""The ``sglang serve`` diffusion server stand-in (SGLang 0.5.23, ``--model-type diffusion``).

API (0.5.23 runtime/entrypoints/openai): POST /v1/images/generations (JSON: prompt, size "WxH" |
width/height, n (1..10), num_inference_steps (50), guidance_scale / true_cfg_scale, seed,
response_format url|b64_json, enable_teacache) and POST /v1/images/edits (multipart form: image
or image[] files, prompt, the same fields as form values) -> ImageResponse {id, created, data:
[{b64_json | url, revised_prompt, file_path}], peak_memory_mb, inference_time_s, usage:
{prompt_tokens, total_tokens, completion_tokens, prompt_tokens_details: {cached_tokens},
reasoning_tokens, image_count}}; GET /v1/images/{id}/content; /health, /health_generate,
/liveness, /model_info, /server_info, /v1/models, /metrics (with --enable-metrics).

Scheduling: one GPU worker runs one batch at a time; with ``--batching-max-size N`` (> 1) the
worker waits ``--batching-delay-ms`` after the first request and runs up to N queued requests
of the same size and steps as one batch (higher images/s, longer per-request latency).

Time (simulator/costmodel.DiffusionCost, model seconds): text encoding, latent and timestep
preparation, steps x DiT step (roofline, CFG passes, cache skips), VAE decode. Peak memory past
the card's memory -> the request fails as CUDA OOM: ERROR line ``Error executing request <id>:
CUDA out of memory. ...`` (red) with SGLang's OOM_MSG (yellow), HTTP 500 ``{"detail": "Model
generation failed. Error from scheduler: ..."}``, status="error" in the metrics.

Log lines (0.5.23 forms, prefix ``[MM-DD HH:MM:SS] ``, stdout): ``[<Stage>] started...``,
``[<Stage>] finished in 0.1234 seconds`` (every stage, not for warm-up),
``[DenoisingStage] average time per step: 0.2138 seconds``, a tqdm bar on stderr,
``Pixel data generated successfully in \\033[92m10.87\\033[0;0m seconds``, ``Completed batch
processing. Generated N outputs in \\033[92mX\\033[0;0m seconds`` (only with batching),
``Peak memory usage: 61623.45 MB``, and after the warm-up ``The server is fired up and ready to
roll!``. 0.5.23 prints no ``Peak GPU memory: ... Remaining GPU memory at peak`` line.

GPU activity (for the dcgm-exporter look-alike, simulator/dcgm.py, with SGLANG_SIM_DCGM_PORT):
text encoding a short bandwidth burst, denoising the DiT roofline's FLOPs and bytes per computed
step (compute bound at 1024² for Qwen-Image, so tensor high and DRAM low), VAE decode compute.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import sys
import time
import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web
from prometheus_client import CONTENT_TYPE_LATEST

from simulator import dcgm, lifecycle, logfmt, tokenizer
from simulator.costmodel import (
    GB,
    GPUS,
    TEXT_ENCODER_BYTES,
    WORKSPACE_BYTES,
    DiffusionCost,
    Work,
    parse_params,
)
from simulator.gpu_activity import Activity
from simulator.image_png import encode_png, perturb, pixels
from simulator.llm_api import json_response
from simulator.metrics import DiffusionMetrics

PRE_STAGES = ("InputValidationStage", "TextEncodingStage", "LatentPreparationStage",
              "TimestepPreparationStage")
EDIT_STAGE = "ImageVAEEncodingStage"
PNG_MAX_SIDE = 256  # the PNG the simulator returns is at most this many pixels a side
OOM_HINT = ("OOM detected. Possible solutions:\n  - If the OOM occurs during runtime:\n"
            "    1. Reduce resolution, `--num-frames`, or batch size.\n"
            "    2. Use `--performance-mode memory` for lower memory usage.")


def parse_size(body: dict[str, Any]) -> tuple[int, int]:
    w, h = body.get("width"), body.get("height")
    if w is not None and h is not None:
        return int(w), int(h)
    m = re.fullmatch(r"(\d+)x(\d+)", str(body.get("size") or "1024x1024"))
    if not m:
        raise ValueError(f"size must look like '1024x1024', got {body.get('size')!r}.")
    return int(m.group(1)), int(m.group(2))


@dataclass
class Job:
    """One original request: its settings, arrival time and the future its handler awaits."""

    prompt: str
    width: int
    height: int
    steps: int
    n: int
    seed: int
    cfg: bool
    teacache: bool
    edit: bool
    fmt: str
    warmup: bool = False
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    arrived: float = field(default_factory=time.monotonic)
    done: asyncio.Future[dict[str, Any]] | None = None


class ImageServer:
    def __init__(self, ns: argparse.Namespace, log: logfmt.LogWriter) -> None:
        self.ns, self.log = ns, log
        self.gpu = GPUS[ns.sim_gpu]
        m = re.search(r"(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", ns.model_path.rsplit("/", 1)[-1])
        self.params = (parse_params(ns.sim_model_params) if ns.sim_model_params else None) or \
            (float(m.group(1)) * 1e9 if m else 20.4e9)
        sp = (ns.ulysses_degree or 1) * (ns.ring_degree or 1)
        if ns.sp_degree:
            sp = ns.sp_degree
        self.cost = DiffusionCost(
            self.gpu, self.params, num_gpus=ns.num_gpus, tp=ns.tp_size or 1, sp=sp,
            cfg_parallel=ns.enable_cfg_parallel, torch_compile=ns.enable_torch_compile,
            cache_dit=os.environ.get("SGLANG_CACHE_DIT_ENABLED", "").lower() in ("1", "true"))
        self.speed = ns.sim_speed
        self.ready = False
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.images: OrderedDict[str, bytes] = OrderedDict()
        replica = f"tcp://{ns.host}:{ns.scheduler_port}"
        self.metrics = DiffusionMetrics(replica) if ns.enable_metrics else None
        self.started_at = time.time()
        self.activity = Activity(self.gpu, dcgm.CARDS[ns.sim_gpu][0],
                                 lambda: time.monotonic() * self.speed)
        self.fb_used_bytes = 0.6 * GB  # CUDA context; the pipeline's weights arrive at load

    def resident_bytes(self) -> float:
        """What stays on GPU 0 between requests: DiT weights / tp, text encoder, workspace."""
        return 2 * self.params / self.cost.tp + TEXT_ENCODER_BYTES + WORKSPACE_BYTES

    async def start_exporter(self) -> web.AppRunner | None:
        """The dcgm-exporter look-alike, when SGLANG_SIM_DCGM_PORT is set (simulator/dcgm.py)."""
        if self.ns.sim_dcgm_port is None:
            return None
        group = dcgm.GpuGroup(self.activity, self.ns.num_gpus, lambda: self.fb_used_bytes)
        return await dcgm.start(self.ns.host, self.ns.sim_dcgm_port, [group],
                                sim_gpu=self.ns.sim_gpu, seed=self.ns.sim_seed)

    async def msleep(self, model_s: float) -> None:
        await asyncio.sleep(model_s / self.speed)

    async def startup(self) -> int:
        load_s = self.ns.sim_startup_s if self.ns.sim_startup_s is not None else \
            self.params * 2 / 5e9 + 3.0
        exporter = await self.start_exporter()
        self.log.log(f"Loading pipeline from {self.ns.model_path} on {self.ns.num_gpus} GPU(s)")
        await self.msleep(load_s)
        self.fb_used_bytes = self.resident_bytes()
        app = web.Application(middlewares=[lifecycle.make_middleware(self.log, None)])
        self.add_routes(app)
        runner = await lifecycle.bind(app, self.ns.host, self.ns.port, self.log)
        if runner is None:
            return 1
        stop = lifecycle.install_signal_stop()
        worker = asyncio.create_task(self.worker())
        await self.submit(Job("warmup", 256, 256, 2, 1, 0, True, False, False, "url", warmup=True))
        sys.stderr.write("Warmup requests: 100%|██████████| 1/1 [00:00<00:00]\n")
        sys.stderr.flush()
        self.ready = True
        self.log.log("The server is fired up and ready to roll!")
        await stop.wait()
        worker.cancel()
        await lifecycle.shutdown(runner, self.log)
        if exporter is not None:
            await exporter.cleanup()
        return 0

    # --- scheduling ---------------------------------------------------------------------------

    async def submit(self, job: Job) -> dict[str, Any]:
        job.done = asyncio.get_running_loop().create_future()
        await self.queue.put(job)
        self._publish_depths(running=None)
        return await job.done

    def _publish_depths(self, running: int | None) -> None:
        if self.metrics:
            self.metrics.queue.labels(*self.metrics.base).set(self.queue.qsize())
            if running is not None:
                self.metrics.running.labels(*self.metrics.base).set(running)

    async def worker(self) -> None:
        max_size = max(1, self.ns.batching_max_size)
        while True:
            batch = [await self.queue.get()]
            if max_size > 1:
                await self.msleep(self.ns.batching_delay_ms / 1000)
                batch.extend(self._take_compatible(batch[0], max_size - 1))
            await self.run_batch(batch, "max_size" if len(batch) == max_size else "unspecified")

    def _take_compatible(self, first: Job, room: int) -> list[Job]:
        taken: list[Job] = []
        kept: list[Job] = []
        while not self.queue.empty():
            job = self.queue.get_nowait()
            same = (job.width, job.height, job.steps, job.edit) == \
                (first.width, first.height, first.steps, first.edit)
            (taken if same and len(taken) < room else kept).append(job)
        for job in kept:
            self.queue.put_nowait(job)
        return taken

    async def run_batch(self, batch: list[Job], stop_reason: str) -> None:
        first, m = batch[0], self.metrics
        now = time.monotonic()
        self._publish_depths(running=len(batch))
        if m:
            for job in batch:
                m.queue_time.labels(*m.base, str(job.warmup).lower()).observe(
                    (now - job.arrived) * self.speed)
            m.batch_size.labels(*m.base, stop_reason).observe(len(batch))
        images = sum(j.n for j in batch)
        text = max(len(tokenizer.encode(j.prompt)) for j in batch)
        peak = self.cost.peak_bytes(first.width, first.height, text, images)
        try:
            total = await self._run_stages(first, batch, images, text, peak)
        except MemoryError as exc:
            self._fail(batch, str(exc), now)
            return
        finally:
            self.fb_used_bytes = self.resident_bytes()
        for job in batch:
            if m:
                m.finish((time.monotonic() - job.arrived) * self.speed, error=False,
                         warmup=job.warmup)
            result = self._response(job, total, peak)
            if not job.warmup:
                self.log.log(f"Pixel data generated successfully in {logfmt.GREEN}{total:.2f}"
                             f"{logfmt.RESET} seconds")
            assert job.done is not None
            job.done.set_result(result)
        if not first.warmup:
            if self.ns.batching_max_size > 1:
                self.log.log(f"Completed batch processing. Generated {images} outputs in "
                             f"{logfmt.GREEN}{total:.2f}{logfmt.RESET} seconds")
            self.log.log(f"Peak memory usage: {peak / 2**20:.2f} MB")
        self._publish_depths(running=0)

    async def _stage(self, name: str, seconds: float, quiet: bool, work: Work | None = None,
                     pcie_tx_bytes: float = 0.0) -> float:
        if not quiet:
            self.log.log(f"[{name}] started...")
        if work is not None:
            self.activity.record(self.activity.clock(), seconds, work,
                                 pcie_tx_bytes=pcie_tx_bytes)
        await self.msleep(seconds)
        if not quiet:
            self.log.log(f"[{name}] finished in {seconds:.4f} seconds")
            if self.metrics:
                self.metrics.observe_stage(name, seconds)
        return seconds

    async def _run_stages(self, first: Job, batch: list[Job], images: int, text: int,
                          peak: float) -> float:
        quiet, c = first.warmup, self.cost
        w, h = first.width, first.height
        total = 0.0
        for name, secs in zip(PRE_STAGES, (0.0005, 0.06 * len(batch), 0.0003, 0.0004),
                              strict=True):
            # the text encoder (~7B) reads its weights once per prompt: a short bandwidth burst
            enc = Work(2 * 7e9 * text * len(batch), TEXT_ENCODER_BYTES) \
                if name == "TextEncodingStage" else None
            total += await self._stage(name, secs, quiet, enc)
            if name == "TextEncodingStage" and first.edit:
                total += await self._stage(EDIT_STAGE, c.decode_s(w, h, images) / 2, quiet)
        if peak > self.gpu.memory_bytes:
            free = max(0.0, self.gpu.memory_bytes - (peak - 2 * GB))
            raise MemoryError(
                f"CUDA out of memory. Tried to allocate {(peak - self.gpu.memory_bytes) / 2**30 + 2:.2f}"
                f" GiB. GPU 0 has a total capacity of {self.gpu.memory_bytes / 2**30:.2f} GiB of "
                f"which {free / 2**30:.2f} GiB is free.")
        step = c.step_s(w, h, text, cfg=first.cfg, batch=images)
        computed = c.computed_steps(first.steps, cache=first.teacache)
        cached_step = step * 0.05
        den = step * computed + cached_step * (first.steps - computed)
        if not quiet:
            self.log.log("[DenoisingStage] started...")
        self.fb_used_bytes = peak
        passes = 2 if first.cfg and not c.cfg_parallel else 1
        fwd = c.forward_work(w, h, text, images)
        # the roofline's side, not the guess: at 1024² a Qwen-Image step is compute bound
        self.activity.record(self.activity.clock(), den, Work(
            fwd.flops * passes * computed, fwd.hbm_bytes * passes * computed))
        await self.msleep(den)
        if not quiet:
            rate = first.steps / den if den > 0 else 0.0
            sys.stderr.write(f"100%|{'█' * 10}| {first.steps}/{first.steps} "
                             f"[{int(den) // 60:02d}:{int(den) % 60:02d}<00:00, {rate:6.2f}it/s]\n")
            sys.stderr.flush()
            self.log.log(f"[DenoisingStage] average time per step: {den / first.steps:.4f} seconds")
            self.log.log(f"[DenoisingStage] finished in {den:.4f} seconds")
            if self.metrics:
                for i in range(first.steps):
                    self.metrics.observe_stage("DenoisingStep", step if i < computed else
                                               cached_step)
                self.metrics.observe_stage("DenoisingStage", den)
        total += den
        dec_s = c.decode_s(w, h, images)
        # VAE decode: convolutions at ~40 % of tensor peak; the image leaves over PCIe
        total += await self._stage("DecodingStage", dec_s, quiet,
                                   Work(0.4 * dec_s * self.gpu.bf16_flops, 2 * w * h * 3 * images),
                                   pcie_tx_bytes=3.0 * w * h * images)
        return total

    def _fail(self, batch: list[Job], message: str, started: float) -> None:
        for job in batch:
            err = f"Error executing request {job.rid}: {message}"
            self.log.log(err, level="error")
            self.log.raw("Traceback (most recent call last):\n  File \"gpu_worker.py\", in "
                         f"execute_forward\ntorch.OutOfMemoryError: {message}")
            self.log.log(OOM_HINT, level="warning")
            if self.metrics:
                self.metrics.finish((time.monotonic() - job.arrived) * self.speed, error=True,
                                    warmup=job.warmup)
            assert job.done is not None
            job.done.set_exception(RuntimeError(
                f"Model generation failed. Error from scheduler: {err}"))
        self._publish_depths(running=0)

    # --- responses ----------------------------------------------------------------------------

    def _png(self, job: Job, index: int) -> bytes:
        pw = min(job.width, PNG_MAX_SIDE)
        ph = max(1, job.height * pw // max(job.width, 1)) if job.width > PNG_MAX_SIDE else \
            min(job.height, PNG_MAX_SIDE)
        seed = job.seed + index
        # The reference picture is the 50-step one; fewer steps and the fast paths drift from it.
        rgb = pixels(pw, ph, seed, job.prompt, 50)
        cut = max(0.0, 1 - job.steps / 50)
        computed = self.cost.computed_steps(job.steps, cache=job.teacache)
        rgb = perturb(rgb, seed + 1, 2 + int(30 * cut), min(1.0, cut * 2))
        if computed < job.steps:
            rgb = perturb(rgb, seed + 2, 6, 0.5)
        if self.cost.torch_compile:
            rgb = perturb(rgb, seed + 3, 1, 0.02)
        return encode_png(pw, ph, bytes(rgb))

    def _response(self, job: Job, total: float, peak: float) -> dict[str, Any]:
        data = []
        if not job.warmup:
            for i in range(job.n):
                img = self._png(job, i)
                image_id = f"{job.rid}-{i}" if job.n > 1 else job.rid
                self.images[image_id] = img
                while len(self.images) > 64:
                    self.images.popitem(last=False)
                item: dict[str, Any] = {"revised_prompt": job.prompt, "file_path": (
                    f"{self.ns.output_path.rstrip('/')}/{image_id}.png")}
                if job.fmt == "b64_json":
                    item["b64_json"] = base64.b64encode(img).decode()
                else:
                    item["url"] = (f"http://{self.ns.host}:{self.ns.port}/v1/images/"
                                   f"{image_id}/content")
                data.append(item)
        tokens = len(tokenizer.encode(job.prompt))
        return {"id": job.rid, "created": int(time.time()), "data": data,
                "peak_memory_mb": peak / 2**20, "inference_time_s": total,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0,
                          "prompt_tokens_details": {"cached_tokens": 0}, "reasoning_tokens": 0,
                          "image_count": job.n}}

    def job_from(self, body: dict[str, Any], *, edit: bool) -> Job:
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("prompt is required.")
        w, h = parse_size(body)
        if not (16 <= w <= 8192 and 16 <= h <= 8192):
            raise ValueError(f"size {w}x{h} is outside 16..8192 pixels per side.")
        fmt = body.get("response_format") or "url"
        if fmt not in ("url", "b64_json"):
            raise ValueError(f"response_format={fmt} is not supported")
        seed = body.get("seed")
        seed = int(seed[0] if isinstance(seed, list) else seed) if seed not in (None, "") else \
            zlib.crc32(prompt.encode()) ^ self.ns.sim_seed
        guidance = body.get("true_cfg_scale", body.get("guidance_scale"))
        cfg = guidance is None or float(guidance) > 1.0  # Qwen-Image: true CFG 4.0 by default
        teacache = str(body.get("enable_teacache", "false")).lower() in ("true", "1")
        return Job(prompt, w, h, int(body.get("num_inference_steps") or 50),
                   max(1, min(int(body.get("n") or 1), 10)), seed, cfg, teacache, edit, fmt)

    def add_routes(self, app: web.Application) -> None:
        async def run(job_body: dict[str, Any], *, edit: bool) -> web.StreamResponse:
            try:
                job = self.job_from(job_body, edit=edit)
            except (ValueError, TypeError) as exc:
                return json_response({"detail": str(exc)}, status=400)
            try:
                return json_response(await self.submit(job))
            except RuntimeError as exc:
                return json_response({"detail": str(exc)}, status=500)

        async def generations(request: web.Request) -> web.StreamResponse:
            try:
                body = await request.json()
            except ValueError:
                body = None
            if not isinstance(body, dict):
                return json_response({"detail": "The request body must be a JSON object."},
                                     status=400)
            return await run(body, edit=False)

        async def edits(request: web.Request) -> web.StreamResponse:
            if not request.content_type.startswith("multipart/"):
                return json_response({"detail": "Send the edit as multipart/form-data."},
                                     status=422)
            form: dict[str, Any] = {}
            images = 0
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader):
                    continue
                if part.name in ("image", "image[]", "mask"):
                    await part.read()
                    images += part.name != "mask"
                elif part.name:
                    form[part.name] = await part.text()
            if images == 0 and not form.get("url"):
                return json_response({"detail": "Provide an image file or a url."},
                                     status=400)
            return await run(form, edit=True)

        async def content(request: web.Request) -> web.StreamResponse:
            img = self.images.get(request.match_info["image_id"])
            if img is None:
                return json_response({"detail": "Image not found"}, status=404)
            return web.Response(body=img, content_type="image/png")

        async def health(request: web.Request) -> web.StreamResponse:
            return web.Response(status=200 if self.ready else 503)

        async def model_info(request: web.Request) -> web.StreamResponse:
            return json_response({"model_path": self.ns.model_path, "is_generation": True,
                                  "model_type": "diffusion", "num_gpus": self.ns.num_gpus})

        async def server_info(request: web.Request) -> web.StreamResponse:
            info = {k: v for k, v in vars(self.ns).items() if not k.startswith("sim_")}
            info.update(version=self.ns.sim_version, queue_size=self.queue.qsize())
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
        r.add_post("/v1/images/edits", edits)
        r.add_get("/v1/images/{image_id}/content", content)
        for p in ("/health", "/health_generate", "/liveness"):
            r.add_get(p, health)
        r.add_get("/model_info", model_info)
        r.add_get("/server_info", server_info)
        r.add_get("/v1/models", models)
        r.add_get("/metrics", metrics)
