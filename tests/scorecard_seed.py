"""Hand-built scorecard worlds shared by tests/scorecard, tests/export and the Compare page test:
one server with a probe run, samples and events (every number chosen so the expected figures can
be computed by hand: see scorecard/test_scorecard_figures.py)."""

from __future__ import annotations

from typing import Any

from storage import repo

T0 = 1_700_000_000.0
DETAIL_A: dict[str, Any] = {
    "api": "generate", "model": "tiny", "prompt_set": "shared-prefix", "prompts_hash": "abc",
    "input_lengths": {"min": 50, "max": 50}, "mode": "concurrency", "levels": [4],
    "requests_per_level": [5], "warmup_per_level": [1], "max_new_tokens": 100,
    "ignore_eos": True, "sampling": {"temperature": 0.0},
}


def _req(run_id: int, *, level: float, seq: int, start: float, ttft: float | None,
         e2e: float | None, ok: bool = True, warmup: bool = False, error: str | None = None,
         tokens_out: int | None = 100) -> dict[str, Any]:
    return {
        "run_id": run_id, "level": level, "seq": seq, "warmup": warmup, "start_ts": start,
        "ttft_s": ttft, "e2e_s": e2e, "itl_s": [0.01, 0.02, 0.03] if ok else None,
        "tpot_s": 0.009 if ok else None, "tokens_in": 50, "tokens_out": tokens_out if ok else None,
        "tokens_cached": 25, "ok": ok, "error_kind": error, "http_status": 200 if ok else None,
        "output_hash": None,
    }


def seed_alpha(engine, *, price: float | None = 2.0, name: str = "alpha",
               detail: dict[str, Any] | None = None, fingerprint: str = "fp-a",
               ttft_scale: float = 1.0, flags: dict[str, Any] | None = None) -> dict[str, int]:
    """Server `name` (2 GPUs at `price` USD/GPU-h), launch, probe run at concurrency 4 and the
    samples/events of its window [T0-1, T0+5)."""
    srv = repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:1", kind="llm",
                             gpu_indices=[0, 1], gpu_hourly_usd=price)
    launch = repo.create_launch(
        engine, server_id=srv.id, profile_name="prof-" + name, profile_hash="h" * 16,
        argv=["python", "-m", "sglang.launch_server"], env={"SGLANG_X": "1"},
        engine_version="0.5.23", server_args=flags or {"tp_size": 2, "chunked_prefill_size": 8192},
        status="ready", started_at=T0 - 100)
    run = repo.create_probe_run(
        engine, server_id=srv.id, launch_id=launch.id, url=srv.base_url, api="generate",
        name="sweep", spec={"prompt_set": "shared-prefix"}, fingerprint=fingerprint,
        fingerprint_detail=detail or DETAIL_A, status="done", started_at=T0 - 1,
        finished_at=T0 + 5, trusted=True,
        report={"fingerprint": fingerprint, "levels": [{"concurrency": 4, "self_check": {
            "loop_lag_p99_s": 0.001, "client_cpu_pct": 12.0, "trusted": True}}]})
    rid = run.id
    s = ttft_scale
    rows = [
        _req(rid, level=4, seq=0, start=T0 - 1, ttft=5.0, e2e=0.5, warmup=True),
        _req(rid, level=4, seq=1, start=T0 + 0, ttft=0.1 * s, e2e=1.0),
        _req(rid, level=4, seq=2, start=T0 + 1, ttft=0.2 * s, e2e=1.0),
        _req(rid, level=4, seq=3, start=T0 + 1.5, ttft=None, e2e=None, ok=False, error="timeout"),
        _req(rid, level=4, seq=4, start=T0 + 2, ttft=0.3 * s, e2e=1.0),
        _req(rid, level=4, seq=5, start=T0 + 3, ttft=0.4 * s, e2e=1.0),
    ]
    samples = []

    def add(metric: str, points: list[tuple[float, float]]) -> None:
        source = metric.split(".")[0]
        samples.extend({"ts": T0 + dt, "server_id": srv.id, "launch_id": launch.id,
                        "source": source, "metric": metric, "value": v} for dt, v in points)

    add("log.prefill_cached_token", [(0.5, 60), (1.5, 20)])
    add("log.prefill_new_token", [(0.5, 10), (1.5, 10)])
    add("log.gen_throughput_tok_s", [(1, 90), (2, 110)])
    add("log.running_req", [(1, 2), (2, 4)])
    add("log.queue_req", [(0, 0), (1, 20), (3, 5)])
    add("gpu.0.energy_j", [(0, 1000), (4, 1600)])
    add("gpu.1.energy_j", [(0, 500), (4, 900)])
    add("metrics.ttft_p99_s", [(1, 0.5), (2, 0.7)])
    add("metrics.ttft_clamped", [(1, 0), (2, 1)])
    add("api.health_ok", [(0, 1), (1, 1), (2, 0), (3, 1)])
    add("log.running_req", [(50, 99)])  # outside the window: must not count
    events = [
        ("oom", 0.2), ("prefill_oom", 0.4), ("decode_retract", 1), ("decode_retract", 2),
        ("decode_retract", 3), ("server_exit", 4), ("health_down", 2), ("crash", 60),
    ]
    with engine.begin() as conn:
        repo.insert_probe_requests(conn, rows=rows)
        repo.insert_samples(conn, rows=samples)
        repo.insert_events(conn, rows=[{
            "ts": T0 + dt, "server_id": srv.id, "launch_id": launch.id, "kind": k,
            "severity": "warning", "message": f"{k} happened", "raw": None} for k, dt in events])
    return {"server_id": int(srv.id), "launch_id": int(launch.id), "run_id": int(rid)}


