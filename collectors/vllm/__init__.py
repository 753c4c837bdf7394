"""Everything vLLM-specific, behind the Engine description (collectors/base.py): its log lines
(log_parse.py, log.py), metric names of every V1-era release and where their definitions differ
from the first engine's (metrics_alias.py, metrics.py, definitions.py), HTTP endpoints (api*.py),
the bundled flag table of vLLM 0.32.0 (flags.py + vllm-0.32.0-flags.json, read from vLLM's own
parser by scripts/vllm_cpu/extract_flags.py), the launch command, its secrets file and ready
line (launch.py), and the launch sandbox's rules (sandbox*.py). vLLM's source of each version
read is the truth for all of them.

Not here (yet): a Prometheus reader (a vLLM server is scraped directly, never read back from a
Prometheus), the launch preflight (driver, card and memory checks), doctor rules, a native API
(the probe speaks the OpenAI API to it), request-record traces, and a drift guard over its
families. `ENGINE` is what the registry (collectors/engines.py) lists under "vllm".
"""

from __future__ import annotations

from collectors.base import Collector, Engine
from collectors.vllm import flags, sandbox
from collectors.vllm.api_parse import HEALTH_PATH, SERVER_INFO_PATHS, version_of
from collectors.vllm.launch import (
    ENTRYPOINTS,
    READY_LINE,
    build_argv,
    config_text,
    split_secrets,
    startup_progress,
)
from collectors.vllm.log_parse import parse_line


def _log_collector() -> Collector:
    from collectors.vllm.log import VLLMLogCollector

    return VLLMLogCollector()


def _metrics_collector() -> Collector:
    from collectors.vllm.metrics import VLLMMetricsCollector

    return VLLMMetricsCollector()


def _api_collector() -> Collector:
    from collectors.vllm.api import VLLMApiCollector

    return VLLMApiCollector()


#: where vLLM's definition of a scorecard figure is not every engine's (Engine.definitions;
#: metrics_alias.py's docstring has the source lines)
DEFINITIONS = {
    "radix_hit_rate": "vLLM: cached prompt tokens ÷ prompt tokens, counted once per request at "
                      "admission; only whole KV blocks are cached (--block-size: 16 by default on GPUs, 128 "
                      "on the CPU backend), so a shared prefix shorter than a block counts nothing",
    "radix_hit_rate_device": "vLLM: cached prompt tokens from this tier ÷ prompt tokens, whole KV "
                             "blocks only (see the prefix-cache hit rate)",
    "radix_hit_rate_host": "vLLM: cached prompt tokens from CPU offloading ÷ prompt tokens, whole KV "
                           "blocks only",
    "retraction_count": "vLLM: stats lines that report preemptions (`Preemptions: N`, 0.32+; one "
                        "event per 10-s interval however many requests it preempted; earlier V1 "
                        "releases log none, metrics.retracted_requests_per_s counts them all)",
}

ENGINE = Engine(
    name="vllm",
    display_name="vLLM",
    collectors={"log": _log_collector, "metrics": _metrics_collector, "api": _api_collector},
    build_argv=build_argv,
    ready_line=READY_LINE,
    startup_progress=startup_progress,
    health_path=HEALTH_PATH,
    server_info_paths=SERVER_INFO_PATHS,
    version_of=version_of,
    check_flags=flags.check_flags,
    check_env=sandbox.check_env,
    flags_version=flags.VLLM_VERSION,
    entrypoints=ENTRYPOINTS,
    parse_line=parse_line,
    split_secrets=split_secrets,
    config_text=config_text,
    check_options=sandbox.check_options,
    check_profile=sandbox.check_profile,
    deny_reason=sandbox.deny_reason,
    definitions=DEFINITIONS,
)
