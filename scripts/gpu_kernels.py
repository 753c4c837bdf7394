"""Record NVML (with GPM) on a real GPU under the kinds of work that an inference server runs, as
replay fixtures for the GPU-wall verdicts.

Run on a machine with an NVIDIA GPU, PyTorch, transformers, diffusers and nvidia-ml-py (none of
them Pitwall dependencies: Pitwall never imports torch). The models are built from their
published shapes with random bf16 weights (no download): the step costs what the real one costs.

    python3 scripts/gpu_kernels.py --out DIR [--seconds 10] [--interval 0.5] [--only PHASE,...]

Phases (each its own fresh NVML session, recorded while the work runs in a loop beside it):
- idle: nothing runs;
- dit-1024-cfg-graph, dit-1024-b1-eager, dit-512-cfg-eager, dit-512-cfg-graph: one denoising
  step of Qwen-Image's transformer (diffusers' QwenImageTransformer2DModel, 60 dual-stream
  blocks, 20.4 B parameters): a 1024x1024 or 512x512 image (4,096 or 1,024 latent tokens),
  128 text tokens, classifier-free guidance as batch 2; eager, or replayed as a CUDA graph;
- gemv-stream: every weight of that transformer read once per step (x @ W.T at batch 1): the
  pure weight-streaming load;
- llm-decode-eager, llm-decode-graph: a Llama-3-8B-shaped model (transformers'
  LlamaForCausalLM) decoding one token a step at batch 1, eager, or as a CUDA graph over a
  static KV cache;
- llm-prefill: the same model's forward over 16 prompts of 2,048 tokens.

Writes DIR/nvml-<gpu>-<phase>.json (collectors/gpu_record.py's format, with a "work" entry in
its meta: seconds a step, steps, FLOPs a step counted by torch.utils.flop_counter, bytes of
weights a step reads) and DIR-summary.json beside DIR; prints one line a phase. A phase that fails is
said so in the summary (with the error) and the others go on.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.gpu_nvml import NvmlBackend, read_gpus  # noqa: E402
from collectors.gpu_record import ReplayBackend, record  # noqa: E402

PHASES = ("idle", "dit-1024-cfg-graph", "dit-1024-b1-eager", "dit-512-cfg-eager", "dit-512-cfg-graph",
          "gemv-stream", "llm-decode-eager", "llm-decode-graph", "llm-prefill")
TEXT_TOKENS = 128


def _sync() -> None:
    import torch

    torch.cuda.synchronize()


def _timed(step: Callable[[], Any], *, warmup: int = 2, seconds: float = 3.0) -> tuple[float, int]:
    """Seconds a step (mean over as many steps as fit in `seconds`, after `warmup`)."""
    for _ in range(warmup):
        step()
    _sync()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        _sync()
        n += 1
    return (time.perf_counter() - t0) / n, n


def _graphed(fn: Callable[[], Any]) -> Callable[[], Any]:
    """`fn` captured once as a CUDA graph (its inputs are static tensors it closes over)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _flops(fn: Callable[[], Any]) -> float | None:
    try:
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with counter:
            fn()
        return float(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - a count we cannot make is left out, not guessed
        return None


class Work:
    """The models, built once and shared by the phases that use them."""

    def __init__(self) -> None:
        import torch

        torch.set_grad_enabled(False)
        self.torch = torch
        self._dit: Any = None
        self._llm: Any = None

    def dit(self) -> Any:
        if self._dit is None:
            self.drop_llm()
            from diffusers import QwenImageTransformer2DModel

            torch = self.torch
            torch.set_default_dtype(torch.bfloat16)
            with torch.device("cuda"):
                self._dit = QwenImageTransformer2DModel().eval()
            torch.set_default_dtype(torch.float32)
        return self._dit

    def drop_dit(self) -> None:
        self._dit = None
        self.torch.cuda.empty_cache()

    def llm(self) -> Any:
        if self._llm is None:
            self.drop_dit()
            from transformers import LlamaConfig, LlamaForCausalLM

            torch = self.torch
            cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                              num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                              max_position_embeddings=8192, rope_theta=500000.0)
            torch.set_default_dtype(torch.bfloat16)
            with torch.device("cuda"):
                self._llm = LlamaForCausalLM(cfg).eval()
            torch.set_default_dtype(torch.float32)
        return self._llm

    def drop_llm(self) -> None:
        self._llm = None
        self.torch.cuda.empty_cache()

    def weight_bytes(self, model: Any) -> int:
        return sum(p.numel() * p.element_size() for p in model.parameters())

    # -- steps ----------------------------------------------------------------------------------
    def dit_step(self, size: int, batch: int) -> Callable[[], Any]:
        torch, model = self.torch, self.dit()
        side = size // 16  # VAE /8, then 2x2 patches
        img = torch.randn(batch, side * side, 64, device="cuda", dtype=torch.bfloat16)
        txt = torch.randn(batch, TEXT_TOKENS, 3584, device="cuda", dtype=torch.bfloat16)
        t = torch.full((batch,), 0.5, device="cuda", dtype=torch.bfloat16)
        shapes = [[(1, side, side)]] * batch
        return lambda: model(hidden_states=img, encoder_hidden_states=txt, timestep=t, img_shapes=shapes,
                             return_dict=False)

    def gemv_step(self) -> Callable[[], Any]:
        torch, model = self.torch, self.dit()
        weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
        xs = {w.shape[1]: torch.randn(1, w.shape[1], device="cuda", dtype=w.dtype) for w in weights}

        def step() -> None:
            for w in weights:
                torch.nn.functional.linear(xs[w.shape[1]], w)
        return step

    def decode_eager(self, new_tokens: int = 64) -> tuple[Callable[[], Any], int]:
        torch, model = self.torch, self.llm()
        prompt = torch.randint(0, 128000, (1, 128), device="cuda")
        return (lambda: model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                       do_sample=False, pad_token_id=0)), new_tokens

    def decode_graph(self) -> Callable[[], Any]:
        """One decode step at batch 1 over a static KV cache of 4,096 positions, as a CUDA graph
        (the cache position is a device tensor the graph reads, moved on between replays)."""
        from transformers import StaticCache

        torch, model = self.torch, self.llm()
        cache = StaticCache(config=model.config, max_cache_len=4096)
        tok = torch.zeros(1, 1, dtype=torch.long, device="cuda")
        pos = torch.tensor([512], device="cuda")
        replay = _graphed(lambda: model(input_ids=tok, past_key_values=cache, cache_position=pos,
                                        position_ids=pos.unsqueeze(0), use_cache=True))
        done = [0]

        def step() -> None:
            # the cache keeps a fill counter on the device that each replay moves on (its writes
            # then run past the end: a device-side assert after ~1,000 replays of a 1,024 cache):
            # start it over now and then, in place, so the graph's addresses hold
            done[0] += 1
            if done[0] % 512 == 0:
                cache.reset()
            replay()
        return step

    def prefill(self) -> Callable[[], Any]:
        torch, model = self.torch, self.llm()
        ids = torch.randint(0, 128000, (16, 2048), device="cuda")
        return lambda: model.model(input_ids=ids, use_cache=False)


