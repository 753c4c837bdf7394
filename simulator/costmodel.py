"""Roofline cost model: GPU specs, model shape, KV pool size and step times (model seconds).

Everything here is pure arithmetic on the launch settings; the scheduler asks it how long one
prefill or decode forward takes and sleeps that long (divided by ``--sim-speed``).

GPU table (per GPU; dense BF16 tensor FLOP/s, HBM bytes/s, NVLink bytes/s one direction):

| gpu  | memory  | HBM BW    | BF16 dense  | NVLink   |
|------|---------|-----------|-------------|----------|
| a100 | 80 GB   | 2.039 TB/s| 312 TFLOP/s | 300 GB/s |
| h100 | 80 GB   | 3.35 TB/s | 989 TFLOP/s | 450 GB/s |
| h200 | 141 GB  | 4.8 TB/s  | 989 TFLOP/s | 450 GB/s |
| b200 | 180 GB  | 8.0 TB/s  | 2250 TFLOP/s| 900 GB/s |
| b300 | 288 GB  | 8.0 TB/s  | 2250 TFLOP/s| 900 GB/s |

Model: ``--sim-model-params`` (e.g. ``8e9`` or ``8B``) or the first ``<N>B``/``<N>b`` in the
model path (default 8B). Layer count, hidden size and KV heads come from the nearest Llama-3-like
shape (1B/3B/8B/70B/405B); KV bytes per token = 2 (K,V) x layers x kv_heads x head_dim x
kv dtype bytes (2 for auto/bf16, 1 for fp8, 0.5 for fp4).

Step times (seconds of model time; constants below):

- decode step = max(memory, compute) + overhead + tp_comm, where
  memory = weight_bytes/tp / (HBM_BW x stream_eff) + KV bytes read/tp / (HBM_BW x MEM_EFF)
  (a decode step streams every weight once through thin matrix-vector products, which reach
  less of the datasheet bandwidth than a copy: the card's measured ``stream_eff``),
  compute = 2 x params x batch / (tp x FLOPS x MFU), overhead = STEP_OVERHEAD_S
  (+ NO_GRAPH_PER_LAYER_S x layers when the batch runs without CUDA graphs: --disable-cuda-graph
  or batch > --cuda-graph-max-bs-decode), tp_comm = 2 x layers x (NCCL_LATENCY_S +
  2(tp-1)/tp x batch x hidden x 2 B / NVLINK_BW) when tp > 1.
- prefill step = max(memory, compute) + overhead + tp_comm with
  compute = (2 x params x new_tokens + 4 x layers x hidden x new_tokens x (cached + new/2)) /
  (tp x FLOPS x MFU) (the second term is attention over the prefix and the causal half).
- fp8 weights (``--quantization fp8`` etc.) halve weight bytes and double FLOPS; 4-bit
  (awq/gptq/...) quarter weight bytes; ``--enable-torch-compile`` takes TORCH_COMPILE_GAIN off
  decode steps up to --torch-compile-max-bs.

KV pool: kv_bytes = mem_fraction_static x GPU memory - weight_bytes/tp - ACTIVATION_RESERVE (per
GPU); max_total_num_tokens = kv_bytes / (kv bytes per token / tp), capped by --max-total-tokens.
Default mem_fraction_static (auto) = 0.88 for tp 1 (0.85 for tp > 1).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

GB = 1e9
GIB = 1024**3

MEM_EFF = 0.80  # achievable fraction of HBM bandwidth (wide reads: KV, activations, copies)
# A batch-1 weight stream (x @ W.T, every weight read once) reaches a smaller share. Measured with
# scripts/gpu_kernels.py (tests/fixtures/gpu-kernels/nvml-<card>-gemv-stream.json): H200 2.19 of
# 4.8 TB/s (the GPU-wall issue's own table read 2.86 on another H200), H100 1.78 of 3.35 TB/s.
# Cards not measured take STREAM_EFF.
STREAM_EFF = 0.60
MFU = 0.55  # achievable fraction of dense tensor FLOP/s
STEP_OVERHEAD_S = 0.0015  # scheduler + sampling + launch per forward with CUDA graphs
NO_GRAPH_PER_LAYER_S = 60e-6  # kernel-launch cost per layer without CUDA graphs
NCCL_LATENCY_S = 8e-6  # per all-reduce
TORCH_COMPILE_GAIN = 0.05
ACTIVATION_RESERVE_BYTES = 2 * GB


@dataclass(frozen=True)
class Work:
    """What one forward asks of one GPU: dense FLOPs and HBM bytes moved (the roofline's two
    sides; simulator/dcgm.py turns them into tensor and DRAM activity)."""

    flops: float
    hbm_bytes: float


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_bytes: float
    hbm_bw: float  # bytes/s
    bf16_flops: float  # FLOP/s dense
    nvlink_bw: float  # bytes/s
    chunked_prefill_size: int  # SGLang's auto default for this class of GPU
    stream_eff: float = STREAM_EFF  # share of hbm_bw a batch-1 weight stream reaches (measured)


GPUS: dict[str, GpuSpec] = {
    "a100": GpuSpec("NVIDIA A100-SXM4-80GB", 80 * GB, 2.039e12, 312e12, 300e9, 4096),
    "h100": GpuSpec("NVIDIA H100 80GB HBM3", 80 * GB, 3.35e12, 989e12, 450e9, 8192, 0.53),
    "h200": GpuSpec("NVIDIA H200", 141 * GB, 4.8e12, 989e12, 450e9, 8192, 0.46),
    "b200": GpuSpec("NVIDIA B200", 180 * GB, 8.0e12, 2250e12, 900e9, 16384),
    "b300": GpuSpec("NVIDIA B300", 288 * GB, 8.0e12, 2250e12, 900e9, 16384),
}

# (params, layers, hidden, kv_heads, head_dim): Llama-3-family shapes.
_SHAPES: list[tuple[float, int, int, int, int]] = [
    (1.2e9, 16, 2048, 8, 64),
    (3.2e9, 28, 3072, 8, 128),
    (8.0e9, 32, 4096, 8, 128),
    (70e9, 80, 8192, 8, 128),
    (405e9, 126, 16384, 8, 128),
]

_FP8_QUANT = {"fp8", "modelopt_fp8", "w8a8_fp8", "w8a8_int8", "compressed-tensors"}
_INT4_QUANT = {"awq", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf", "moe_wna16",
               "mxfp4", "modelopt_fp4"}


@dataclass(frozen=True)
class ModelShape:
    params: float
    layers: int
    hidden: int
    kv_heads: int
    head_dim: int
    arch: str = "LlamaForCausalLM"


def parse_params(text: str) -> float | None:
    """``"8e9"``, ``"8B"``, ``"0.5b"``, ``"70000000000"`` -> parameter count, else None."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bBmM]?)\s*", text)
    if m:
        scale = {"b": 1e9, "m": 1e6, "": 1.0}[m.group(2).lower()]
        return float(m.group(1)) * scale
    try:
        return float(text)
    except ValueError:
        return None


