"""Preflight: the migration checklist operators skip, run beside Validate before a relaunch.

What is the engine's own (the CUDA of its torch wheels, the oldest card it runs on, its default
static memory fraction and the words it fails with) comes from its Engine's `preflight`
(collectors/base.py Preflight); an engine without one gets a note and no check.

- driver: the CUDA version the NVIDIA driver supports (NVML's `cuda_driver`, kept in the GPU
  collector's `gpu:info` state) against the CUDA of the torch wheel that engine version installs;
- architecture: the GPU's compute capability (from its name) against the oldest the engine runs
  on (its `min_sm`; it refuses older cards);
- memory plan: weights (the model folder's safetensors, else estimated from its config.json and
  dtype) per GPU, plus the KV cache one request of the context length needs, against the static
  pool (`--mem-fraction-static` x memory) and the memory other processes leave free
  (`gpu.<i>.mem_*` samples; a card in MIG mode: each GPU instance's own `gpu.<i>.mig<GPU_I_ID>.mem_*`,
  listed as "GPU 0 · MIG 3g.71gb (instance 1)", the card's architecture checked once);
- one GPU before tensor parallelism: tp > 1 where one GPU holds weights and a full context.

Blocking (severity "error") only where the launch surely fails: a driver of an older CUDA major
than the wheel's, a card below sm75, weights that do not fit the free memory or leave the static
pool no KV cache (the engine stops with its `no_kv_cache` words).
Everything else is a warning or a note. Files are read from local disk only (the model path or
the Hugging Face cache), with a size cap; never over the network.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.base import Issue, Preflight
from collectors.engines import DEFAULT_ENGINE, get_engine

GIB = 1024**3
CONFIG_CAP_BYTES = 4 * 1024 * 1024  # a config.json is kilobytes; anything larger is not one

#: GPU name fragment -> compute capability (first match wins; the longer names come first).
COMPUTE_CAPABILITY: tuple[tuple[str, tuple[int, int]], ...] = (
    ("GB300", (10, 3)), ("B300", (10, 3)), ("GB200", (10, 0)), ("B200", (10, 0)),
    ("RTX PRO 6000", (12, 0)), ("RTX 50", (12, 0)),
    ("H200", (9, 0)), ("H100", (9, 0)), ("H800", (9, 0)), ("H20", (9, 0)), ("GH200", (9, 0)),
    ("L40", (8, 9)), ("L4", (8, 9)), ("RTX 40", (8, 9)), ("RTX 6000 Ada", (8, 9)),
    ("A100", (8, 0)), ("A800", (8, 0)), ("A30", (8, 0)),
    ("A10", (8, 6)), ("A40", (8, 6)), ("A6000", (8, 6)), ("RTX 30", (8, 6)),
    ("T4", (7, 5)), ("RTX 20", (7, 5)), ("TITAN RTX", (7, 5)),
    ("V100", (7, 0)), ("TITAN V", (7, 0)), ("P100", (6, 0)), ("P40", (6, 1)),
)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total_bytes: float
    used_bytes: float
    mig_id: int | None = None  # a MIG GPU instance of card `index`: its own memory
    label: str = ""  # "GPU 0", "GPU 0 · MIG 3g.71gb (instance 1)"

    @property
    def title(self) -> str:
        return self.label or f"GPU {self.index}"


@dataclass
class HostFacts:
    """What the preflight knows about the host: the driver, the server's GPUs, its engine."""

    cuda_driver: int | None = None  # NVML's form: 12080 = CUDA 12.8
    driver: str | None = None
    engine_version: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    replacing: bool = False  # the server being replaced holds these GPUs; its memory is freed first
    engine: str = DEFAULT_ENGINE  # the server's engine (collectors/engines.py)

    @property
    def name(self) -> str:
        """How messages name the engine (its display_name)."""
        return get_engine(self.engine).display_name

    @property
    def table(self) -> Preflight | None:
        return get_engine(self.engine).preflight


# ---------------------------------------------------------------------------------------------
# driver and architecture


def _version(text: str | None) -> tuple[int, ...] | None:
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", (text or "").strip())
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def wheel_cuda(engine_version: str | None, table: Preflight) -> tuple[int, int] | None:
    """The CUDA (major, minor) the torch wheel of that engine version needs; None when unknown."""
    v = _version(engine_version)
    if v is None:
        return None
    return next((cuda for since, cuda in table.wheel_cuda if v >= since), None)