def _phase(work: Work, phase: str) -> tuple[Callable[[], Any] | None, dict[str, Any]]:
    """The step of `phase` and what is known of it (measured: s a step; counted: FLOPs, bytes)."""
    info: dict[str, Any] = {"phase": phase}
    if phase == "idle":
        return None, info
    if phase.startswith("dit-"):
        _, size, mode, how = phase.split("-")
        batch = 2 if mode == "cfg" else 1
        eager = work.dit_step(int(size), batch)
        info.update(image_px=int(size), batch=batch, text_tokens=TEXT_TOKENS, graph=how == "graph",
                    flops=_flops(eager), weight_bytes=work.weight_bytes(work.dit()))
        step = _graphed(eager) if how == "graph" else eager
    elif phase == "gemv-stream":
        step = work.gemv_step()
        info.update(weight_bytes=work.weight_bytes(work.dit()))
    elif phase == "llm-decode-eager":
        step, tokens = work.decode_eager()
        info.update(batch=1, tokens_a_step=tokens, weight_bytes=work.weight_bytes(work.llm()))
    elif phase == "llm-decode-graph":
        step = work.decode_graph()
        info.update(batch=1, tokens_a_step=1, graph=True, weight_bytes=work.weight_bytes(work.llm()))
    elif phase == "llm-prefill":
        eager = work.prefill()
        info.update(batch=16, prompt_tokens=2048, flops=_flops(eager), weight_bytes=work.weight_bytes(work.llm()))
        step = eager
    else:
        raise ValueError(f"unknown phase {phase}")
    info["s_per_step"], info["timed_steps"] = _timed(step)
    if info.get("tokens_a_step"):
        info["s_per_token"] = info["s_per_step"] / info["tokens_a_step"]
    return step, info