def infer_params(model_path: str) -> float:
    """First ``<N>B`` token of the model name (``Llama-3.1-8B-Instruct`` -> 8e9), default 8e9."""
    m = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", model_path.rsplit("/", 1)[-1])
    return float(m.group(1)) * 1e9 if m else 8e9


def model_shape(params: float) -> ModelShape:
    """Nearest shape by log-distance, hidden scaled so 12 x layers x hidden^2 ~ params."""
    best = min(_SHAPES, key=lambda s: abs(math.log(s[0] / params)))
    _, layers, _, kv_heads, head_dim = best
    hidden = int(math.sqrt(params / (12 * layers)) // 128 * 128) or 128
    return ModelShape(params, layers, hidden, kv_heads, head_dim)


@dataclass(frozen=True)
class CostModel:
    gpu: GpuSpec
    shape: ModelShape
    tp: int
    weight_bytes_per_param: float
    flops_mult: float
    kv_dtype_bytes: float
    cuda_graph: bool
    cuda_graph_max_bs: int
    torch_compile: bool
    torch_compile_max_bs: int

    @property
    def weight_bytes(self) -> float:
        return self.shape.params * self.weight_bytes_per_param

    @property
    def kv_bytes_per_token(self) -> float:
        s = self.shape
        return 2 * s.layers * s.kv_heads * s.head_dim * self.kv_dtype_bytes

    def kv_pool_tokens(self, mem_fraction_static: float) -> int:
        """KV tokens that fit per GPU; <= 0 means the weights do not fit."""
        free = (mem_fraction_static * self.gpu.memory_bytes - self.weight_bytes / self.tp
                - ACTIVATION_RESERVE_BYTES)
        return int(free / (self.kv_bytes_per_token / self.tp))

    def _comm(self, tokens: int) -> float:
        if self.tp <= 1:
            return 0.0
        msg = tokens * self.shape.hidden * 2
        per = NCCL_LATENCY_S + 2 * (self.tp - 1) / self.tp * msg / self.gpu.nvlink_bw
        return 2 * self.shape.layers * per

    def uses_graph(self, batch: int) -> bool:
        return self.cuda_graph and batch <= self.cuda_graph_max_bs

    def _overhead(self, graph: bool) -> float:
        return STEP_OVERHEAD_S + (0.0 if graph else NO_GRAPH_PER_LAYER_S * self.shape.layers)

    @property
    def peak_flops(self) -> float:
        """Dense tensor FLOP/s of one GPU at this launch's weight precision."""
        return self.gpu.bf16_flops * self.flops_mult

    def decode_work(self, batch: int, kv_tokens: int) -> Work:
        """FLOPs and HBM bytes one GPU does in one decode forward (weights + KV read once)."""
        return Work(2 * self.shape.params * batch / self.tp,
                    (self.weight_bytes + kv_tokens * self.kv_bytes_per_token) / self.tp)

    def prefill_work(self, new_tokens: int, cached_tokens: int) -> Work:
        """FLOPs and HBM bytes one GPU does in one prefill forward (weights read once)."""
        s = self.shape
        flops = (2 * s.params * new_tokens
                 + 4 * s.layers * s.hidden * new_tokens * (cached_tokens + new_tokens / 2))
        return Work(flops / self.tp, self.weight_bytes / self.tp)

    def decode_time(self, batch: int, kv_tokens: int) -> float:
        """One decode forward of ``batch`` requests reading ``kv_tokens`` cached tokens."""
        work = self.decode_work(batch, kv_tokens)
        weights = self.weight_bytes / self.tp
        t_mem = (weights / (self.gpu.hbm_bw * self.gpu.stream_eff)
                 + (work.hbm_bytes - weights) / (self.gpu.hbm_bw * MEM_EFF))
        t_cmp = work.flops / (self.peak_flops * MFU)
        t = max(t_mem, t_cmp)
        if self.torch_compile and batch <= self.torch_compile_max_bs:
            t *= 1 - TORCH_COMPILE_GAIN
        return t + self._overhead(self.uses_graph(batch)) + self._comm(batch)

    def prefill_time(self, new_tokens: int, cached_tokens: int) -> float:
        """One prefill (extend) forward of ``new_tokens`` on top of ``cached_tokens`` prefix."""
        work = self.prefill_work(new_tokens, cached_tokens)
        t_cmp = work.flops / (self.peak_flops * MFU)
        t_mem = work.hbm_bytes / (self.gpu.hbm_bw * MEM_EFF)
        # SGLang runs prefill eagerly (no prefill graphs by default).
        return max(t_cmp, t_mem) + self._overhead(False) + self._comm(new_tokens)


def make_cost_model(*, gpu: str, params: float, tp: int, quantization: str | None,
                    kv_cache_dtype: str, cuda_graph: bool, cuda_graph_max_bs: int,
                    torch_compile: bool, torch_compile_max_bs: int) -> CostModel:
    wbytes, fmult = 2.0, 1.0
    if quantization in _FP8_QUANT:
        wbytes, fmult = 1.0, 2.0
    elif quantization in _INT4_QUANT:
        wbytes = 0.5
    kv = {"auto": 2.0, "bf16": 2.0, "bfloat16": 2.0, "fp8_e5m2": 1.0, "fp8_e4m3": 1.0,
          "mxfp8": 1.0, "nvfp4": 0.5, "fp4_mx_block16": 0.5}.get(kv_cache_dtype, 2.0)
    return CostModel(GPUS[gpu], model_shape(params), tp, wbytes, fmult, kv, cuda_graph,
                     cuda_graph_max_bs, torch_compile, torch_compile_max_bs)


# --- Diffusion (``sglang serve`` on a DiT image model) -------------------------------------------
#
# One denoising step of an MMDiT: per GPU, for each of the CFG forward passes (2 per step when
# guidance applies, 1 with guidance off; --enable-cfg-parallel runs the two on two GPU groups),
# compute time FLOPs / (dense BF16 x DIT_MFU) plus HBM time bytes / (HBM_BW x MEM_EFF), in series
# (the weight reads and the elementwise work between the matrix products do not hide under them).
# Tokens: latent tokens = (W/8/2) x (H/8/2) (Qwen-Image VAE downsamples by 8, the DiT patchifies
# 2x2; 1024x1024 -> 4096) plus the prompt's text tokens, all batched requests side by side.
# FLOPs per forward = 2 x DIT_TOKEN_PARAM_SHARE x params x tokens + 4 x layers x hidden x tokens^2
# (attention, joint over text and image). A dual-stream block holds, per stream, attention
# (4 hidden^2), an MLP (8 hidden^2) and a modulation (6 hidden^2) that acts once per image, not
# per token: a token passes its own stream's 12 hidden^2 of the block's 36 (a third of the 20.4 B
# parameters, about 6.8 B). Counting every parameter per token gave 185 TFLOP a forward at 1024²;
# torch's flop counter read 70.6 on the real transformer (tests/fixtures/gpu-kernels).
# Bytes per forward = weights (2 B/param, read once per forward however large the batch) +
# activations ACT_RW_PER_LAYER x tokens x hidden x 2 B x layers (norms, modulation, activations:
# the elementwise share, which scales with bandwidth).
# Qwen-Image: 20.4B DiT params, 60 blocks, hidden 3072 (24 heads x 128) [Qwen-Image technical
# report, arXiv 2508.02324, table 1]; text encoder Qwen2.5-VL 7B; VAE decode ~0.25 s/MP on H100.
# Sequence parallel (ulysses x ring = sp) splits tokens over sp GPUs and adds two all-to-alls
# per block; TP splits weights. Switches: --enable-torch-compile x (1 - TORCH_COMPILE_DIT_GAIN)
# per step; SGLANG_CACHE_DIT_ENABLED=true or a request's enable_teacache skip a share of the
# steps after the warm-up steps (CACHE_SKIP_SHARE). DIT_MFU is fitted to the real transformer on
# an H200 (0.344 s a 1024² CFG step as a CUDA graph, at the 700 W cap); the model then gives
# 0.172 s at batch 1 (measured 0.176) and 0.098 s at 512² with CFG (0.099); recorded here
# (tests/fixtures/gpu-kernels) on an H200 0.336, 0.177 and 0.091 s, on an H100 0.349 s and 0.096 s
# against the model's 0.358 and 0.108.

DIT_TOKEN_PARAM_SHARE = 12 / 36  # the parameters a token passes through (above)
DIT_MFU = 0.456
DIT_LAYERS = 60
DIT_HIDDEN = 3072
ACT_RW_PER_LAYER = 12  # activation tensors of tokens x hidden read or written per block
TORCH_COMPILE_DIT_GAIN = 0.15  # SGLang diffusion docs: torch.compile 10-20 % faster per step
CACHE_SKIP_SHARE = 0.35  # cache-DiT / TeaCache reuse ~1/3 of steps (SGLang diffusion docs)
CACHE_WARMUP_STEPS = 4  # SGLANG_CACHE_DIT_WARMUP default: no step is skipped before these
SP_COMM_PER_LAYER_S = 60e-6  # two all-to-alls per block over NVLink at 1024x1024
TEXT_ENCODER_S = 0.06  # Qwen2.5-VL-7B prompt encode, one request
VAE_DECODE_S_PER_MP = 0.25  # per megapixel per image, on an H100-class GPU
ACTIVATION_BYTES_PER_TOKEN = 2 * DIT_HIDDEN * 2 * 12  # peak live activations per token (B)
WORKSPACE_BYTES = 3 * GB  # CUDA context, allocator pool, VAE workspace
TEXT_ENCODER_BYTES = 16.6 * GB  # Qwen2.5-VL-7B in BF16, on the GPU while it encodes


@dataclass(frozen=True)
class DiffusionCost:
    """Per-request model seconds and bytes of one diffusion server's launch settings."""

    gpu: GpuSpec
    params: float
    num_gpus: int = 1
    tp: int = 1
    sp: int = 1
    cfg_parallel: bool = False
    torch_compile: bool = False
    cache_dit: bool = False

    def tokens(self, width: int, height: int, text_tokens: int) -> int:
        return (width // 16) * (height // 16) + text_tokens

    def forward_work(self, width: int, height: int, text_tokens: int, batch: int = 1) -> Work:
        """FLOPs and HBM bytes of one DiT forward of `batch` requests on one GPU of the group."""
        s = self.tokens(width, height, text_tokens)
        flops = batch * (2 * DIT_TOKEN_PARAM_SHARE * self.params * s + 4 * DIT_LAYERS * DIT_HIDDEN * s * s)
        act = batch * ACT_RW_PER_LAYER * s * DIT_HIDDEN * 2 * DIT_LAYERS
        split = self.tp * self.sp
        return Work(flops / split, 2 * self.params / self.tp + act / split)

    def forward_s(self, width: int, height: int, text_tokens: int, batch: int = 1) -> float:
        """One DiT forward of `batch` requests on one GPU group: compute then HBM time, in
        series (model seconds)."""
        work = self.forward_work(width, height, text_tokens, batch)
        mem_s = work.hbm_bytes / (self.gpu.hbm_bw * MEM_EFF)
        comp_s = work.flops / (self.gpu.bf16_flops * DIT_MFU)
        comm_s = 2 * SP_COMM_PER_LAYER_S * DIT_LAYERS * batch if self.sp > 1 else 0.0
        return comp_s + mem_s + comm_s

    def step_s(self, width: int, height: int, text_tokens: int, *, cfg: bool,
               batch: int = 1) -> float:
        """One denoising step: CFG's passes in series, or side by side with CFG parallel."""
        passes = 2 if cfg and not self.cfg_parallel else 1
        t = passes * self.forward_s(width, height, text_tokens, batch)
        return t * (1 - TORCH_COMPILE_DIT_GAIN) if self.torch_compile else t

    def computed_steps(self, steps: int, *, cache: bool) -> int:
        """Steps whose DiT forward runs; a cache reuses CACHE_SKIP_SHARE of those after warm-up."""
        if not (cache or self.cache_dit) or steps <= CACHE_WARMUP_STEPS:
            return steps
        return steps - int((steps - CACHE_WARMUP_STEPS) * CACHE_SKIP_SHARE)

    def decode_s(self, width: int, height: int, batch: int = 1) -> float:
        h100 = GPUS["h100"].bf16_flops
        return VAE_DECODE_S_PER_MP * width * height / 1e6 * batch * h100 / self.gpu.bf16_flops

    def peak_bytes(self, width: int, height: int, text_tokens: int, batch: int = 1) -> float:
        """Peak reserved memory on GPU 0: DiT weights / tp + text encoder + activations / sp
        + workspace (bytes)."""
        s = self.tokens(width, height, text_tokens)
        cfg_batch = 1 if self.cfg_parallel else 2
        act = batch * cfg_batch * s * ACTIVATION_BYTES_PER_TOKEN / self.sp
        return 2 * self.params / self.tp + TEXT_ENCODER_BYTES + act + WORKSPACE_BYTES
