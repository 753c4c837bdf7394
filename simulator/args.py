"""The launch-flag parser: SGLang 0.5.23 flags an operator uses, plus ``--sim-*`` knobs.

``build_parser()`` returns an ``argparse.ArgumentParser(prog="sglang serve")`` (the prog SGLang
0.5.15+ gives its parser, also under ``python -m sglang.launch_server``), with argparse's default
abbreviation rules, so unknown flags fail as in SGLang: the usage line, then
``sglang serve: error: unrecognized arguments: --enable-radix-cache``, exit status 2; and the
removed ``--cuda-graph-max-bs`` is an *ambiguous option* (it prefixes the -decode/-prefill flags).

Simulator knobs (never passed to a real server):

| flag | default | meaning |
|---|---|---|
| --sim-kind llm/image | llm | LLM server or the ``sglang serve`` diffusion server |
| --sim-gpu | h100 | GPU spec table row (costmodel.GPUS) |
| --sim-model-params | from model name, else 8B | parameter count, ``8e9`` or ``8B`` |
| --sim-speed | 1.0 | model seconds per wall second (10 = ten times faster) |
| --sim-seed | 0 | seed of generated text and random policy |
| --sim-fault | none | repeatable, faults.parse_fault() |
| --sim-startup-s | weights/5 GB/s + 2 s | model seconds from start to ready |
"""

from __future__ import annotations

import argparse

SCHEDULE_POLICIES = ["lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key",
                     "hrrn", "shortest-prefill-first"]
KV_CACHE_DTYPES = ["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4",
                   "fp4_mx_block16"]
QUANTIZATIONS = ["awq", "fp8", "gptq", "marlin", "gptq_marlin", "awq_marlin", "bitsandbytes",
                 "gguf", "modelopt", "modelopt_fp8", "modelopt_fp4", "petit_nvfp4", "w8a8_int8",
                 "w8a8_fp8", "moe_wna16", "qoq", "w4afp8", "mxfp4", "compressed-tensors"]
LOAD_FORMATS = ["auto", "pt", "safetensors", "npcache", "dummy", "sharded_state", "gguf",
                "bitsandbytes", "layered", "remote", "runai_streamer"]
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]
SIM_GPUS = ["h100", "h200", "b200", "b300", "a100"]


def _float_list(text: str) -> float:
    return float(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang serve")
    a = p.add_argument
    a("--model-path", "--model", type=str, required=True, dest="model_path")
    a("--tokenizer-path", type=str, default=None)
    a("--host", type=str, default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--tp-size", "--tensor-parallel-size", type=int, default=1, dest="tp_size")
    a("--dp-size", "--data-parallel-size", type=int, default=1, dest="dp_size")
    a("--pp-size", "--pipeline-parallel-size", type=int, default=1, dest="pp_size")
    a("--ep-size", "--expert-parallel-size", type=int, default=1, dest="ep_size")
    a("--mem-fraction-static", type=float, default=None)
    a("--max-running-requests", type=int, default=None)
    a("--max-total-tokens", type=int, default=None)
    a("--chunked-prefill-size", type=int, default=None)
    a("--max-prefill-tokens", type=int, default=16384)
    a("--schedule-policy", type=str, default="fcfs", choices=SCHEDULE_POLICIES)
    a("--schedule-conservativeness", type=float, default=1.0)
    a("--disable-radix-cache", action="store_true")
    a("--radix-eviction-policy", type=str, default="lru", choices=["lru", "lfu"])
    a("--disable-cuda-graph", action="store_true")
    a("--cuda-graph-max-bs-decode", type=int, default=None)
    a("--cuda-graph-max-bs-prefill", type=int, default=None)
    a("--enable-torch-compile", action="store_true")
    a("--torch-compile-max-bs", type=int, default=32)
    a("--quantization", type=str, default=None, choices=QUANTIZATIONS)
    a("--kv-cache-dtype", type=str, default="auto", choices=KV_CACHE_DTYPES)
    a("--attention-backend", type=str, default=None)
    a("--prefill-attention-backend", type=str, default=None)
    a("--decode-attention-backend", type=str, default=None)
    a("--enable-metrics", action="store_true")
    a("--enable-metrics-for-all-schedulers", action="store_true")
    a("--enable-cache-report", action="store_true")
    a("--log-level", type=str, default="info")
    a("--log-level-http", type=str, default=None)
    a("--log-requests", action="store_true")
    a("--log-requests-level", type=int, default=2, choices=[0, 1, 2, 3])
    a("--decode-log-interval", type=int, default=40)
    a("--served-model-name", type=str, default=None)
    a("--api-key", type=str, default=None)
    a("--load-format", type=str, default="auto", choices=LOAD_FORMATS)
    a("--context-length", type=int, default=None)
    a("--random-seed", type=int, default=None)
    a("--device", type=str, default=None)
    a("--dtype", type=str, default="auto")
    a("--trust-remote-code", action="store_true")
    a("--skip-tokenizer-init", action="store_true")
    a("--watchdog-timeout", type=float, default=300)
    a("--stream-interval", type=int, default=1)
    a("--disable-overlap-schedule", action="store_true")
    a("--page-size", type=int, default=None)
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", "--nccl-init-addr", type=str, default=None, dest="dist_init_addr")
    a("--bucket-time-to-first-token", type=_float_list, nargs="+", default=None)
    a("--bucket-inter-token-latency", type=_float_list, nargs="+", default=None)
    a("--bucket-e2e-request-latency", type=_float_list, nargs="+", default=None)
    # Diffusion server (`sglang serve` on a diffusers model) flags.
    a("--num-gpus", type=int, default=1)
    a("--output-path", type=str, default="outputs/")
    a("--sp-degree", type=int, default=None)
    a("--ulysses-degree", type=int, default=None)
    a("--ring-degree", type=int, default=None)
    a("--model-type", type=str, default=None)
    # Simulator knobs.
    a("--sim-kind", choices=["llm", "image"], default="llm")
    a("--sim-gpu", choices=SIM_GPUS, default="h100")
    a("--sim-model-params", type=str, default=None)
    a("--sim-speed", type=float, default=1.0)
    a("--sim-seed", type=int, default=0)
    a("--sim-fault", action="append", default=[])
    a("--sim-startup-s", type=float, default=None)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    ns = build_parser().parse_args(argv)
    if ns.sim_speed <= 0:
        build_parser().error("argument --sim-speed: must be > 0")
    return ns
