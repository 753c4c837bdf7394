"""Everything SGLang-specific, behind the Engine description (collectors/base.py): log forms
(log*.py), metric names and aliases (metrics*.py), HTTP endpoints (api*.py), SGLang Diffusion's
stage names (stages.py), the bundled flag table (flags.py + sglang-0.5.23-help.txt), the launch
command and ready line (launch.py), the doctor's rules from its tuning guidance
(doctor_rules.py) and the native `/generate` API's request and stream forms the probe speaks
(native_api.py).
SGLang's own source of each version read is the truth for all of them.

`ENGINE` is what the engine registry (collectors/engines.py) lists under "sglang". Pure modules
are imported here; the collectors (httpx, prometheus_client) only when a factory is called.
"""

from __future__ import annotations

from typing import Any

from collectors.base import Collector, Engine, PromReader
from collectors.sglang import doctor_rules, flags, launch_checks, parser, sandbox, stages
from collectors.sglang.api_parse import HEALTH_PATH, SERVER_INFO_PATHS, version_of
from collectors.sglang.launch import (
    ENTRYPOINTS,
    READY_LINE,
    build_argv,
    config_text,
    split_secrets,
    startup_progress,
)
from collectors.sglang.log_parse import parse_line
from collectors.sglang.native_api import GENERATE
from collectors.sglang.preflight import PREFLIGHT


def _log_collector() -> Collector:
    from collectors.sglang.log import SGLangLogCollector

    return SGLangLogCollector()


def _metrics_collector() -> Collector:
    from collectors.sglang.metrics import SGLangMetricsCollector

    return SGLangMetricsCollector()


def _api_collector() -> Collector:
    from collectors.sglang.api import SGLangApiCollector

    return SGLangApiCollector()


def _parse_log_cli(argv: list[str]) -> int:
    from collectors.sglang.log_cli import parse_log_cli

    return parse_log_cli(argv)


def _parse_metrics_cli(argv: list[str]) -> int:
    from collectors.sglang.metrics import parse_metrics_cli

    return parse_metrics_cli(argv)


def _trace_formats() -> dict[str, Any]:
    from collectors.sglang.reqlog import TRACE_FORMATS

    return dict(TRACE_FORMATS)


def _record_flags(folder: str) -> list[str]:
    """The request metrics exporter (0.5.10+, srt/observability): one JSON line per finished
    request (token counts, cached tokens, latencies) into hourly files of `folder`. Its record is
    the request's meta_info, whose time fields (request_received_ts, the arrival a trace needs)
    the tokenizer manager adds only under --enable-metrics, so that goes with it. `--log-requests`
    is left off: it writes into the server's log, with prompt text from level 1."""
    return ["--enable-metrics", "--export-metrics-to-file", f"--export-metrics-to-file-dir={folder}"]


def _prom_reader() -> PromReader:
    from collectors.sglang.metrics_prom import PromReader as SGLangPromReader

    return SGLangPromReader()


#: where SGLang's definition of a scorecard figure is not every engine's (Engine.definitions)
DEFINITIONS = {
    "radix_hit_rate": "SGLang: prompt tokens matched in the radix cache, token by token (page size "
                      "1 unless --page-size), once per request",
    "retraction_count": "SGLang: decode retractions its log reports (running requests evicted when "
                        "the KV pool runs out, recomputed later)",
}

ENGINE = Engine(
    name="sglang",
    display_name="SGLang",
    collectors={"log": _log_collector, "metrics": _metrics_collector, "api": _api_collector},
    build_argv=build_argv,
    ready_line=READY_LINE,
    startup_progress=startup_progress,
    health_path=HEALTH_PATH,
    server_info_paths=SERVER_INFO_PATHS,
    version_of=version_of,
    check_flags=flags.check_flags,
    check_env=sandbox.check_env,
    flags_version=flags.SGLANG_VERSION,
    entrypoints=ENTRYPOINTS,
    parse_line=parse_line,
    flag_parser=parser.FLAG_PARSER,
    split_secrets=split_secrets,
    config_text=config_text,
    profile_kind=parser.profile_kind,
    preflight=PREFLIGHT,
    check_options=launch_checks.check_options,
    check_router=launch_checks.check_router,
    check_profile=launch_checks.check_profile,
    deny_reason=launch_checks.deny_reason,
    prometheus=_prom_reader,
    image_stages=stages.STAGES,
    commands={"parse-log": _parse_log_cli, "parse-metrics": _parse_metrics_cli},
    tuning_rules=doctor_rules.TUNING,
    native_api=GENERATE,
    trace_formats=_trace_formats,
    record_flags=_record_flags,
    definitions=DEFINITIONS,
)
