"""A small seeded database for the page tests: two servers, two hours of samples, events, a sweep.

Arithmetic the tests rely on:
- alpha: canary.ttft_s is 0.010 s on every minute of the last 2 h except the newest 15 min,
  where it alternates 0.010 / 0.050 (p99 over those 15 samples -> close to 0.050).
- alpha: log.gen_throughput_tok_s = 1,000 tok/s throughout; price 2.00 USD/GPU-h x 2 GPUs
  -> 4.00 USD/h / (1,000 x 3,600 tok/h) x 1e6 = 1.111 USD per 1M output tokens.
- alpha: gpu.0 / gpu.1 mem_used 40 GiB of 80 GiB, util 0.5.
- beta: only api.health_ok = 0 (down), no GPU samples ("no GPU telemetry").
- events: alpha has an `oom` whose raw excerpt is HOSTILE (script tag + markdown) and a
  `relaunch_done`; beta has a `health_down`.
- probe run 1 on alpha: done, levels c=1 and c=4; c=4 is NOT trusted (client CPU 85 %).
"""

from __future__ import annotations

import time

from storage import repo

HOSTILE = "<script>alert('x')</script> **bold** [link](http://example.invalid) # heading"
GIB = 2**30


def _level(c: int, ttft: float, tok_s: float, trusted: bool) -> dict:
    stat = {"p50": ttft, "p95": ttft * 1.5, "p99": ttft * 2, "mean": ttft, "max": ttft * 3}
    return {
        "concurrency": c, "requests": 20, "ok": 20, "errors": {}, "success_rate": 1.0,
        "ttft_s": stat, "itl_s": stat, "tpot_s": stat, "e2e_s": stat,
        "throughput": {"rps": tok_s / 100, "output_tok_s": tok_s},
        "self_check": {"loop_lag_p99_s": 0.001, "client_cpu_pct": 20.0 if trusted else 85.0,
                       "trusted": trusted, "reasons": [] if trusted else ["client CPU 85 % > 70 % of one core"]},
    }


def seed(engine, now: float | None = None) -> dict[str, int]:
    now = time.time() if now is None else now
    alpha = repo.upsert_server(engine, name="alpha", base_url="http://127.0.0.1:1", managed=True,
                               gpu_indices=[0, 1], gpu_hourly_usd=2.0, profile="fast")
    beta = repo.upsert_server(engine, name="beta", base_url="http://127.0.0.1:2")
    assert alpha.id and beta.id
    repo.create_launch(engine, server_id=alpha.id, profile_name="fast", engine_version="0.5.23",
                       server_args={"model_path": "tiny", "tp_size": 2, "mem_fraction_static": 0.8},
                       argv=["python", "-m", "sglang.launch_server", "--tp", "2"], status="ready",
                       started_at=now - 7200, ready_at=now - 7100)
    rows = []
    start = int(now - 7200)
    for i, t in enumerate(range(start, int(now), 60)):
        recent = t >= now - 15 * 60
        ttft = 0.050 if (recent and i % 2) else 0.010
        for metric, value in (
            ("canary.ttft_s", ttft), ("canary.e2e_s", ttft * 10), ("canary.ok", 1.0),
            ("log.gen_throughput_tok_s", 1000.0), ("log.running_req", 8.0), ("log.queue_req", 1.0),
            ("log.token_usage", 0.4), ("log.cache_hit_rate", 0.25), ("metrics.ttft_p99_s", 0.04),
            ("api.health_ok", 1.0), ("gpu.0.mem_used_bytes", 40.0 * GIB), ("gpu.0.mem_total_bytes", 80.0 * GIB),
            ("gpu.1.mem_used_bytes", 40.0 * GIB), ("gpu.1.mem_total_bytes", 80.0 * GIB),
            ("gpu.0.util_ratio", 0.5), ("gpu.1.util_ratio", 0.5), ("gpu.0.power_w", 300.0),
            ("gpu.0.temp_c", 60.0),
        ):
            rows.append({"ts": float(t), "server_id": alpha.id, "launch_id": None, "source": metric.split(".")[0],
                         "metric": metric, "value": value})
        rows.append({"ts": float(t), "server_id": beta.id, "launch_id": None, "source": "api",
                     "metric": "api.health_ok", "value": 0.0})
    for sid, ok in ((alpha.id, 1.0), (beta.id, 0.0)):  # fresh health: status up / down
        rows.append({"ts": now - 2, "server_id": sid, "launch_id": None, "source": "api",
                     "metric": "api.health_ok", "value": ok})
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
    repo.add_event(engine, kind="oom", message="CUDA out of memory in decode", server_id=alpha.id,
                   severity="error", raw=HOSTILE, ts=now - 1800)
    repo.add_event(engine, kind="relaunch_done", message="relaunched under profile fast",
                   server_id=alpha.id, ts=now - 3600)
    repo.add_event(engine, kind="health_down", message="health check failed 3 times",
                   server_id=beta.id, severity="warning", ts=now - 600)
    run = repo.create_probe_run(
        engine, server_id=alpha.id, url="http://127.0.0.1:1", api="generate", name="seed sweep",
        spec={"levels": [1.0, 4.0], "requests": 20, "workload": {"prompt_set": "builtin"}},
        fingerprint="abc123def456", status="done", progress=1.0, trusted=False,
        started_at=now - 3000, finished_at=now - 2900,
        report={"levels": [_level(1, 0.02, 150.0, True), _level(4, 0.05, 480.0, False)]},
    )
    assert run.id
    return {"alpha": alpha.id, "beta": beta.id, "run": run.id}