def _record_under(step: Callable[[], Any] | None, seconds: float, interval_s: float) -> dict[str, Any]:
    """NVML recorded in a thread while `step` runs in a loop on this thread (torch's grad mode,
    streams and captured graphs belong to the thread that made them): 2 s of the load first, so
    clocks and power have settled, then the recording."""
    out: dict[str, Any] = {}

    def rec() -> None:
        backend = NvmlBackend()
        try:
            out["data"] = record(backend, seconds=seconds, interval_s=interval_s)
        except Exception as exc:  # noqa: BLE001 - said by the caller
            out["error"] = exc
        finally:
            backend.close()

    recorder = threading.Thread(target=rec)
    t0, n = time.monotonic(), 0
    while True:
        if step is not None:
            step()
            n += 1
            if n % 4 == 0:
                _sync()  # a bounded launch queue
        else:
            time.sleep(0.05)
        if not recorder.is_alive():
            if "data" in out or "error" in out:
                break
            if time.monotonic() - t0 >= 2.0:
                recorder.start()
    if step is not None:
        _sync()
    if "error" in out:
        raise out["error"]
    out["data"]["meta"]["steps_while_recorded"] = n
    return out["data"]


def _summary(recording: dict[str, Any]) -> dict[str, Any]:
    readings = [read_gpus(ReplayBackend([f["gpus"]]))[0] for f in recording["frames"][2:]]

    def mean(vals: list[float]) -> float | None:
        return round(sum(vals) / len(vals), 3) if vals else None

    gpm = [r.gpm for r in readings if r.gpm]
    out: dict[str, Any] = {
        "util": mean([r.util_ratio for r in readings if r.util_ratio is not None]),
        "power_w": mean([r.power_w for r in readings if r.power_w is not None]),
        "power_limit_w": mean([r.power_limit_w for r in readings if r.power_limit_w is not None]),
        "sm_clock_mhz": mean([r.sm_clock_hz / 1e6 for r in readings if r.sm_clock_hz is not None]),
        "sm_clock_max_mhz": mean([r.sm_clock_max_hz / 1e6 for r in readings if r.sm_clock_max_hz is not None]),
        "clock_event_reasons": sorted({r.clock_event_reasons for r in readings if r.clock_event_reasons is not None}),
    }
    for key in ("dram_bw_util_ratio", "tensor_any_ratio", "sm_util_ratio", "sm_occupancy_ratio"):
        out[key] = mean([g[key] for g in gpm if key in g])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--only", default="", help="comma-separated phases (default: all)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    phases = [p for p in args.only.split(",") if p] or list(PHASES)
    work = Work()
    summary: dict[str, Any] = {}
    for phase in phases:
        t0 = time.monotonic()
        try:
            step, info = _phase(work, phase)
            data = _record_under(step, args.seconds, args.interval)
            data["meta"]["work"] = info
            card = str(data["frames"][0]["gpus"][0]["fields"].get("name") or "gpu")
            name = re.sub(r"[^a-z0-9]+", "-", card.lower()).strip("-").removeprefix("nvidia-")
            path = out / f"nvml-{name}-{phase}.json"
            path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
            summary[phase] = {**info, **_summary(data), "file": path.name, "took_s": round(time.monotonic() - t0, 1)}
        except Exception as exc:  # noqa: BLE001 - one phase's failure is reported, the rest go on
            summary[phase] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-1500:]}
        print(phase, json.dumps({k: v for k, v in summary[phase].items() if k != "trace"}), flush=True)
        (out.parent / f"{out.name}-summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
