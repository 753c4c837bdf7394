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
System folders (SYSTEM_DIRS, plus `~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.kube`, `~/.docker`) are
refused as or under a path. Cross-check a refusal with `pitwall profiles validate NAME`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.sglang.flags import Issue
from collectors.sglang.flags import table_for as flag_table

HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class Rule:
    kind: str  # code | remote | model | read | write | port
    reason: str


def _rules(kind: str, reason: str, *names: str) -> dict[str, Rule]:
    return {n: Rule(kind, reason) for n in names}


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

# not /root: it is the home of a runner started as root, whose ~/.cache holds its models; its
# secret folders are refused as every home's are (HOME_SECRETS)
SYSTEM_DIRS: tuple[str, ...] = ("/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run",
                                "/bin", "/sbin", "/lib", "/lib64", "/usr/bin", "/usr/sbin", "/usr/lib")
HOME_SECRETS: tuple[str, ...] = (".ssh", ".gnupg", ".aws", ".kube", ".docker")


def allow_hint(key: str) -> str:
    return f'to allow it, add "{key}" to launch.allow_unsandboxed in pitwall.toml (never in a profile)'


def resolve(path: str, base: Path | None) -> Path:
    """`path` made absolute against `base` (the server's working folder), `~` expanded, `..` and
    symlinks resolved (the part that does not exist yet is kept as written)."""
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = (base or Path.cwd()) / p
    return Path(os.path.realpath(p))


def system_path(resolved: Path) -> str | None:
    """The system folder `resolved` is (or lies under), else None."""
    if resolved == Path("/"):
        return "/"
    home = Path(os.path.expanduser("~"))
    for d in (*SYSTEM_DIRS, *(str(home / h) for h in HOME_SECRETS)):
        root = Path(os.path.realpath(d))
        if resolved == root or root in resolved.parents:
            return d
    return None


def _looks_remote(value: str) -> bool:
    return "://" in value or bool(_SCHEME.match(value)) and not re.match(r"^[A-Za-z]:[\\/]", value)


def _climbs(value: str) -> bool:
    """A relative path that uses '..' (it would leave the server's working folder)."""
    return not value.startswith(("/", "~")) and ".." in Path(value).parts


def check_model_ref(key: str, value: str, base: Path | None, what: str = "model") -> Issue | None:
    """A model id `org/name`, or a local folder or file that is not a system folder."""
    if _climbs(value):
        return Issue("error", key, f"{key} = {value!r} climbs out of the server's working folder with '..'; write the absolute path.")
    if _looks_remote(value):
        return Issue("error", key, f"{key} = {value!r} is a URL; use a model id like Qwen/Qwen2.5-7B-Instruct or a local folder ({allow_hint(key)}).")
    looks_local = value.startswith(("/", ".", "~")) or not HF_ID.match(value)
    if not looks_local and not os.path.exists(resolve(value, base)):
        return None
    where = system_path(resolve(value, base))
    if where is not None:
        return Issue("error", key, f"{key} = {value!r} is inside the system folder {where}; point it at a {what} folder elsewhere ({allow_hint(key)}).")
    return None


def check_read_path(key: str, value: str, base: Path | None) -> Issue | None:
    if value.lstrip().startswith(("{", "[")):
        return None  # inline JSON (watermark-config, deepep-config)
    if _looks_remote(value):
        return Issue("error", key, f"{key} = {value!r} is a URL; give a local file ({allow_hint(key)}).")
    if _climbs(value.lstrip("@")):
        return Issue("error", key, f"{key} = {value!r} climbs out of the server's working folder with '..'; write the absolute path.")
    if "/" not in value and not value.startswith(("~", ".")):
        return None  # a built-in name (chat-template = "chatml")
    where = system_path(resolve(value.lstrip("@"), base))
    if where is not None:
        return Issue("error", key, f"{key} = {value!r} is inside the system folder {where}; use a file elsewhere ({allow_hint(key)}).")
    return None


