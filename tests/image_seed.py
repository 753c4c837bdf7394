"""A hand-built image-server world for scorecard, compare and page tests: server `name` (kind
image, 1 GPU at `price` USD/GPU-h), a launch under `profile`, one probe run at concurrency 1 and
2 with per-request detail and output-check thumbnails, and the diffusion log samples of its
window [T0-1, T0+20). Every number is chosen for hand arithmetic (see the tests using it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from collectors.probe.images import check_entry
from simulator.image_png import encode_png, pixels
from storage import repo

T0 = 1_700_000_000.0
DETAIL_IMG: dict[str, Any] = {
    "api": "images", "model": "Qwen/Qwen-Image", "prompt_set": "builtin", "prompts_hash": "p",
    "mode": "concurrency", "levels": [1, 2], "requests_per_level": [4, 4],
    "warmup_per_level": [1, 2],
    "image": {"size": "1024x1024", "steps": 20, "guidance": None, "n": 1, "seed": 0},
}
# per request: text encode 0.5 s, denoise 8 s (20 steps of 0.4 s), decode 1 s, other 0.5 s
STAGES = {"TextEncodingStage": 0.5, "LatentPreparationStage": 0.3,
          "TimestepPreparationStage": 0.2, "DenoisingStage": 8.0, "DecodingStage": 1.0}


def noisy_png(seed: int, noise: float) -> bytes:
    """The simulator's gradient PNG (256²) plus seeded Gaussian noise of `noise` grey levels."""
    import io

    from PIL import Image

    base = np.asarray(Image.open(io.BytesIO(encode_png(256, 256, bytes(pixels(256, 256, seed, 'a red fox', 20))))).convert("RGB"), float)
    if noise:
        base = base + np.random.default_rng(seed).normal(0, noise, base.shape)
    out = io.BytesIO()
    Image.fromarray(np.clip(base, 0, 255).astype(np.uint8)).save(out, format="PNG")
    return out.getvalue()


def seed_image(engine: Any, *, name: str = "img", profile: str = "demo-image",
               e2e: float = 10.0, peak_mb: float = 60_000.0, noise: float = 0.0,
               price: float | None = 9.0, fingerprint: str = "fp-img",
               detail: dict[str, Any] | None = None, t0: float = T0) -> dict[str, int]:
    srv = repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:2", kind="image",
                             gpu_indices=[0], gpu_hourly_usd=price, profile=profile)
    launch = repo.create_launch(
        engine, server_id=srv.id, profile_name=profile, profile_hash="i" * 16,
        argv=["sglang", "serve"], env={}, engine_version="0.5.23",
        server_args={"num_gpus": 1, "enable_torch_compile": profile.endswith("fast")},
        status="ready", started_at=t0 - 100)
    run = repo.create_probe_run(
        engine, server_id=srv.id, launch_id=launch.id, url=srv.base_url, api="images",
        name=f"{profile} sweep", spec={}, fingerprint=fingerprint,
        fingerprint_detail=detail or DETAIL_IMG, status="done", started_at=t0 - 1,
        finished_at=t0 + 20, trusted=True, report={"levels": []})
    rows = []
    for level, starts in ((1.0, [0.0, 1.0, 2.0, 3.0]), (2.0, [4.0, 5.0, 6.0, 7.0])):
        for seq, start in enumerate(starts):
            det: dict[str, Any] = {"inference_time_s": e2e - 0.5, "peak_memory_mb": peak_mb,
                                   "usage": {"image_count": 1}}
            if level == 1.0:  # the output check: prompts b01..b04, workload seed 0
                det["check"] = check_entry(noisy_png(seq, noise), prompt_id=f"b0{seq + 1}", seed=0)
            rows.append({
                "run_id": run.id, "level": level, "seq": seq, "warmup": False,
                "start_ts": t0 + start, "ttft_s": None, "e2e_s": e2e, "itl_s": None,
                "tpot_s": None, "tokens_in": None, "tokens_out": None, "tokens_cached": None,
                "ok": True, "error_kind": None, "http_status": 200, "output_hash": None,
                "detail": det})
    rows.append({**rows[-1], "seq": 4, "ok": False, "error_kind": "timeout", "e2e_s": None,
                 "detail": None})
    samples = []
    for i in range(4):  # four requests logged
        ts = t0 + 2 * i
        samples += [{"ts": ts, "server_id": srv.id, "source": "log", "value": v,
                     "metric": f"log.diffusion.stage_s.{stage}"} for stage, v in STAGES.items()]
        samples += [
            {"ts": ts, "server_id": srv.id, "source": "log", "metric": "log.diffusion.step_s",
             "value": 0.4},
            {"ts": ts, "server_id": srv.id, "source": "log", "metric": "log.diffusion.peak_mem_gb",
             "value": 64.0 + i},
            {"ts": ts, "server_id": srv.id, "source": "log",
             "metric": "log.diffusion.remaining_mem_gb", "value": 15.0 - i},
            {"ts": ts, "server_id": srv.id, "source": "metrics",
             "metric": "metrics.diffusion_num_queue_reqs", "value": float(i)},
        ]
    with engine.begin() as conn:
        repo.insert_probe_requests(conn, rows=rows)
        repo.insert_samples(conn, rows=samples)
    return {"server_id": int(srv.id), "launch_id": int(launch.id), "run_id": int(run.id)}