def check_driver(facts: HostFacts, table: Preflight | None = None) -> list[Issue]:
    table = table or facts.table
    if table is None:
        return [_unchecked(facts)]
    need = wheel_cuda(facts.engine_version, table)
    if facts.cuda_driver is None:
        return [Issue("note", "driver", "The driver's CUDA version is unknown (no NVML reading yet); not checked.")]
    have = (facts.cuda_driver // 1000, facts.cuda_driver % 1000 // 10)
    if need is None:
        return [Issue("note", "driver", f"Driver {facts.driver or '?'} supports CUDA {have[0]}.{have[1]}; the {facts.name} "
                      "version is unknown until the server has run once, so it is not compared.")]
    text = (f"Driver {facts.driver or '?'} supports CUDA {have[0]}.{have[1]}; {facts.name} {facts.engine_version} "
            f"installs torch built for CUDA {need[0]}.{need[1]}")
    if have[0] < need[0]:
        return [Issue("error", "driver", f"{text}: torch stops with 'The NVIDIA driver on your system is too old'. "
                      "Update the NVIDIA driver, or install a torch built for this CUDA.")]
    if have < need:
        return [Issue("warning", "driver", f"{text}: it starts under CUDA's minor-version compatibility, but "
                      "kernels compiled at run time (Triton, FlashInfer) can fail. Update the driver.")]
    return []


def compute_capability(name: str) -> tuple[int, int] | None:
    upper = name.upper()
    return next((cc for frag, cc in COMPUTE_CAPABILITY if frag.upper() in upper), None)


def check_architecture(facts: HostFacts, flags: dict[str, Any], table: Preflight | None = None) -> list[Issue]:
    table = table or facts.table
    if table is None:
        return [_unchecked(facts)]
    out: list[Issue] = []
    cards: set[int] = set()
    for gpu in facts.gpus:
        cc = compute_capability(gpu.name)
        if cc is None or gpu.index in cards:
            continue  # a card's MIG instances share its architecture: one verdict per card
        cards.add(gpu.index)
        sm = f"sm{cc[0]}{cc[1]}"
        if cc < table.min_sm:
            out.append(Issue("error", "gpu", f"GPU {gpu.index} ({gpu.name}) is {sm}; {table.old_card}, so the "
                             "launch fails. Use another card."))
        elif cc < (8, 0):
            out.append(Issue("warning", "gpu", f"GPU {gpu.index} ({gpu.name}) is {sm}: {facts.name} starts, but FlashInfer "
                             "and most fused kernels need sm80; expect the Triton/torch fallbacks and lower speed."))
        quant = str(flags.get("quantization") or "")
        if "fp8" in quant and cc < (8, 9):
            out.append(Issue("warning", "quantization", f"--quantization={quant} on GPU {gpu.index} ({gpu.name}, {sm}): "
                             "FP8 tensor cores start at sm89; it runs as a slower weight-only fallback, if at all."))
    return out


# ---------------------------------------------------------------------------------------------
# the model: its config.json and weights, from local disk only


def model_dir(model_path: str, hf_home: str | None = None) -> Path | None:
    """The local folder of a model path or of a Hugging Face id in the local cache (newest snapshot)."""
    path = Path(os.path.expanduser(model_path))
    if path.is_dir():
        return path
    if "/" not in model_path or model_path.startswith(("/", ".", "~")):
        return None
    home = Path(hf_home or os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    snaps = home / "hub" / f"models--{model_path.replace('/', '--')}" / "snapshots"
    found = sorted(snaps.glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True) if snaps.is_dir() else []
    return found[0].parent if found else None


def read_config(folder: Path) -> dict[str, Any] | None:
    """config.json of a model folder (None when missing, too large or not JSON)."""
    path = folder / "config.json"
    try:
        if path.stat().st_size > CONFIG_CAP_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def safetensors_bytes(folder: Path) -> float | None:
    """The size of the weights on disk (the exact figure, quantized or not), when present."""
    total = sum(p.stat().st_size for p in folder.glob("*.safetensors") if p.exists())
    return float(total) if total else None


def _text(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a (possibly multimodal) config."""
    inner = config.get("text_config") or config.get("llm_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def _dtype_bytes(name: str | None) -> float:
    name = (name or "").lower()
    if "fp8" in name or "float8" in name or "int8" in name:
        return 1.0
    if "int4" in name or name in ("awq", "gptq", "fp4", "nvfp4", "mxfp4"):
        return 0.5
    return 4.0 if name in ("float32", "fp32") else 2.0


def estimate_params(config: dict[str, Any]) -> float | None:
    """Parameters of a decoder from its config (attention, gated MLP or MoE experts, embeddings)."""
    c = _text(config)
    try:
        h, layers, vocab = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["vocab_size"])
    except (KeyError, TypeError, ValueError):
        return None
    heads = int(c.get("num_attention_heads") or 1)
    kv = int(c.get("num_key_value_heads") or heads)
    hd = int(c.get("head_dim") or h // heads)
    attn = 2 * h * heads * hd + 2 * h * kv * hd
    inter = int(c.get("intermediate_size") or 4 * h)
    experts = int(c.get("n_routed_experts") or c.get("num_local_experts") or c.get("num_experts") or 0)
    if experts:
        moe_inter = int(c.get("moe_intermediate_size") or inter)
        mlp = 3 * h * moe_inter * (experts + int(c.get("n_shared_experts") or 0))
    else:
        mlp = 3 * h * inter
    emb = vocab * h * (1 if c.get("tie_word_embeddings") else 2)
    return float(layers * (attn + mlp) + emb)


def kv_bytes_per_token(config: dict[str, Any], flags: dict[str, Any], tp: int) -> float | None:
    """KV cache bytes one token takes on one GPU (MLA's latent is not split by tp)."""
    c = _text(config)
    try:
        layers = int(c["num_hidden_layers"])
    except (KeyError, TypeError, ValueError):
        return None
    kv_dtype = str(flags.get("kv-cache-dtype") or "auto")
    width = _dtype_bytes(kv_dtype if kv_dtype != "auto" else str(flags.get("dtype") or c.get("torch_dtype") or ""))
    if c.get("kv_lora_rank"):
        return float(layers * (int(c["kv_lora_rank"]) + int(c.get("qk_rope_head_dim") or 64)) * width)
    heads = int(c.get("num_attention_heads") or 1)
    kv = int(c.get("num_key_value_heads") or heads)
    hd = int(c.get("head_dim") or int(c.get("hidden_size") or 0) // heads)
    return float(2 * layers * max(1.0, kv / tp) * hd * width)


def weight_bytes(config: dict[str, Any], flags: dict[str, Any], on_disk: float | None) -> float | None:
    """Weights in memory: the safetensors size (halved for online FP8 of 16-bit weights), else
    parameters x the dtype's width."""
    c = _text(config)
    quant = str(flags.get("quantization") or "")
    stored = str(c.get("torch_dtype") or c.get("dtype") or "bfloat16")
    if on_disk:
        online_fp8 = "fp8" in quant and "quantization_config" not in config and _dtype_bytes(stored) == 2.0
        return on_disk / 2 if online_fp8 else on_disk
    params = estimate_params(config)
    if params is None:
        return None
    dtype = str(flags.get("dtype") or "auto")
    return params * _dtype_bytes(quant or (dtype if dtype != "auto" else stored))


# ---------------------------------------------------------------------------------------------
# the memory plan


def _int(flags: dict[str, Any], *names: str, default: int = 1) -> int:
    for name in names:
        if flags.get(name) not in (None, ""):
            try:
                return int(flags[name])
            except (TypeError, ValueError):
                return default
    return default


def memory_plan(config: dict[str, Any], flags: dict[str, Any], facts: HostFacts,
                on_disk: float | None = None, table: Preflight | None = None) -> list[Issue]:
    """Weights and one full-context request's KV cache per GPU against the static pool and the
    free memory of the smallest of the server's GPUs."""
    if not facts.gpus:
        return [Issue("note", "memory", "No GPU memory reading for this server yet; the memory plan is not checked.")]
    tp = _int(flags, "tp-size", "tensor-parallel-size", "tp")
    weights = weight_bytes(config, flags, on_disk)
    per_token = kv_bytes_per_token(config, flags, tp)
    if weights is None or per_token is None:
        return [Issue("note", "memory", "The model's config.json lacks sizes; the memory plan is not checked.")]
    gpu = min(facts.gpus, key=lambda g: g.total_bytes - (0 if facts.replacing else g.used_bytes))
    free = gpu.total_bytes - (0.0 if facts.replacing else gpu.used_bytes)
    frac_set = flags.get("mem-fraction-static")
    table = table or facts.table
    if table is None:
        return [_unchecked(facts)]
    frac = float(frac_set) if frac_set not in (None, "") else table.default_mem_fraction
    static = frac * gpu.total_bytes
    per_gpu = weights / tp
    context = _int(flags, "context-length", default=int(_text(config).get("max_position_embeddings") or 4096))
    source = "safetensors on disk" if on_disk else "estimated from config.json"
    head = (f"Weights {weights / GIB:.1f} GiB ({source}) / tp {tp} = {per_gpu / GIB:.1f} GiB per GPU; {gpu.title} "
            f"({gpu.name}) has {gpu.total_bytes / GIB:.1f} GiB, {free / GIB:.1f} GiB free")
    if per_gpu >= free:
        return [Issue("error", "memory", f"{head}: the weights do not fit, the load runs out of memory. Raise "
                      "--tp-size, quantize, or free the GPU.")]
    kv_room = min(static, free - (1 - frac) * gpu.total_bytes) - per_gpu
    frac_text = f"--mem-fraction-static={frac:g}" + ("" if frac_set not in (None, "") else " (about {facts.name}'s default)")
    if kv_room <= 0:
        return [Issue("error", "mem-fraction-static", f"{head}; {frac_text} leaves no KV cache: {facts.name} stops with "
                      f"{table.no_kv_cache}. Raise it, or raise --tp-size.")]
    tokens = kv_room / per_token
    out: list[Issue] = []
    if tokens < context:
        out.append(Issue("warning", "memory", f"{head}; the KV cache holds about {tokens:,.0f} tokens, less than one "
                         f"request of the context length ({context:,}): long requests wait or are cut. Raise "
                         "--mem-fraction-static or --tp-size, or lower --context-length."))
    if not facts.replacing and free < static:
        out.append(Issue("warning", "memory", f"{head}: other processes hold {gpu.used_bytes / GIB:.1f} GiB, so the "
                         "KV cache is smaller than the same profile gets on an idle GPU."))
    if tp > 1 and weights + context * per_token * tp < static:
        out.append(Issue("warning", "tp-size", f"One GPU holds it: {weights / GIB:.1f} GiB of weights plus one full "
                         f"context's KV cache fit {frac_text} x {gpu.total_bytes / GIB:.0f} GiB. tp {tp} adds an "
                         "all-reduce per layer; try tp 1 (and --dp-size for more GPUs) as a tune candidate."))
    return out


def preflight(model_path: str, flags: dict[str, Any], facts: HostFacts, *, hf_home: str | None = None) -> list[Issue]:
    """Every preflight check of one profile on one host."""
    table = facts.table
    if table is None:
        return [_unchecked(facts)]
    issues = check_driver(facts, table) + check_architecture(facts, flags, table)
    folder = model_dir(model_path, hf_home)
    config = read_config(folder) if folder is not None else None
    if config is None:
        issues.append(Issue("note", "memory", f"No local config.json for {model_path} (model folder or Hugging Face "
                            "cache); the memory plan is not checked."))
        return issues
    assert folder is not None
    return issues + memory_plan(config, flags, facts, safetensors_bytes(folder), table)


def _unchecked(facts: HostFacts) -> Issue:
    return Issue("note", None, f"Pitwall has no preflight table for {facts.name}; the driver, the cards and "
                 "the memory plan are not checked.")


def host_facts(engine: Any, server: Any, *, replacing: bool) -> HostFacts:
    """The driver (GPU collector's `gpu:info`), the newest memory reading of each of the server's
    GPU entries (`gpu.<i>.mem_total_bytes` / `mem_used_bytes`; a card in MIG mode has none, each
    of its instances has its own) and the engine version its last launch ran."""
    from scorecard.gpu_entries import entries_from, load_info
    from storage import repo

    info = load_info(engine, server.id)
    names = {int(g["index"]): str(g.get("name") or "") for g in info.get("gpus") or [] if "index" in g}
    launch = repo.latest_launch(engine, server_id=server.id)
    facts = HostFacts(cuda_driver=info.get("cuda_driver"), driver=info.get("driver"), replacing=replacing,
                      engine=server.engine or DEFAULT_ENGINE,
                      engine_version=launch.engine_version if launch is not None else None)
    names_stored = repo.metric_names(engine, server_id=server.id, prefix="gpu.")
    entries = entries_from(names_stored, info, server.gpu_indices or None)
    keys = [k for e in entries for k in (e.key("mem_total_bytes"), e.key("mem_used_bytes"))]
    latest = repo.latest_samples(engine, server_id=server.id, metrics=keys)
    for e in entries:
        total, used = latest.get(e.key("mem_total_bytes")), latest.get(e.key("mem_used_bytes"))
        if total is None or used is None:
            continue
        facts.gpus.append(Gpu(e.index, names.get(e.index, f"GPU {e.index}"), total[1], used[1], e.mig_id,
                              e.label))
    return facts