def check_write_path(key: str, value: str, base: Path | None, data_dir: Path | None) -> Issue | None:
    if data_dir is None:
        return Issue("error", key, f"{key} writes files, and Pitwall's data folder is unknown here; leave it out ({allow_hint(key)}).")
    root = Path(os.path.realpath(data_dir))
    target = resolve(value, base)
    if target != root and root not in target.parents:
        return Issue("error", key, f"{key} = {value!r} writes outside Pitwall's data folder {root}; use a folder inside it ({allow_hint(key)}).")
    return None


def _values(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, str | int | float) and not isinstance(v, bool)]


def _lora_path(item: str) -> str:
    """The path of one --lora-paths item: PATH, NAME=PATH or a JSON object with lora_path."""
    if item.lstrip().startswith("{"):
        try:
            return str(json.loads(item).get("lora_path", ""))
        except (ValueError, AttributeError):
            return item
    return item.split("=", 1)[1] if "=" in item and not item.startswith(("/", ".")) else item


def check_rule(key: str, rule: Rule, value: Any, *, allowed: frozenset[str], base: Path | None,
               data_dir: Path | None) -> list[Issue]:
    """One flag or variable against its rule (port rules: see check_ports)."""
    if rule.kind == "never":
        return [Issue("error", key, f"{key} cannot be set in a profile: {rule.reason}.")]
    if rule.kind == "port" or key in allowed or value is False or value is None:
        return []
    if rule.kind in ("code", "remote"):
        return [Issue("error", key, f"{key} is refused: {rule.reason}; a profile is data, never code ({allow_hint(key)}).")]
    if isinstance(value, dict):
        value = json.dumps(value)
    out: list[Issue] = []
    for item in _values(value):
        if rule.kind == "model":
            issue = check_model_ref(key, _lora_path(item) if "lora" in key else item, base)
        elif rule.kind == "read":
            issue = check_read_path(key, item, base)
        elif key == "log-requests-target" and item == "stdout":
            issue = None
        else:
            issue = check_write_path(key, item, base, data_dir)
        if issue is not None:
            out.append(issue)
            break
    return out


def port_values(key: str, value: Any, own_port: int | None) -> list[int] | str:
    """The ports a port flag or variable names, or the sentence saying why it is not a port."""
    ports: list[int] = []
    for item in _values(value):
        text = item.strip()
        if key in ("dist-init-addr", "nccl-init-addr"):
            text = text.rsplit(":", 1)[-1] if ":" in text else ""
        if text.startswith("+") and text[1:].isdigit():
            if own_port is None:
                continue  # relative to the server's port, which is not known here
            text = str(own_port + int(text[1:]))
        if not text.isdigit() or not 0 < int(text) < 65536:
            return f"{key} = {item!r} is not a port; give a number from 1 to 65535."
        ports.append(int(text))
    return ports


def check_ports(items: dict[str, Any], *, own_port: int | None, server: str | None,
                reserved: dict[int, tuple[str, str | None]]) -> list[Issue]:
    """Port flags and variables must not take a port Pitwall holds (`reserved`: port -> (what,
    owning server or None)), the server's own port, or one another's."""
    seen: dict[int, str] = {}
    out: list[Issue] = []
    for key, value in items.items():
        got = port_values(key, value, own_port)
        if isinstance(got, str):
            out.append(Issue("error", key, got))
            continue
        for port in got:
            what, owner = reserved.get(port, (None, None))
            if port == own_port:
                what, owner = "the server's own HTTP port", None
            if what is not None and (owner is None or owner != server):
                out.append(Issue("error", key, f"{key} = {port} collides with {what}; pick a port nothing in Pitwall uses."))
            elif port in seen:
                out.append(Issue("error", key, f"{key} = {port} is also given to {seen[port]}; give each its own port."))
            seen.setdefault(port, key)
    return out


