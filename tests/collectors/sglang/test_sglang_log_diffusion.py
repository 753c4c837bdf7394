"""Diffusion log forms (SGLang python/sglang/multimodal_gen) and the legacy LLM forms: one test per form as the source writes it (colours where its logger adds them),
`parse-log --jsonl` as a real subprocess, and the simulator's image server log through the
collector into a real SQLite database."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from collectors.base import CollectorContext, ServerTarget
from collectors.sglang.log import SGLangLogCollector, records_to_rows
from collectors.sglang.log_stream import parse_text
from runner.writer import Batch, BatchWriter
from storage import repo

REPO = Path(__file__).resolve().parents[3]
GREEN, RESET = "\x1b[92m", "\x1b[0;0m"  # logging_utils.py colours for the seconds value
P = "[02-15 13:22:25] "  # configure_logger: "[%(asctime)s] %(message)s", datefmt %m-%d %H:%M:%S


def one(line: str) -> tuple[str, dict[str, object], str | None]:
    recs = parse_text(line)
    assert len(recs) == 1, recs
    return recs[0].kind, recs[0].fields, recs[0].timestamp


@pytest.mark.parametrize(("line", "kind", "fields"), [
    (P + "[DenoisingStage] finished in 35.3833 seconds", "diffusion_stage",
     {"stage": "DenoisingStage", "seconds": 35.3833}),
    (P + "[TextEncodingStage] finished in 0.0506 seconds", "diffusion_stage",
     {"stage": "TextEncodingStage", "seconds": 0.0506}),
    (P + "[SomeFutureStage] finished in 0.0000 seconds", "diffusion_stage",
     {"stage": "SomeFutureStage", "seconds": 0.0}),
    (P + "[DenoisingStage] average time per step: 0.4473 seconds", "diffusion_step",
     {"stage": "DenoisingStage", "avg_step_s": 0.4473}),
    (P + f"Pixel data generated successfully in {GREEN}26.03{RESET} seconds", "diffusion_request",
     {"seconds": 26.03}),
    (P + f"Completed batch processing. Generated 4 outputs in {GREEN}101.50{RESET} seconds",
     "diffusion_batch", {"outputs": 4, "seconds": 101.5}),
    (P + f"Warmed-up request processed in {GREEN}25.10{RESET} seconds (with warmup excluded)",
     "diffusion_warmed_up", {"seconds": 25.1}),
    (P + "Peak GPU memory: 64.58 GB, Remaining GPU memory at peak: 15.07 GB. Components that can "
         "stay resident: ['text_encoder']", "diffusion_memory",
     {"peak_gb": 64.58, "remaining_gb": 15.07}),
    (P + "Peak GPU memory: 64.58 GB, Remaining GPU memory at peak: 15.07 GB. Components that "
         "could stay resident (based on the last request workload): []. Related offload server "
         "args to disable: None", "diffusion_memory", {"peak_gb": 64.58, "remaining_gb": 15.07}),
    (P + "Peak GPU memory: 64.58 GB, Peak allocated: 60.10 GB, Memory pool overhead: 4.48 GB "
         "(6.9%), Remaining GPU memory at peak: 15.07 GB. Components that could stay resident "
         "(based on the last request workload): []. Related offload server args to disable: None",
     "diffusion_memory",
     {"peak_gb": 64.58, "peak_allocated_gb": 60.1, "pool_overhead_gb": 4.48, "remaining_gb": 15.07}),
    (P + "Peak memory usage: 26426.31 MB", "diffusion_memory", {"peak_mb": 26426.31}),
    (P + "Memory usage - Max peak: 26426.31 MB, Avg peak: 20000.00 MB", "diffusion_batch_memory",
     {"max_peak_mb": 26426.31, "avg_peak_mb": 20000.0}),
])
def test_diffusion_form(line: str, kind: str, fields: dict[str, object]) -> None:
    assert one(line) == (kind, fields, "02-15 13:22:25")


def test_fastvideo_formatter_prefix_dates_the_record() -> None:
    # ColoredFormatter: "%(levelname)s %(asctime)s [%(filename)s: %(lineno)d] %(message)s"
    line = "INFO 02-15 13:22:25 [perf_logger.py: 187] [DecodingStage] finished in 0.1041 seconds"
    assert one(line) == ("diffusion_stage", {"stage": "DecodingStage", "seconds": 0.1041},
                         "02-15 13:22:25")


def test_started_lines_tqdm_and_chatter_give_nothing() -> None:
    text = "\n".join([
        P + "[DenoisingStage] started...",
        " 84%|████████▍ | 42/50 [00:29<00:05,  1.41it/s]\r100%|██████████| 50/50 [00:35<00:00]",
        P + "Running pipeline stages: ['input_validation_stage', 'denoising_stage']",
        P + "Output saved to outputs/fox.png",
        P + "Processing prompt 1/1: finished in style",
    ])
    assert parse_text(text) == []


def test_diffusion_runtime_error_is_a_crash_and_an_oom() -> None:
    text = "\n".join([
        P + "[DenoisingStage] Error during execution after 1234.5678 ms: CUDA error: out of memory",
        "Traceback (most recent call last):",
        '  File "perf_logger.py", line 120, in __exit__',
        "    raise",
        "RuntimeError: CUDA error: out of memory",
        P + "[DecodingStage] finished in 0.1041 seconds",
    ])
    kinds = [r.kind for r in parse_text(text)]
    assert kinds == ["crash", "oom", "diffusion_stage"]  # one OOM per crash


def test_oom_inside_an_llm_crash_is_both() -> None:
    text = "\n".join([
        "[2024-07-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "scheduler.py", line 1, in run',
        "    x()",
        "RuntimeError: CUDA error: out of memory",
    ])
    recs = parse_text(text)
    assert [r.kind for r in recs] == ["crash", "oom"]
    assert recs[1].timestamp == "2024-07-01 10:00:00"


def test_legacy_new_fill_batch_and_fsm_cache_line() -> None:
    # python/sglang/srt/managers/router/model_rpc.py (0.1.x, 2024)
    recs = parse_text(
        "new fill batch. #seq: 1. #cached_token: 5. #new_token: 20. #remaining_req: 0. "
        "#running_req: 2. tree_cache_hit_rate: 20.00%.\n"
        "fsm_cache_hit_rate: 50.00%. fsm_cache_avg_init_time: 0.12s. ff_cache_hit_rate: 0.00%. "
        "ff_cache_avg_init_time: 0.00s. ")
    assert recs[0].kind == "prefill" and recs[0].fields == {
        "new_seq": 1, "cached_token": 5, "new_token": 20, "queue_req": 0, "running_req": 2,
        "cache_hit_rate": 20.0}
    assert (recs[1].kind, recs[1].fields) == ("fsm_cache", {
        "fsm_cache_hit_rate": 50.0, "fsm_cache_avg_init_time_s": 0.12,
        "ff_cache_hit_rate": 0.0, "ff_cache_avg_init_time_s": 0.0})


def test_unlabelled_2024_decode_statistic_and_lowercase_retract() -> None:
    recs = parse_text(
        "#running-req: 3, #token: 512, token usage: 0.01, gen throughput (token/s): 123.45, "
        "#queue-req: 0\n"
        "decode out of memory happened, #retracted_reqs: 2, #new_token_ratio: 0.4000 -> 0.5000")
    assert (recs[0].kind, recs[0].fields) == ("decode", {
        "running_req": 3, "num_token": 512, "token_usage": 0.01, "gen_throughput": 123.45,
        "queue_req": 0})
    assert recs[1].kind == "decode_retract" and recs[1].fields["retracted_req"] == 2


def test_sglang_jax_cache_miss() -> None:
    # sgl_jax/srt/managers/scheduler_metrics_mixin.py log_decode_stats
    recs = parse_text(
        "[2025-10-01 10:00:00] Decode batch. #running-req: 1, #token: 40, token usage: 0.00, "
        "gen throughput (token/s): 1.00, #queue-req: 0, #cache_miss: 3\n"
        "[2025-10-01 10:00:01] Decode batch. #running-req: 1, #token: 40, token usage: 0.00, "
        "gen throughput (token/s): 1.00, #queue-req: 0, accept_ratio 80.00%#cache_miss: 2")
    assert recs[0].fields["cache_miss"] == 3
    assert recs[1].fields["accept_ratio"] == 80.0 and recs[1].fields["cache_miss"] == 2


@pytest.mark.parametrize("prefix", ["[TP0] ", "TP0 ", "[DP1 TP8] "])
def test_hand_shortened_prefix(prefix: str) -> None:
    rec = parse_text(prefix + "Decode batch. #running-req: 3, #token: 512, token usage: 0.01, "
                              "gen throughput (token/s): 9.50, #queue-req: 0")[0]
    assert rec.timestamp is None and rec.ranks.get("tp") in (0, 8)
    assert rec.fields["gen_throughput"] == 9.5


def test_records_to_rows_diffusion_metrics() -> None:
    recs = parse_text("\n".join([
        P + "[TextEncodingStage] finished in 0.0500 seconds",
        P + "[DenoisingStage] average time per step: 0.4473 seconds",
        P + "[DenoisingStage] finished in 22.3650 seconds",
        P + "Peak memory usage: 2048.00 MB",
        P + "Peak GPU memory: 64.58 GB, Remaining GPU memory at peak: 15.07 GB. x",
        P + f"Pixel data generated successfully in {GREEN}26.03{RESET} seconds",
        P + f"Completed batch processing. Generated 2 outputs in {GREEN}52.00{RESET} seconds",
        "fsm_cache_hit_rate: 50.00%. fsm_cache_avg_init_time: 0.12s. ff_cache_hit_rate: 25.00%. "
        "ff_cache_avg_init_time: 0.00s.",
    ]))
    res = records_to_rows(recs, ServerTarget(1, "img", "http://x"), now=time.time())
    got = {(s.metric, round(s.value, 6)) for s in res.samples}
    assert got == {
        ("log.diffusion.stage_s.TextEncodingStage", 0.05),
        ("log.diffusion.step_s", 0.4473),
        ("log.diffusion.stage_s.DenoisingStage", 22.365),
        ("log.diffusion.peak_mem_gb", 2.0),  # 2048 MiB / 1024
        ("log.diffusion.peak_mem_gb", 64.58),
        ("log.diffusion.remaining_mem_gb", 15.07),
        ("log.diffusion.request_s", 26.03),
        ("log.diffusion.batch_s", 52.0),
        ("log.diffusion.batch_outputs", 2.0),
        ("log.fsm_cache_hit_rate", 0.5),
        ("log.ff_cache_hit_rate", 0.25),
        ("log.fsm_cache_avg_init_s", 0.12),
        ("log.ff_cache_avg_init_s", 0.0),
    }
    assert not res.events


def test_parse_log_jsonl_subprocess(tmp_path: Path) -> None:
    log = tmp_path / "diffusion.log"
    log.write_text("\n".join([
        P + "[DenoisingStage] started...",
        P + "[DenoisingStage] average time per step: 0.7076 seconds",
        P + "[DenoisingStage] finished in 35.3833 seconds",
        P + f"Pixel data generated successfully in {GREEN}36.82{RESET} seconds",
        P + "Peak GPU memory: 25.81 GB, Remaining GPU memory at peak: 19.18 GB. x",
    ]) + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "collectors.sglang.log_cli", str(log), "--jsonl"],
                         cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    rows = [json.loads(x) for x in out.stdout.splitlines()]
    assert rows == [
        {"line_no": 2, "kind": "diffusion_step", "timestamp": "02-15 13:22:25", "ranks": {},
         "fields": {"stage": "DenoisingStage", "avg_step_s": 0.7076}},
        {"line_no": 3, "kind": "diffusion_stage", "timestamp": "02-15 13:22:25", "ranks": {},
         "fields": {"stage": "DenoisingStage", "seconds": 35.3833}},
        {"line_no": 4, "kind": "diffusion_request", "timestamp": "02-15 13:22:25", "ranks": {},
         "fields": {"seconds": 36.82}},
        {"line_no": 5, "kind": "diffusion_memory", "timestamp": "02-15 13:22:25", "ranks": {},
         "fields": {"peak_gb": 25.81, "remaining_gb": 19.18}},
    ]
    assert "4 records from 5 lines" in out.stderr


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_simulator_image_log_into_the_database(tmp_path: Path, engine) -> None:
    port = _free_port()
    log_path = tmp_path / "image.log"
    cmd = [sys.executable, "-m", "simulator.launch_server", "--model-path", "Qwen/Qwen-Image",
           "--host", "127.0.0.1", "--port", str(port), "--sim-kind", "image",
           "--sim-speed", "50", "--sim-startup-s", "1"]
    with open(log_path, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while "ready to roll" not in log_path.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/images/generations", timeout=60, json={
            "prompt": "a red fox", "size": "256x256", "num_inference_steps": 4,
            "response_format": "b64_json"})
        assert r.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    writer = BatchWriter(engine)
    target = ServerTarget(1, "img", f"http://127.0.0.1:{port}", kind="image",
                          log_path=str(log_path))
    states: dict[str, dict[str, object]] = {}
    ctx = CollectorContext([target], writer.load_state, states.__setitem__)
    col = SGLangLogCollector()
    res = col.poll(ctx)
    col.close()
    writer.put(Batch(res.samples, res.events, dict(states)))
    writer.flush()
    stages = repo.sample_values(engine, server_id=1, metric="log.diffusion.stage_s.DenoisingStage",
                                since=0)
    assert len(stages) >= 1 and float(stages.max()) > 0
    text_enc = repo.sample_values(engine, server_id=1,
                                  metric="log.diffusion.stage_s.TextEncodingStage", since=0)
    assert len(text_enc) == len(stages)
    assert len(repo.sample_values(engine, server_id=1, metric="log.diffusion.request_s",
                                  since=0)) >= 1
    assert len(repo.sample_values(engine, server_id=1, metric="log.diffusion.peak_mem_gb",
                                  since=0)) >= 1
    steps = repo.sample_values(engine, server_id=1, metric="log.diffusion.step_s", since=0)
    assert len(steps) == len(stages) and float(steps.min()) > 0  # one "average time per step" a request
