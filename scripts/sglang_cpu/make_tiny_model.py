"""Write the tiny dummy-weight Llama the real-SGLang test tier serves (TEST ENVIRONMENT ONLY).

Run by the real-SGLang venv's python (it needs the `tokenizers` package installed there):

    <VENV>/bin/python scripts/sglang_cpu/make_tiny_model.py OUT_DIR

OUT_DIR receives:
- tokenizer.json: a byte-level BPE trained locally on the fixed corpus below (deterministic: same
  corpus, same merges), with special tokens <s> (id 0), </s> (id 1), <pad> (id 2);
- tokenizer_config.json: PreTrainedTokenizerFast, <s>/</s>, a one-line Jinja chat_template;
- config.json: LlamaForCausalLM, hidden 64, intermediate 128, 2 layers, 4 heads, 2 KV heads,
  head_dim 16, max_position 2048, bf16, vocab_size == the tokenizer's size (SGLang builds the
  embedding from config.json, so a larger token id than vocab_size would index past it).

Weights never exist: the server runs with `--load-format dummy`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

# Fixed corpus: the sentences the tests send plus some filler so common English pieces merge.
CORPUS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Pitwall watches SGLang inference servers: prefill, decode, cache hits and queues.",
    "Once upon a time there was a tiny model that could only say a few words.",
    "What is the capital of France? The capital of France is Paris.",
    "Tell me a story about a robot who learned to paint.",
    "Count from one to ten: one two three four five six seven eight nine ten.",
    "user: hi there\nassistant: hello, how can I help you today?",
    "A shared system prompt is repeated so the radix cache can reuse its tokens.",
    "0123456789 + - * / = ( ) [ ] { } < > , . ; : ! ? ' \"",
]
SPECIAL_TOKENS = ["<s>", "</s>", "<pad>"]
VOCAB_TARGET = 331  # the size the reference run used; the trainer may stop below it
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def train_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    return tok


def model_config(vocab_size: int) -> dict[str, object]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": vocab_size,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 2,
    }


def tokenizer_config() -> dict[str, object]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "pad_token": "<pad>",
        "add_bos_token": False,
        "model_max_length": 2048,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: make_tiny_model.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer()
    for i, name in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(name) != i:
            print(f"special token {name} did not get id {i}; fix SPECIAL_TOKENS", file=sys.stderr)
            return 1
    tok.save(str(out / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(model_config(vocab), indent=2) + "\n")
    print(f"tiny model written: vocab_size={vocab}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
