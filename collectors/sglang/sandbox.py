"""The SGLang half of the launch sandbox, as data: which [env] names a profile may set, and ONE
deny table of the flags and variables that load code, reach a remote service, read or write a
path, or open a port, each with its reason. Pure (no I/O beyond resolving paths).

Derived from SGLang 0.5.23 (`sglang serve --help`, bundled as sglang-0.5.23-help.txt; the
diffusion flags in sglang-diffusion-0.5.23-flags.json; `python/sglang/srt/environ.py`) and the
CUDA, NCCL, Triton, PyTorch and Hugging Face environment documentation. Rule kinds:

| kind | what the value may be | lifted by |
|---|---|---|
| code | nothing: the flag or variable loads Python, a plugin or a library, or lets a client send code | `launch.allow_unsandboxed` naming it |
| remote | nothing: it points the server at a remote service or repository | `launch.allow_unsandboxed` |
| model | a model id `org/name` (no scheme, no URL) or a local path outside the system folders | `launch.allow_unsandboxed` |
| read | a local path outside the system folders (no URL); a value without '/' is a built-in name | `launch.allow_unsandboxed` |
| write | a path that resolves (symlinks and `..` followed) inside Pitwall's data folder | `launch.allow_unsandboxed` |
| port | a port (or `host:port`, or `+N` = the server's port + N) that no other part of Pitwall holds | never |
| never | nothing (`config`: Pitwall's own `--config` carries the server's secrets) | never |

`ENV_NAMES` is the allow-list of [env] names, explicit names only (no prefix families); a name
in `DENY_ENV` is judged by its rule instead, and `launch.allowed_env` never lifts a deny rule.
System folders (collectors/launch_paths.py SYSTEM_DIRS, plus `~/.ssh`, `~/.gnupg`, `~/.aws`,
`~/.kube`, `~/.docker`) are refused as or under a path; the judgements every engine shares (paths,
ports, [env] names) live in collectors/launch_paths.py and launch_rules.py. Cross-check a refusal with `pitwall profiles validate NAME`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectors import launch_paths as paths
from collectors import launch_rules
from collectors.launch_paths import allow_hint
from collectors.launch_rules import Context, EnvTable, Rule, model_path_issue
from collectors.launch_rules import rules as _rules
from collectors.sglang.flags import Issue
from collectors.sglang.flags import table_for as flag_table

__all__ = ["Context", "Rule"]  # their home is collectors/launch_rules.py; importable from here too

#: Flags (no dashes) of the LLM and diffusion servers -> rule. Aliases are listed as well.
DENY_FLAGS: dict[str, Rule] = {
    **_rules("never", "SGLang merges that YAML file's flags unchecked, and Pitwall passes its own "
             "--config (the server's secrets, 0600); SGLang reads only one", "config"),
    **_rules("code", "it runs the model repository's own Python code", "trust-remote-code"),
    **_rules("code", "it lets any client send a Python logit processor for the server to run",
             "enable-custom-logit-processor"),
    **_rules("code", "it imports a Python function by module path", "custom-weight-loader"),
    **_rules("code", "it attaches Python hooks, named by import path, to the model", "forward-hooks"),
    **_rules("code", "it starts a Python module of its own beside the server", "sidecar", "sidecar-args"),
    **_rules("code", "it lets a client replace the chat template (a Jinja program)",
             "trust-request-chat-template"),
    **_rules("code", "it names a Python module to import as a cache backend",
             "unified-cache-external-linker-config", "hicache-storage-backend-extra-config"),
    **_rules("remote", "it sends requests to remote tool servers", "tool-server"),
    **_rules("remote", "it sends traces to a remote collector", "otlp-traces-endpoint"),
    **_rules("remote", "it connects to remote encoder servers", "encoder-urls", "encoder-register-urls"),
    **_rules("remote", "it loads weights from another machine",
             "remote-instance-weight-loader-seed-instance-ip"),
    **_rules("model", "it names the weights or tokenizer the server loads",
             "tokenizer-path", "speculative-draft-model-path", "lora-paths", "lora-path", "uno-lora-path",
             "kt-weight-path", "modelopt-checkpoint-restore-path", "model-checksum",
             "transformer-weights-path"),
    **_rules("read", "the server reads that file",
             "chat-template", "completion-template", "quantization-param-path", "speculative-token-map",
             "speculative-adaptive-config", "speculative-dspark-sps-table-path",
             "speculative-dspark-confidence-sts-path", "speculative-ngram-external-corpus-path",
             "decrypted-config-file", "decrypted-draft-config-file", "lmcache-config-file",
             "flexkv-config-file", "dllm-algorithm-config", "pdmux-config-path", "msprobe-dump-config",
             "ssl-keyfile", "ssl-certfile", "ssl-ca-certs", "rl-quant-profile",
             "debug-tensor-dump-input-file", "watermark-config", "deepep-config", "pipeline-config-path",
             "prompt-file-path", "mask-strategy-file-path"),
    **_rules("write", "the server writes files there",
             "crash-dump-folder", "debug-tensor-dump-output-folder", "modelopt-checkpoint-save-path",
             "modelopt-export-path", "export-metrics-to-file-dir", "file-storage-path", "download-dir",
             "spec-trace-dir", "ple-offload-dir", "log-requests-target", "weight-cache-socket",
             "output-path", "input-save-path"),
    **_rules("port", "the server listens on or connects to that port",
             "nccl-port", "grpc-port", "gated-launch-port", "smg-http-sidecar-port",
             "engine-info-bootstrap-port", "disaggregation-bootstrap-port", "encoder-bootstrap-port",
             "remote-instance-weight-loader-seed-instance-service-port", "dist-init-addr",
             "nccl-init-addr", "master-port", "scheduler-port", "webui-port"),
    # the router (sglang_router.launch_router, sglang-router-0.3.2-flags.json)
    **_rules("never", "the router takes secrets only on its command line, which every user of the host "
             "can read (ps); put it behind a proxy that holds the key instead",
             "control-plane-api-keys", "oracle-password"),
    **_rules("remote", "the router reaches a remote service for it",
             "postgres-db-url", "redis-url", "oracle-connect-descriptor", "oracle-tns-alias", "jwt-jwks-uri",
             "service-discovery", "enable-igw"),
    **_rules("code", "it lets the router call tools named in that file (MCP servers)", "mcp-config-path"),
    **_rules("read", "the router reads that file",
             "tls-cert-path", "tls-key-path", "client-cert-path", "client-key-path", "ca-cert-paths",
             "oracle-wallet-path"),
    **_rules("write", "the router writes files there", "log-dir"),
    **_rules("port", "the router listens on that port", "prometheus-port", "service-discovery-port"),
}

#: [env] names -> rule (CUDA, NCCL, Triton, PyTorch, Hugging Face docs; SGLang's environ.py).
DENY_ENV: dict[str, Rule] = {
    **_rules("code", "the CUDA driver loads that library into the server", "CUDA_INJECTION64_PATH"),
    **_rules("code", "NCCL loads that plugin library", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN",
             "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN"),
    **_rules("code", "Triton runs or loads the binary or library at that path", "TRITON_PTXAS_PATH",
             "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_LIBCUDA_PATH", "TRITON_LIBDEVICE_PATH"),
    **_rules("code", "it chooses the CUDA toolkit whose compilers and libraries are used",
             "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"),
    **_rules("code", "SGLang imports that Python package", "SGLANG_EXTERNAL_MODEL_PACKAGE",
             "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE", "SGLANG_PLUGINS", "SGLANG_HTTP_SERVER_APP_PATH"),
    **_rules("code", "a logging dictConfig can instantiate any Python class", "SGLANG_LOGGING_CONFIG_PATH"),
    **_rules("code", "PyTorch and Transformers import compiled or remote code from there",
             "TORCH_EXTENSIONS_DIR", "HF_MODULES_CACHE"),
    **_rules("remote", "it points model (and remote-code) downloads at another server", "HF_ENDPOINT"),
    **_rules("read", "the server reads that file", "NCCL_TOPO_FILE"),
    **_rules("write", "the server writes files there", "HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_CACHE",
             "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "SGLANG_CACHE_DIR",
             "SGLANG_TORCH_PROFILER_DIR", "PROMETHEUS_MULTIPROC_DIR", "NCCL_DEBUG_FILE"),
    **_rules("port", "the server listens on or connects to that port", "MASTER_PORT",
             "SGLANG_GRPC_PORT", "SGLANG_PORT", "SGLANG_TCP_STORE_PORT", "SGLANG_SIM_DCGM_PORT"),
}

#: [env] names a profile may set without a setting (explicit names, no prefix families).
ENV_NAMES: frozenset[str] = frozenset({
    # SGLang (0.5.23 environ.py) and the bundled simulator's knobs (simulator/args.py)
    "SGLANG_LOG_MS", "SGLANG_LOG_FORWARD_ITERS", "SGLANG_HEALTH_CHECK_TIMEOUT",
    "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "SGLANG_ENABLE_METRICS_DEVICE_TIMER",
    "SGLANG_USE_CPU_ENGINE", "SGLANG_IO_WORKERS", "SGLANG_CACHE_DIT_ENABLED",
    "SGLANG_SIM_KIND", "SGLANG_SIM_GPU", "SGLANG_SIM_MODEL_PARAMS", "SGLANG_SIM_SPEED", "SGLANG_SIM_SEED",
    "SGLANG_SIM_FAULT", "SGLANG_SIM_STARTUP_S", "SGLANG_SIM_REPORT_LAG", "SGLANG_SIM_GPU_INDEX", "SGLANG_SIM_VERSION",
    "SGLANG_SIM_SPEC_ACCEPT",
    # CUDA runtime
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_MODULE_LOADING",
    # NCCL and torch.distributed
    "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX",
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_NET_GDR_LEVEL",
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE",
    "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE", "NCCL_TIMEOUT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_DISTRIBUTED_DEBUG",
    "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "MASTER_ADDR",
    # PyTorch
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NVML_BASED_CUDA_CHECK", "TORCH_CUDA_ARCH_LIST",
    "TORCHINDUCTOR_COMPILE_THREADS",
    # Hugging Face
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_ENABLE_HF_TRANSFER",
    "HF_HUB_DISABLE_TELEMETRY", "HF_HUB_DOWNLOAD_TIMEOUT", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
    # threads, time zone
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ",
})


def _lora_path(item: str) -> str:
    """The path of one --lora-paths item: PATH, NAME=PATH or a JSON object with lora_path."""
    return paths.named_path(item, "lora_path", bare=("/", "."))


def check_rule(key: str, rule: Rule, value: Any, *, allowed: frozenset[str], base: Path | None,
               data_dir: Path | None) -> list[Issue]:
    """One flag or variable against its rule (launch_rules.check_rule; port rules: ADDR_FLAGS and
    launch_paths.check_ports). `@PATH` is a file to SGLang; log-requests-target may be stdout."""
    return launch_rules.check_rule(key, rule, value, allowed=allowed, base=base, data_dir=data_dir,
                                   model_item=_lora_path if "lora" in key else str, at_file=True,
                                   passes=("stdout",) if key == "log-requests-target" else ())


#: the flags whose value is `host:port` (their port is judged)
ADDR_FLAGS: frozenset[str] = frozenset({"dist-init-addr", "nccl-init-addr"})

ENV_TABLE = EnvTable(deny=DENY_ENV, names=ENV_NAMES, engine="SGLang", example="NCCL_DEBUG")


def check_env(env: dict[str, Any], extra_allowed: tuple[str, ...] = (), *,
              allowed: frozenset[str] = frozenset()) -> list[Issue]:
    """[env] names and value types against ENV_TABLE (launch_rules.check_env)."""
    return launch_rules.check_env(env, ENV_TABLE, extra_allowed, allowed=allowed)


def check_profile(model_path: str, flags: dict[str, Any], env: dict[str, Any], ctx: Context) -> list[Issue]:
    """The deny table over a profile: model_path, every [flags] and [env] entry with a rule."""
    issues = model_path_issue(model_path, ctx.allowed, ctx.data_dir)
    ports: dict[str, Any] = {}
    names = flag_table(flags)
    for table, deny in ((flags, DENY_FLAGS), (env, DENY_ENV)):
        for key, value in table.items():
            key = str(key)
            # an alias is judged as the flag it spells (speculative-draft-model is
            # speculative-draft-model-path to SGLang's parser)
            spec = names.get(key) if table is flags else None
            canon = spec.name if spec is not None else key
            allowed = ctx.allowed | (frozenset({key}) if canon in ctx.allowed else frozenset())
            if table is flags and canon in REMOTE_LOAD_FLAGS and str(value) in REMOTE_LOAD_FORMATS \
                    and key not in allowed:
                issues.append(Issue("error", key, f"{key} = {value!r} is refused: it loads weights from a remote service ({allow_hint(key)})."))
            rule = deny.get(key) or deny.get(canon)
            if rule is None:
                continue
            if rule.kind == "port":
                ports[key] = value
            elif table is flags or rule.kind not in ("code", "remote"):  # env code/remote: check_env
                issues.extend(check_rule(key, rule, value, allowed=allowed, base=ctx.data_dir,
                                         data_dir=ctx.data_dir))
    issues.extend(paths.check_ports(ports, own_port=ctx.own_port, server=ctx.server, reserved=ctx.reserved_ports or {},
                                    addr_keys=ADDR_FLAGS))
    return issues


#: the flags that take a load format, and the values that fetch weights from another machine or service.
REMOTE_LOAD_FLAGS: frozenset[str] = frozenset({"load-format", "speculative-draft-load-format"})
REMOTE_LOAD_FORMATS: frozenset[str] = frozenset({"remote", "remote_instance", "private", "runai_streamer"})
