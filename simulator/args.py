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
| --sim-report-lag | off | add sim_scheduling_lag_ratio, sim_max_scheduling_lag_s, sim_model_time_s to /server_info internal_states (off: the key set stays exactly SGLang's) |
| --sim-version | 0.5.23 | the version /server_info and /v1/loads report, and the /metrics names of that release where a family was renamed since (simulator/metrics.py RENAMED); labels, the other families, log lines and endpoints stay 0.5.23's |

Environment only: ``SGLANG_SIM_DCGM_PORT`` and ``SGLANG_SIM_GPU_INDEX`` start the
dcgm-exporter look-alike (simulator/dcgm.py); a bad value fails like a bad flag.

Each knob can also come from the environment as ``SGLANG_SIM_<KNOB>`` (``SGLANG_SIM_SPEED=50``,
``SGLANG_SIM_FAULT=oom-after=3,hang-after=9``), so a launch profile keeps only real SGLang flags
and puts simulator settings in its [env]; a flag on the command line wins over the variable.
Bad values fail like bad flags (``argument --sim-speed: invalid float value: 'x'``, exit 2).
"""

from __future__ import annotations

import argparse
import os

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
    a("--grammar-backend", type=str, default=None, choices=["xgrammar", "outlines", "llguidance", "none"])
    a("--log-level", type=str, default="info")
    a("--log-level-http", type=str, default=None)
    a("--log-requests", action="store_true")
    a("--log-requests-level", type=int, default=2, choices=[0, 1, 2, 3])
    a("--export-metrics-to-file", action="store_true")
    a("--export-metrics-to-file-dir", type=str, default=None)
    a("--decode-log-interval", type=int, default=40)
    a("--served-model-name", type=str, default=None)
    a("--api-key", type=str, default=None)
    a("--load-format", type=str, default="auto", choices=LOAD_FORMATS)
    a("--context-length", type=int, default=None)
    a("--random-seed", type=int, default=None)
    a("--device", type=str, default=None)
    a("--dtype", type=str, default="auto")
    a("--trust-remote-code", action="store_true")
    a("--config", type=str, default=None)  # merged before parsing (launch_server.merge_config)
    a("--skip-tokenizer-init", action="store_true")
    a("--watchdog-timeout", type=float, default=300)
    a("--stream-interval", type=int, default=1)
    a("--disable-overlap-schedule", action="store_true")
    a("--enable-hierarchical-cache", "--enable-hicache", action="store_true")  # simulator/hicache.py
    a("--hicache-ratio", type=float, default=None)
    a("--hicache-size", type=int, default=0)  # GB; overrides --hicache-ratio
    a("--hicache-write-policy", choices=["write_back", "write_through", "write_through_selective"],
      default="write_through")
    a("--enable-priority-scheduling", action="store_true")  # queue order and `priority` labels
    a("--default-priority-value", type=int, default=None)
    a("--schedule-low-priority-values-first", action="store_true")
    a("--speculative-algorithm", type=str, default=None)  # simulator/speculative.py ALGORITHMS
    a("--speculative-draft-model-path", type=str, default=None)
    a("--speculative-num-steps", type=int, default=None)
    a("--speculative-eagle-topk", type=int, default=None)
    a("--speculative-num-draft-tokens", type=int, default=None)
    # PD disaggregation (simulator/disagg.py); SGLang's choices for the backend
    a("--disaggregation-mode", choices=["null", "prefill", "decode"], default="null")
    a("--disaggregation-transfer-backend", default="mooncake",
      choices=["mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp"])
    a("--disaggregation-bootstrap-port", type=int, default=8998)
    a("--disaggregation-decode-enable-radix-cache", action="store_true")
    a("--sleep-on-idle", action="store_true")  # accepted; the simulator never polls while idle
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
    add_sim_args(p)
    return p


def add_sim_args(p: argparse.ArgumentParser) -> None:
    """The ``--sim-*`` knobs, shared by the LLM and the diffusion parser."""
    a = p.add_argument
    # String defaults from SGLANG_SIM_* go through the same type checks.
    env = os.environ.get
    a("--sim-kind", choices=["llm", "image"], default=env("SGLANG_SIM_KIND", "llm"))
    a("--sim-gpu", choices=SIM_GPUS, default=env("SGLANG_SIM_GPU", "h100"))
    a("--sim-model-params", type=str, default=env("SGLANG_SIM_MODEL_PARAMS"))
    a("--sim-speed", type=float, default=env("SGLANG_SIM_SPEED", "1.0"))
    a("--sim-seed", type=int, default=env("SGLANG_SIM_SEED", "0"))
    a("--sim-fault", action="append", default=None)
    a("--sim-startup-s", type=float, default=env("SGLANG_SIM_STARTUP_S"))
    a("--sim-report-lag", action="store_true",
      default=env("SGLANG_SIM_REPORT_LAG", "") in ("1", "true"))
    a("--sim-version", type=str, default=env("SGLANG_SIM_VERSION", "0.5.23"))


def check_sim_args(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> None:
    """Fold SGLANG_SIM_FAULT into ns.sim_fault and reject knob values argparse cannot."""
    env_faults = [f for f in os.environ.get("SGLANG_SIM_FAULT", "").split(",") if f.strip()]
    ns.sim_fault = [f.strip() for f in env_faults] + (ns.sim_fault or [])
    if ns.sim_kind not in ("llm", "image") or ns.sim_gpu not in SIM_GPUS:
        parser.error(f"SGLANG_SIM_KIND/SGLANG_SIM_GPU: invalid value {ns.sim_kind!r}/{ns.sim_gpu!r}")
    if ns.sim_speed <= 0:
        parser.error("argument --sim-speed: must be > 0")
    from simulator.metrics import version_tuple

    if version_tuple(ns.sim_version) is None:
        parser.error(f"argument --sim-version: {ns.sim_version!r} is not a release from 0.3.6 to 0.5.23 "
                     "(MAJOR.MINOR.PATCH, e.g. 0.4.3)")
    if getattr(ns, "disaggregation_mode", "null") == "prefill" and ns.disaggregation_transfer_backend == "fake":
        # pd_disaggregation_hook.py's assert, raised while the server args resolve
        parser.exit(1, "AssertionError: Prefill server does not support 'fake' as the transfer backend\n")
    if getattr(ns, "export_metrics_to_file", False) and not ns.export_metrics_to_file_dir:  # the LLM parser
        parser.error("--export-metrics-to-file-dir is required when --export-metrics-to-file is enabled")
    from simulator import dcgm, speculative

    try:  # --speculative-* (the LLM parser) and the dcgm-exporter look-alike's environment
        ns.sim_spec = speculative.from_args(getattr(ns, "speculative_algorithm", None),
                                            getattr(ns, "speculative_num_steps", None),
                                            getattr(ns, "speculative_num_draft_tokens", None))
        ns.sim_dcgm_port = dcgm.exporter_port(ns.port or 30000)
        ns.sim_gpu_index = dcgm.gpu_index_base()
        dcgm.mig_profiles()
    except ValueError as exc:
        parser.error(str(exc))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    ns = parser.parse_args(argv)
    check_sim_args(parser, ns)
    return ns