_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
#: Never allowed, whatever a setting says: they change which code runs (loader, interpreter,
#: search path) or are Pitwall's own.
ENV_NEVER_PREFIXES: tuple[str, ...] = ("LD_", "DYLD_", "PYTHON", "PITWALL_")
ENV_NEVER_NAMES: frozenset[str] = frozenset({"PATH", "HOME", "SHELL", "BASH_ENV", "ENV", "IFS"})


def env_forbidden(name: str) -> bool:
    return name in ENV_NEVER_NAMES or name.startswith(ENV_NEVER_PREFIXES)


def check_env(env: dict[str, Any], extra_allowed: tuple[str, ...] = (), *,
              allowed: frozenset[str] = frozenset()) -> list[Issue]:
    """[env] names and value types: never a loader/interpreter variable; a DENY_ENV code or
    remote variable only when `allowed` (launch.allow_unsandboxed) names it; otherwise a name of
    ENV_NAMES, of DENY_ENV (its value is judged by check_profile) or of `extra_allowed`
    (launch.allowed_env). A `PREFIX_*` entry there still admits a name, with a warning."""
    issues: list[Issue] = []
    prefixes = tuple(e[:-1] for e in extra_allowed if e.endswith("*"))
    for name, value in env.items():
        if not _ENV_NAME.match(str(name)):
            issues.append(Issue("error", str(name), f"Environment variable name {name!r} is invalid; use capitals, digits and '_' (e.g. NCCL_DEBUG), not starting with a digit."))
            continue
        rule = DENY_ENV.get(name)
        if env_forbidden(name):
            issues.append(Issue("error", name, f"Environment variable {name} is refused: it changes which code runs (loader, interpreter, search path) or is Pitwall's own; a profile is data, never code."))
            continue
        if rule is not None and rule.kind in ("code", "remote") and name not in allowed:
            issues.append(Issue("error", name, f"Environment variable {name} is refused: {rule.reason}; a profile is data, never code ({allow_hint(name)})."))
            continue
        if rule is None and name not in ENV_NAMES and name not in extra_allowed:
            if prefixes and name.startswith(prefixes):
                issues.append(Issue("warning", name, f"Environment variable {name} is allowed only by a prefix entry of launch.allowed_env; prefixes are read for now and will be dropped, so list {name} there by name."))
            else:
                issues.append(Issue("error", name, f"Environment variable {name} is not on the allow-list of SGLang, CUDA, NCCL, PyTorch and Hugging Face variables; add \"{name}\" to launch.allowed_env in pitwall.toml if the server needs it."))
                continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            issues.append(Issue("error", name, f"Environment variable {name} is {value!r}; expected a string, e.g. {name} = \"1\"."))
            continue
        if "\x00" in str(value):
            issues.append(Issue("error", name, f"Environment variable {name} contains a NUL character; remove it."))
    return issues


@dataclass(frozen=True)
class Context:
    """What the rules are judged against: launch.allow_unsandboxed, the data folder (also the
    server's working folder, so relative paths resolve there), the ports Pitwall holds, and the
    server the profile is for (its name and port), when known."""

    allowed: frozenset[str] = frozenset()
    data_dir: Path | None = None
    reserved_ports: dict[int, tuple[str, str | None]] | None = None
    server: str | None = None
    own_port: int | None = None


def check_profile(model_path: str, flags: dict[str, Any], env: dict[str, Any], ctx: Context) -> list[Issue]:
    """The deny table over a profile: model_path, every [flags] and [env] entry with a rule."""
    issues: list[Issue] = []
    if "model_path" not in ctx.allowed and model_path:
        issue = check_model_ref("model_path", model_path, ctx.data_dir)
        if issue is not None:
            issues.append(issue)
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
    issues.extend(check_ports(ports, own_port=ctx.own_port, server=ctx.server, reserved=ctx.reserved_ports or {}))
    return issues


#: the flags that take a load format, and the values that fetch weights from another machine or service.
REMOTE_LOAD_FLAGS: frozenset[str] = frozenset({"load-format", "speculative-draft-load-format"})
REMOTE_LOAD_FORMATS: frozenset[str] = frozenset({"remote", "remote_instance", "private", "runai_streamer"})
