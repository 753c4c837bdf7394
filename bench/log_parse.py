"""Benchmark: `pitwall parse-log --jsonl` lines/s vs `grep -c batch` on the same 1M-line log.

Run: ``.venv/bin/python bench/log_parse.py [--lines 1000000] [--seed 1]``

The log is generated into a temp dir with the 0.5.23 forms the simulator writes, in a mix
modelled on a busy single-node server with --log-requests off (percent of lines):
decode 30, prefill 15, uvicorn access 35, chatter (loading, warnings, request aborts, cuda graph
capture) 19.9, plus a few events (retractions, an OOM traceback, a health-check failure). One
run times the same function the CLI uses (`main_parse_log`, JSONL written to /dev/null) and the
floor (`grep -c batch`, which only counts matching lines), then prints lines/s and the ratio.
Both run on one core; grep is the floor no Python parser reaches.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectors.sglang.log_cli import main_parse_log  # noqa: E402

CHATTER = [
    "Load weight begin. avail mem=70.12 GB",
    "Using default HuggingFace chat template with detected content format: string",
    "Capture cuda graph begin. This can take up to several minutes. avail mem=12.50 GB",
    "Request is disconnected from the client side (type 1). Abort request obj.rid='9f2c'",
    "INFO:     Waiting for application startup.",
    "Warning: the tokenizer has no pad token; using eos.",
]
TRACEBACK = [
    "Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    '  File "/sglang/srt/model_executor/model_runner.py", line 1890, in forward',
    "    return self.forward_decode(forward_batch)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
]


def generate(path: Path, n_lines: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    t0 = 1_790_000_000.0
    with open(path, "w", encoding="utf-8") as f:
        written = 0
        running, queue = 12, 0
        while written < n_lines:
            t = t0 + written * 0.01
            ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
            r = rnd.random()
            running = max(0, min(256, running + rnd.randint(-3, 3)))
            queue = max(0, queue + rnd.randint(-2, 2))
            if r < 0.30:
                line = (f"[{ts}] Decode batch, #running-req: {running}, #token: "
                        f"{running * 300 + rnd.randint(0, 999)}, token usage: "
                        f"{rnd.random():.2f}, cuda graph: True, gen throughput (token/s): "
                        f"{rnd.uniform(100, 5000):.2f}, #queue-req: {queue}")
            elif r < 0.45:
                new = rnd.randint(1, 4000)
                line = (f"[{ts}] Prefill batch, #new-seq: {rnd.randint(1, 8)}, #new-token: "
                        f"{new}, #cached-token: {rnd.randint(0, new)}, token usage: "
                        f"{rnd.random():.2f}, #running-req: {running}, #queue-req: {queue}, "
                        f"#pending-token: {queue * 500}, cuda graph: False, input throughput "
                        f"(token/s): {rnd.uniform(1000, 90000):.2f}")
            elif r < 0.80:
                line = (f'[{ts}] INFO:     127.0.0.1:{rnd.randint(30000, 60000)} - '
                        f'"POST /v1/chat/completions HTTP/1.1" 200 OK')
            elif r < 0.99995:
                line = f"[{ts}] {rnd.choice(CHATTER)}"
            elif r < 0.99997:
                line = (f"[{ts}] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
                        f"#new_tokens_gained: 812, #new_token_ratio: 0.7000 -> 0.9000")
            elif r < 0.99999:
                line = (f"[{ts}] Health check failed. Server couldn't get a response from "
                        "detokenizer for last 20 seconds.")
            else:
                f.write(f"[{ts}] " + "\n".join(TRACEBACK) + "\n")
                written += len(TRACEBACK)
                continue
            f.write(line + "\n")
            written += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    grep = shutil.which("grep")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "sglang-bench.log"
        generate(log, args.lines, args.seed)
        n = sum(1 for _ in open(log, "rb"))
        size_mb = log.stat().st_size / 1e6
        # warm the page cache so both readers start equal
        with open(log, "rb") as f:
            while f.read(1 << 24):
                pass
        with open(os.devnull, "w", encoding="utf-8") as devnull, \
                open(os.devnull, "w", encoding="utf-8") as errnull:
            t, c = time.perf_counter(), time.process_time()
            main_parse_log(str(log), True, out=devnull, err=errnull)
            ours, ours_cpu = time.perf_counter() - t, time.process_time() - c
        grep_s = grep_cpu = float("nan")
        if grep:
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run([grep, "-c", "batch", str(log)], check=False,
                           stdout=subprocess.PIPE)  # /dev/null makes GNU grep stop early
            grep_s = time.perf_counter() - t
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            grep_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(f"log: {n} lines, {size_mb:.1f} MB")
    print(f"{'tool':<28}{'wall s':>9}{'cpu s':>9}{'lines/s (wall)':>16}")
    print(f"{'pitwall parse-log --jsonl':<28}{ours:>9.3f}{ours_cpu:>9.3f}{n / ours:>16,.0f}")
    print(f"{'grep -c batch':<28}{grep_s:>9.3f}{grep_cpu:>9.3f}{n / grep_s:>16,.0f}")
    print(f"ratio parse-log / grep (wall time): {ours / grep_s:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
