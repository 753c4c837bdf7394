"""A seeded fleet for the fleet view tests: N servers on hosts h1..h5, three models, four profiles.

Server i (0-based) is `srv-NN`, host h{i % 5 + 1}, model MODELS[i % 3], profile p{i % 4 + 1}
(via its launch), 2 GPUs at 2.00 USD/GPU-h. Every server has, in the last 10 minutes, one sample
a minute of log.gen_throughput_tok_s = 100 × (i + 1), log.queue_req = i % 4,
log.token_usage = 0.5, log.running_req = 4, log.prefill_cached_token = 60 and
log.prefill_new_token = 20 (radix hit rate 60 / 80 = 0.75), metrics.ttft_p99_s = 0.05,
metrics.ttft_clamped = 0, canary.ttft_s / canary.ok, and a fresh api.health_ok: 1 (up) except
every 10th server (i % 10 == 9: 0, down).

Probe runs (done, in the window) on even servers: measured successful requests with
ttft_s = 0.01 × (i + 1) + 0.001 × k (k = 0..9) and e2e_s = 10 × that, plus one warm-up and one
failed request that must not count. Fingerprint "fp-long" for model m-c servers with
i % 4 == 0, "fp-short" for the rest: model m-c therefore ran two workloads.
"""

from __future__ import annotations

import time
from typing import Any

from storage import repo

MODELS = ("org/m-a", "org/m-b", "org/m-c")
PRICE = 2.0


def server_name(i: int) -> str:
    return f"srv-{i:02d}"


def fingerprint(i: int) -> str:
    return "fp-long" if MODELS[i % 3] == "org/m-c" and i % 4 == 0 else "fp-short"


def ttfts(i: int) -> list[float]:
    return [0.01 * (i + 1) + 0.001 * k for k in range(10)]


def _req(run_id: int, seq: int, start: float, ttft: float | None, *, ok: bool = True,
         warmup: bool = False) -> dict[str, Any]:
    return {"run_id": run_id, "level": 4.0, "seq": seq, "warmup": warmup, "start_ts": start,
            "ttft_s": ttft, "e2e_s": None if ttft is None else ttft * 10, "itl_s": None,
            "tpot_s": None, "tokens_in": 50, "tokens_out": 100 if ok else None,
            "tokens_cached": None, "ok": ok, "error_kind": None if ok else "timeout",
            "http_status": 200 if ok else None, "output_hash": None}


def seed_fleet(engine: Any, n: int = 50, now: float | None = None, start: int = 0) -> float:
    """Seed servers start..n-1 (module docstring); returns the `now` the data is relative to."""
    now = time.time() if now is None else now
    samples: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    for i in range(start, n):
        srv = repo.upsert_server(engine, name=server_name(i), base_url=f"http://127.0.0.1:{20000 + i}",
                                 managed=True, gpu_indices=[0, 1], gpu_hourly_usd=PRICE,
                                 host=f"h{i % 5 + 1}")
        sid = srv.id
        assert sid is not None
        launch = repo.create_launch(
            engine, server_id=sid, profile_name=f"p{i % 4 + 1}", engine_version="0.5.23",
            server_args={"model_path": MODELS[i % 3], "tp_size": 2}, argv=["python", "-m", "sglang.launch_server"],
            status="ready", started_at=now - 3600, ready_at=now - 3500)
        for t in range(int(now - 600), int(now), 60):
            for metric, value in (("log.gen_throughput_tok_s", 100.0 * (i + 1)), ("log.queue_req", float(i % 4)),
                                  ("log.token_usage", 0.5), ("canary.ttft_s", 0.02), ("canary.ok", 1.0),
                                  ("log.running_req", 4.0), ("log.prefill_cached_token", 60.0),
                                  ("log.prefill_new_token", 20.0), ("metrics.ttft_p99_s", 0.05),
                                  ("metrics.ttft_clamped", 0.0)):
                samples.append({"ts": float(t), "server_id": sid, "launch_id": launch.id,
                                "source": metric.split(".")[0], "metric": metric, "value": value})
        samples.append({"ts": now - 2, "server_id": sid, "launch_id": launch.id, "source": "api",
                        "metric": "api.health_ok", "value": 0.0 if i % 10 == 9 else 1.0})
        if i % 2 == 0:
            run = repo.create_probe_run(
                engine, server_id=sid, launch_id=launch.id, url=srv.base_url, api="generate",
                name="sweep", fingerprint=fingerprint(i), fingerprint_detail={"mode": "concurrency"},
                status="done", started_at=now - 300, finished_at=now - 240, trusted=True)
            assert run.id is not None
            requests.append(_req(run.id, 0, now - 300, 9.0, warmup=True))
            requests.append(_req(run.id, 1, now - 299, None, ok=False))
            requests.extend(_req(run.id, k + 2, now - 298 + k, v) for k, v in enumerate(ttfts(i)))
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=samples)
        repo.insert_probe_requests(conn, rows=requests)
    return now


def count_queries(engine: Any, fn: Any) -> tuple[int, Any]:
    """(SQL statements `fn()` sent through `engine`, its result), via SQLAlchemy's event hook."""
    from sqlalchemy import event

    n = [0]

    def hook(*_a: Any) -> None:
        n[0] += 1

    event.listen(engine, "before_cursor_execute", hook)
    try:
        out = fn()
    finally:
        event.remove(engine, "before_cursor_execute", hook)
    return n[0], out