def seed_canary_only(engine, *, name: str = "beta") -> int:
    """Server with no price and no probes: canary samples only, in [T0, T0+3]."""
    srv = repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:2", kind="llm")
    pts = [(0, 0.1, 0.5, 1), (1, 0.2, 0.6, 1), (2, 0.3, 0.9, 0), (3, None, None, 1)]
    rows = []
    for dt, ttft, e2e, ok in pts:
        for metric, v in (("canary.ttft_s", ttft), ("canary.e2e_s", e2e), ("canary.ok", ok)):
            if v is not None:
                rows.append({"ts": T0 + dt, "server_id": srv.id, "launch_id": None,
                             "source": "canary", "metric": metric, "value": float(v)})
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
    return int(srv.id)


def seed_levels(engine, *, name: str, levels: dict[float, tuple[float, float]],
                fingerprint: str = "fp-lv", detail: dict[str, Any] | None = None,
                attached: bool = True, n: int = 9, jitter: float = 0.02,
                t0: float = T0) -> dict[str, int | None]:
    """A sweep over several concurrency levels: `levels` maps a level to (gap_s, ttft_s). Each
    level has `n` measured requests starting every gap_s seconds, TTFT ttft_s × (1 - jitter) in
    the first third, ttft_s in the second, ttft_s × (1 + jitter) in the last, and e2e = TTFT + 0.05 s, so its requests/s is about
    1 / gap_s (steady window: the requests that finished by the last start, over (n-1)·gap_s)
    and its TTFT spread over 3 repeats is ttft_s × [1 - jitter, 1 + jitter]. `attached=False`
    stores the run with no server (what `pitwall probe` does against an unknown address)."""
    srv_id = launch_id = None
    if attached:
        srv = repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:3", kind="llm",
                                 gpu_indices=[0], gpu_hourly_usd=2.0)
        launch = repo.create_launch(
            engine, server_id=srv.id, profile_name="prof-" + name, profile_hash="l" * 16,
            argv=["python", "-m", "sglang.launch_server"], env={}, engine_version="0.5.23",
            server_args={"tp_size": 1}, status="ready", started_at=t0 - 100)
        srv_id, launch_id = srv.id, launch.id
    spec_levels = sorted(levels)
    run = repo.create_probe_run(
        engine, server_id=srv_id, launch_id=launch_id, url="http://127.0.0.1:3", api="generate",
        name=f"{name} sweep", spec={}, fingerprint=fingerprint,
        fingerprint_detail=detail or dict(DETAIL_A, levels=spec_levels,
                                          requests_per_level=[n] * len(spec_levels),
                                          warmup_per_level=[0] * len(spec_levels)),
        status="done", started_at=t0, finished_at=t0 + 1000, trusted=True,
        report={"levels": []})
    rows, start = [], t0
    for level in spec_levels:
        gap, ttft = levels[level]
        for seq in range(n):
            t = ttft * (1.0 + jitter * (seq * 3 // n - 1))  # thirds: 1 - j, 1, 1 + j
            rows.append(_req(run.id, level=level, seq=seq, start=start + seq * gap, ttft=t,
                             e2e=t + 0.05))
        start += n * gap + 10.0
    with engine.begin() as conn:
        repo.insert_probe_requests(conn, rows=rows)
    return {"server_id": srv_id, "launch_id": launch_id, "run_id": int(run.id)}
