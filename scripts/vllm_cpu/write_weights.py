"""Write fixed random weights for the tiny Llama of the vLLM tier (TEST ENVIRONMENT ONLY).

Run by the vLLM venv's python (torch and safetensors are there):

    <VENV>/bin/python scripts/vllm_cpu/write_weights.py MODEL_DIR

MODEL_DIR holds config.json (scripts/vllm_cpu/build_env.sh widened it to head_dim 32); this adds
model.safetensors: every tensor LlamaForCausalLM loads, drawn from a seeded generator (the same
file on every machine), float32. With real weights on disk both engines' CPU tiers can serve the
same model (no `--load-format dummy`, whose random weights differ per engine), so a cross-engine
comparison can count how many greedy outputs match. The scale is large enough (std 0.5 on the
embedding and head) that the next token's logits are far apart: a float rounding difference
between two engines' kernels does not flip a greedy choice.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file


def main(folder: str) -> None:
    cfg = json.loads((Path(folder) / "config.json").read_text())
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    gen = torch.Generator().manual_seed(20261205)

    def rand(*shape: int, std: float) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * std).to(torch.float32).contiguous()

    out = {"model.embed_tokens.weight": rand(vocab, h, std=0.5),
           "model.norm.weight": torch.ones(h), "lm_head.weight": rand(vocab, h, std=0.5)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.update({
            p + "self_attn.q_proj.weight": rand(heads * hd, h, std=0.1),
            p + "self_attn.k_proj.weight": rand(kv * hd, h, std=0.1),
            p + "self_attn.v_proj.weight": rand(kv * hd, h, std=0.1),
            p + "self_attn.o_proj.weight": rand(h, heads * hd, std=0.1),
            p + "mlp.gate_proj.weight": rand(inter, h, std=0.1),
            p + "mlp.up_proj.weight": rand(inter, h, std=0.1),
            p + "mlp.down_proj.weight": rand(h, inter, std=0.1),
            p + "input_layernorm.weight": torch.ones(h),
            p + "post_attention_layernorm.weight": torch.ones(h),
        })
    save_file(out, str(Path(folder) / "model.safetensors"), metadata={"format": "pt"})
    cfg["torch_dtype"] = "float32"
    (Path(folder) / "config.json").write_text(json.dumps(cfg, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
