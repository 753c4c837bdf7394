"""The vLLM half of the launch sandbox, as data: which [env] names a profile may set, and ONE deny
table of the flags and variables that load code, reach a remote service, read or write a path,
or open a port, each with its reason; and the Engine's `check_env`, `check_options`,
`check_profile`, `deny_reason`. Pure (no I/O beyond resolving paths, collectors/launch_paths.py).

Derived from vLLM 0.32.0's parser (vllm-0.32.0-flags.json), vllm/envs.py and the config classes
its JSON flags take (vllm/config/). Rule kinds (collectors/launch_rules.py), as launching/sandbox.py reads them:

| kind | what the value may be | lifted by |
|---|---|---|
| code | nothing: the flag or variable imports Python, a plugin or a library, or lets a client send code | `launch.allow_unsandboxed` naming it |
| remote | nothing: it points the server at a remote service | `launch.allow_unsandboxed` |
| expose | nothing: it lets any client reach something of the host (its local files) | `launch.allow_unsandboxed` |
| model | a model id `org/name` (no URL) or a local path outside the system folders | `launch.allow_unsandboxed` |
| read | a local path outside the system folders (no URL); a value without '/' is a built-in name | `launch.allow_unsandboxed` |
| write | a path that resolves inside Pitwall's data folder | `launch.allow_unsandboxed` |
| port | a port no other part of Pitwall holds | never |
| never | nothing: Pitwall's own (`config`: the server's secrets; `host`, `port`) | never |

A flag is judged by the name vLLM reads (flags.py `canonical`): `trust_remote_code` and the
prefix `trust-remote` are --trust-remote-code to vLLM's parser, so they are to the sandbox.
JSON flags are judged key by key (JSON_KEYS: `kv-transfer-config`'s `kv_connector_module_path`
is code, `compilation-config`'s `debug_dump_path` a write). Cross-check a refusal with
`pitwall profiles validate NAME`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from collectors import launch_paths as paths
from collectors import launch_rules
from collectors.base import Issue
from collectors.flagtable import model_path_option_issue
from collectors.launch_rules import Context, EnvTable, Rule, model_path_issue
from collectors.launch_rules import rules as _rules
from collectors.vllm import flags as vflags

__all__ = ["Context", "Rule"]  # their home is collectors/launch_rules.py; importable from here too


#: Flags (canonical names, no dashes) -> rule.
DENY_FLAGS: dict[str, Rule] = {
    **_rules("never", "vLLM merges that YAML file's flags unchecked, and Pitwall passes its own --config "
             "(the server's secrets, 0600); vLLM reads only one", "config"),
    **_rules("never", "Pitwall sets it from the server's base_url in pitwall.toml", "host", "port", "uds"),
    **_rules("never", "the profile's model_path names the model", "model"),
    **_rules("code", "it runs the model repository's own Python code", "trust-remote-code"),
    **_rules("code", "it imports a Python ASGI middleware by import path", "middleware"),
    **_rules("code", "it imports a Python file as a parser plugin", "tool-parser-plugin", "reasoning-parser-plugin"),
    **_rules("code", "it imports Python classes by qualified name",
             "logits-processors", "worker-extension-cls", "scheduler-cls", "model-class-overrides"),
    **_rules("code", "it loads an IO processor plugin (Python)", "io-processor-plugin"),
    **_rules("code", "a logging dictConfig file can instantiate any Python class", "log-config-file"),
    **_rules("code", "it lets any client send a chat template (a Jinja program)", "trust-request-chat-template"),
    **_rules("remote", "it sends traces to a remote collector", "otlp-traces-endpoint"),
    **_rules("remote", "it sends requests to remote tool servers", "tool-server"),
    **_rules("expose", "it lets any client read local files under that folder (file:// media)",
             "allowed-local-media-path"),
    **_rules("model", "it names the weights, tokenizer or config the server loads",
             "tokenizer", "spec-model", "lora-modules", "hf-config-path"),
    **_rules("read", "the server reads that file", "chat-template", "ssl-keyfile", "ssl-certfile",
             "ssl-ca-certs", "mm-encoder-fp8-scale-path", "generation-config"),
    **_rules("write", "the server writes files there", "download-dir", "mm-encoder-fp8-scale-save-path"),
    **_rules("port", "the server listens on or connects to that port", "grpc-port", "master-port",
             "data-parallel-rpc-port", "data-parallel-supervisor-port"),
}

#: The values a code-loading flag may take without a setting (vLLM's built-ins).
BUILTIN_VALUES: dict[str, frozenset[str]] = {
    "worker-extension-cls": frozenset({""}),
    "worker-cls": frozenset({"auto"}),
    "distributed-executor-backend": frozenset({"mp", "ray", "uni", "external_launcher"}),
}
#: the flags whose other values are import paths of Python classes
CLASS_FLAGS: dict[str, str] = {
    "worker-cls": "it imports a worker class by module path",
    "distributed-executor-backend": "a value other than mp, ray, uni or external_launcher imports an executor class",
}

#: JSON flags -> {key of the JSON object: rule}; the other keys are data.
JSON_KEYS: dict[str, dict[str, Rule]] = {
    "kv-transfer-config": {"kv_connector_module_path": Rule("code", "it imports that Python module as a KV connector")},
    "ec-transfer-config": {"ec_connector_module_path": Rule("code", "it imports that Python module as a connector")},
    "ec-manager-config": {"encoder_cache_manager_cls": Rule("code", "it imports that Python class")},
    "logging-config": {"pylogging_config_file": Rule("code", "a logging dictConfig file can instantiate any Python class")},
    "compilation-config": {
        "inductor_passes": Rule("code", "it imports custom compiler passes"),
        "debug_dump_path": Rule("write", "the server writes compiler dumps there"),
        "cache_dir": Rule("write", "the server writes its compile cache there"),
        "local_cache_dir": Rule("write", "the server writes its compile cache there"),
    },
    "profiler-config": {
        "torch_profiler_dir": Rule("write", "the server writes profiles there"),
        "proton_profiler_dir": Rule("write", "the server writes profiles there"),
    },
    "speculative-config": {"model": Rule("model", "it names the draft model the server loads"),
                           "tokenizer": Rule("model", "it names the draft tokenizer the server loads")},
    "kv-events-config": {"endpoint": Rule("remote", "it publishes KV cache events to that address"),
                         "replay_endpoint": Rule("remote", "it serves KV cache event replays at that address")},
}

#: load formats that fetch weights from a remote service.
REMOTE_LOAD_FORMATS: frozenset[str] = frozenset({"runai_streamer", "runai_streamer_sharded", "tensorizer"})

#: [env] names -> rule (vllm/envs.py; CUDA, NCCL and Hugging Face documentation).
DENY_ENV: dict[str, Rule] = {
    **_rules("code", "vLLM loads those plugins (Python entry points)", "VLLM_PLUGINS"),
    **_rules("code", "vLLM loads the library or binary at that path", "VLLM_NCCL_SO_PATH", "VLLM_CUDART_SO_PATH",
             "VLLM_RUST_FRONTEND_PATH", "VLLM_CUDA_COMPATIBILITY_PATH", "VLLM_NCCL_INCLUDE_PATH",
             "CUDA_INJECTION64_PATH"),
    **_rules("code", "NCCL loads that plugin library", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN"),
    **_rules("code", "a logging dictConfig can instantiate any Python class", "VLLM_LOGGING_CONFIG_PATH"),
    **_rules("code", "it enables development endpoints that let a client change the running server",
             "VLLM_SERVER_DEV_MODE", "VLLM_ALLOW_RUNTIME_LORA_UPDATING"),
    **_rules("code", "PyTorch and Transformers import compiled or remote code from there",
             "TORCH_EXTENSIONS_DIR", "HF_MODULES_CACHE"),
    **_rules("code", "it chooses the CUDA toolkit whose compilers and libraries are used", "CUDA_HOME", "CUDA_PATH"),
    **_rules("remote", "it points model downloads or usage reports at another server",
             "HF_ENDPOINT", "VLLM_USAGE_STATS_SERVER"),
    **_rules("read", "the server reads its configuration or model redirects from there", "VLLM_CONFIG_ROOT",
             "VLLM_MODEL_REDIRECT_PATH", "VLLM_TUNED_CONFIG_FOLDER", "NCCL_TOPO_FILE"),
    **_rules("write", "the server writes files there", "VLLM_CACHE_ROOT", "VLLM_ASSETS_CACHE", "VLLM_MEDIA_CACHE",
             "VLLM_DEBUG_DUMP_PATH", "VLLM_RPC_BASE_PATH", "VLLM_XLA_CACHE_PATH", "VLLM_LORA_RESOLVER_CACHE_DIR",
             "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR", "HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_CACHE",
             "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "NCCL_DEBUG_FILE"),
    **_rules("port", "the server listens on or connects to that port", "VLLM_PORT", "VLLM_DP_MASTER_PORT",
             "MASTER_PORT", "VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_MOONCAKE_BOOTSTRAP_PORT",
             "VLLM_EC_SIDE_CHANNEL_PORT", "VLLM_P2P_SIDE_CHANNEL_PORT"),
}

#: [env] names a profile may set without a setting (explicit names, no prefix families).
ENV_NAMES: frozenset[str] = frozenset({
    # vLLM (vllm/envs.py): tuning and logging knobs that are data
    "VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_CPU_ATTN_SPLIT_KV",
    "VLLM_ATTENTION_BACKEND", "VLLM_USE_V1", "VLLM_LOGGING_LEVEL", "VLLM_LOGGING_PREFIX", "VLLM_LOGGING_COLOR",
    "VLLM_CONFIGURE_LOGGING", "VLLM_LOG_STATS_INTERVAL", "VLLM_DISABLE_LOG_LOGO", "VLLM_NO_USAGE_STATS",
    "VLLM_DO_NOT_TRACK", "VLLM_WORKER_MULTIPROC_METHOD", "VLLM_ENABLE_V1_MULTIPROCESSING",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_DISABLE_COMPILE_CACHE", "VLLM_SKIP_P2P_CHECK", "VLLM_DISABLE_PYNCCL",
    "VLLM_KV_CACHE_LAYOUT", "VLLM_HOST_IP", "VLLM_LOOPBACK_IP", "VLLM_DP_MASTER_IP", "VLLM_API_KEY",
    "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", "VLLM_MEDIA_URL_ALLOW_REDIRECTS",
    # CUDA runtime
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_MODULE_LOADING",
    # NCCL and torch.distributed
    "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE", "GLOO_SOCKET_IFNAME",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_DISTRIBUTED_DEBUG", "MASTER_ADDR",
    # PyTorch
    "PYTORCH_CUDA_ALLOC_CONF", "TORCH_CUDA_ARCH_LIST", "TORCHINDUCTOR_COMPILE_THREADS",
    # Hugging Face
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_ENABLE_HF_TRANSFER", "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_DOWNLOAD_TIMEOUT", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
    # threads, time zone
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ",
})

ENV_TABLE = EnvTable(deny=DENY_ENV, names=ENV_NAMES, engine="vLLM", example="VLLM_LOGGING_LEVEL")


def check_env(env: dict[str, Any], extra_allowed: tuple[str, ...] = (), *,
              allowed: frozenset[str] = frozenset()) -> list[Issue]:
    """[env] names and value types against ENV_TABLE (launch_rules.check_env)."""
    return launch_rules.check_env(env, ENV_TABLE, extra_allowed, allowed=allowed)


def _lora_path(item: str) -> str:
    """The path of one --lora-modules item: NAME=PATH or a JSON object with "path"."""
    return paths.named_path(item, "path")


def check_rule(key: str, rule: Rule, value: Any, *, allowed: frozenset[str], base: Path | None,
               data_dir: Path | None) -> list[Issue]:
    """One flag or variable against its rule (launch_rules.check_rule; port rules: launch_paths.check_ports)."""
    return launch_rules.check_rule(key, rule, value, allowed=allowed, base=base, data_dir=data_dir,
                                   model_item=_lora_path if "lora" in key else str)


def _json_object(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        got = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def _special(key: str, canon: str, value: Any, allowed: frozenset[str], ctx: Context) -> list[Issue]:
    """The checks of a value, not a name: JSON keys, class-path values, remote load formats."""
    if key in allowed or value is None or value is False:
        return []
    issues: list[Issue] = []
    for sub, rule in JSON_KEYS.get(canon, {}).items():
        inner = _json_object(value).get(sub)
        if inner not in (None, "", {}, []):
            issues += check_rule(f"{key}.{sub}", rule, inner, allowed=allowed, base=ctx.data_dir, data_dir=ctx.data_dir)
    if canon in CLASS_FLAGS and str(value) not in BUILTIN_VALUES[canon]:
        issues.append(Issue("error", key, f"{key} = {value!r} is refused: {CLASS_FLAGS[canon]}; a profile is data, never code ({paths.allow_hint(key)})."))
    if canon == "load-format" and str(value) in REMOTE_LOAD_FORMATS:
        issues.append(Issue("error", key, f"{key} = {value!r} is refused: it loads weights from a remote service ({paths.allow_hint(key)})."))
    issues += _nested_code(key, canon, value, allowed)
    if canon == "spec-method" and str(value) == "custom_class":
        issues.append(Issue("error", key, f"{key} = \"custom_class\" is refused: it imports a Python class; a profile is data, never code ({paths.allow_hint(key)})."))
    return issues


#: a key anywhere inside a JSON flag whose value vLLM imports as Python code (a connector's or an
#: offloading spec's module path, a parser plugin file, a class to instantiate)
_CODE_KEY = re.compile(r"module_path|plugin|(?:^|_)cls$|class_name|qualname")


def _dotted(value: Any) -> bool:
    """A dotted import path (`pkg.Name`), as vLLM tells one from a model or a built-in name
    (config/speculative.py `_is_custom_proposer_path`; `resolve_obj_by_qualname`)."""
    text = str(value)
    if not isinstance(value, str) or "/" in text or text.startswith(("http://", "https://", "file://")):
        return False
    parts = text.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def _walk(value: Any, path: str) -> list[tuple[str, str, Any]]:
    """(dotted path, key, value) of every key inside a JSON value, at any depth."""
    out: list[tuple[str, str, Any]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((f"{path}.{k}", str(k), v))
            out += _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _walk(v, f"{path}[{i}]")
    return out


def _nested_code(key: str, canon: str, value: Any, allowed: frozenset[str]) -> list[Issue]:
    """What a JSON flag imports from inside: any key naming a module, plugin or class at any depth
    (a MultiConnector's connectors, an offloading spec), a `backend` or draft `model` given as a
    dotted import path (compilation-config.backend, speculative-config.model), a nested
    `method = "custom_class"`; and a spec-model that is a dotted path (vLLM imports it as a
    proposer class)."""
    if key in allowed:
        return []
    data = _json_object(value) if not isinstance(value, list) else value
    found: list[str] = []
    for where, k, v in _walk(data, key):
        if v in (None, "", {}, []):
            continue
        lk = k.lower()
        judged = where.count(".") == 1 and k in JSON_KEYS.get(canon, {})  # a top-level key JSON_KEYS judges
        if (_CODE_KEY.search(lk) and not judged) or (lk in ("backend", "model") and _dotted(v)) or (
                lk == "method" and v == "custom_class"):
            found.append(f"{where} = {v!r}")
    if canon == "spec-model" and _dotted(value):
        found.append(f"{key} = {value!r}")
    return [Issue("error", key, f"{f} is refused: vLLM imports that as Python code; a profile is data, never "
                               f"code ({paths.allow_hint(key)}).") for f in found]


def judge(model_path: str, flags: dict[str, Any], env: dict[str, Any], ctx: Context) -> list[Issue]:
    """The deny table over a profile: model_path, every [flags] and [env] entry with a rule."""
    issues = model_path_issue(model_path, ctx.allowed, ctx.data_dir)
    ports: dict[str, Any] = {}
    for key, value in flags.items():
        key = str(key)
        canon = vflags.canonical(key)
        if key in vflags.RESERVED:
            continue  # check_flags says it
        allowed = ctx.allowed | (frozenset({key}) if canon in ctx.allowed else frozenset())
        if canon == "worker-extension-cls" and str(value) in BUILTIN_VALUES[canon]:
            continue
        issues += _special(key, canon, value, allowed, ctx)
        rule = DENY_FLAGS.get(canon)
        if rule is not None and rule.kind == "port":
            ports[key] = value
        elif rule is not None:
            issues += check_rule(key, rule, value, allowed=allowed, base=ctx.data_dir, data_dir=ctx.data_dir)
    for key, value in env.items():
        rule = DENY_ENV.get(str(key))
        if rule is not None and rule.kind == "port":
            ports[str(key)] = value
        elif rule is not None and rule.kind not in ("code", "remote"):  # those: check_env
            issues += check_rule(str(key), rule, value, allowed=ctx.allowed, base=ctx.data_dir, data_dir=ctx.data_dir)
    issues += paths.check_ports(ports, own_port=ctx.own_port, server=ctx.server, reserved=ctx.reserved_ports or {})
    return issues


def check_options(entrypoint: str, model_path: str, flags: dict[str, Any]) -> list[Issue]:
    """(The entrypoint is launching/sandbox.py's, against launch.ENTRYPOINTS.) A model_path vLLM would read as an option, and option values (flags.py `check_option_values`)."""
    return model_path_option_issue(model_path, "vLLM") + vflags.check_option_values(flags)


def check_profile(model_path: str, flags: dict[str, Any], env: dict[str, Any], *,
                  allowed: frozenset[str] = frozenset(), data_dir: Path | None = None,
                  reserved_ports: dict[int, tuple[str, str | None]] | None = None,
                  server: str | None = None, own_port: int | None = None) -> list[Issue]:
    """The deny table over a profile (`judge`)."""
    ctx = Context(allowed=allowed, data_dir=data_dir, reserved_ports=reserved_ports, server=server, own_port=own_port)
    return judge(model_path, flags, env, ctx)


def deny_reason(name: str) -> str | None:
    """Why the deny table refuses the flag or variable `name`; None when it has no rule for it."""
    rule = DENY_FLAGS.get(name) or DENY_ENV.get(name)
    if rule is None and name in CLASS_FLAGS:
        return CLASS_FLAGS[name]
    return rule.reason if rule else None
