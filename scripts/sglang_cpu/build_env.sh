#!/usr/bin/env bash
# Build the real-SGLang 0.5.23 CPU environment for Pitwall's `real_sglang` test tier.
#
# TEST ENVIRONMENT ONLY. Nothing here is part of Pitwall. It builds, step by step:
# a venv with the local CPU torch 2.13.0 wheel, sglang 0.5.23
# installed without its CUDA dependencies, the non-CUDA requirements (requirements.txt), and two
# test-environment shims:
#   1. torchvision guard: PyPI's torchvision 0.28.0 is a CUDA build whose _C.so cannot load next to
#      CPU torch; two `register_fake` decorators in torchvision/_meta_registrations.py are left
#      unguarded and crash `import torchvision`. We guard them with the `_has_ops()` check the same
#      file uses everywhere else (a sed on the installed file in THIS venv only).
#   2. sgl_kernel stub: shim/sgl_kernel is an import-only stand-in, copied to $DIR/shim and put on
#      this venv's path by a .pth file (test venv only). Its functions raise if ever called.
#
# Layout (outside the repository):
#   $DIR/venv                     the virtualenv
#   $DIR/shim                     PYTHONPATH entry holding the sgl_kernel stub
#   $DIR/model                    tiny LlamaForCausalLM config + locally trained tokenizer
#   $DIR/recipe.sha256            hash of this script, requirements.txt, make_tiny_model.py and shims
#   $DIR/pip-freeze.txt           what pip resolved (diagnostics)
#   $DIR/pitwall-sglang-cpu.env   KEY=VALUE lines (PYTHON, SHIM, MODEL, VENV, ...) for tests/launcher
# DIR defaults to ${PITWALL_SGLANG_CPU_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pitwall/sglang-cpu}.
#
# Idempotent: when recipe.sha256 matches the current recipe and the env file exists, nothing is
# rebuilt. Any change to the recipe files rebuilds venv, shim and model from scratch. The hash is
# written last, so an interrupted build is rebuilt on the next run. `--force` rebuilds regardless.
# Needs: python3.11, the local torch-2.13.0+cpu wheel reachable by pip (find-links), ~3.5 GB disk.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${PITWALL_SGLANG_CPU_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pitwall/sglang-cpu}"
PY="${PITWALL_SGLANG_CPU_PYTHON:-python3.11}"
SGLANG_VERSION="0.5.23"
TORCH_VERSION="2.13.0"
FORCE=0
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "build_env.sh: unknown argument '$arg'; use --force or --help." >&2; exit 2 ;;
  esac
done

if [[ -z "$DIR" || "$DIR" == "/" ]]; then
  echo "build_env.sh: refusing to build in '$DIR'; set PITWALL_SGLANG_CPU_DIR to a cache directory." >&2
  exit 2
fi

recipe_hash() {
  # Sorted file list so the hash does not depend on directory order.
  (cd "$HERE" && find build_env.sh requirements.txt make_tiny_model.py shim -type f -not -name '*.pyc' \
     | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -d' ' -f1
}

HASH="$(recipe_hash)"
ENV_FILE="$DIR/pitwall-sglang-cpu.env"
if [[ "$FORCE" == 0 && -f "$DIR/recipe.sha256" && -f "$ENV_FILE" \
      && "$(cat "$DIR/recipe.sha256")" == "$HASH" ]]; then
  echo "sglang-cpu env up to date (recipe $HASH) in $DIR; nothing to do."
  cat "$ENV_FILE"
  exit 0
fi

T0=$SECONDS
step_t=$SECONDS
step() {  # print the previous step's duration, then announce the next one
  echo "== [$((SECONDS - step_t)) s] $*"
  step_t=$SECONDS
}

step "building sglang-cpu env in $DIR (recipe $HASH)"
mkdir -p "$DIR"
rm -f "$DIR/recipe.sha256" "$ENV_FILE"
# Only these three subdirectories are ever removed.
rm -rf "$DIR/venv" "$DIR/shim" "$DIR/model"
VENV="$DIR/venv"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

"$PY" -m venv "$VENV"
PIP=("$VENV/bin/pip" install --progress-bar off)

step "pip install torch==$TORCH_VERSION (local CPU wheel; PyPI's torch is a CUDA build)"
"${PIP[@]}" "torch==$TORCH_VERSION"
"$VENV/bin/python" -c 'import torch, sys; v = torch.__version__; sys.exit(0 if "+cpu" in v else f"expected a +cpu torch, got {v}")'

step "pip install --no-deps sglang==$SGLANG_VERSION (its declared deps pull CUDA-only packages)"
"${PIP[@]}" --no-deps "sglang==$SGLANG_VERSION"

step "pip install -r requirements.txt (torch pinned so pip cannot swap it)"
echo "torch==$TORCH_VERSION" > "$WORK/pin.txt"
# pip warns "sglang 0.5.23 requires ..., which is not installed" for the CUDA-only packages left out;
# that is expected (so never run `pip check` on this venv).
"${PIP[@]}" -c "$WORK/pin.txt" -r "$HERE/requirements.txt"

step "TEST-ENVIRONMENT SHIM 1: guard torchvision's unguarded nms/qnms register_fake decorators"
PURELIB="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
TV="$PURELIB/torchvision/_meta_registrations.py"
sed -i 's/^@torch.library.register_fake("torchvision::\(q\{0,1\}nms\)")/@(torch.library.register_fake("torchvision::\1") if torchvision.extension._has_ops() else (lambda f: f))/' "$TV"
if grep -q '^@torch.library.register_fake("torchvision::q\{0,1\}nms")' "$TV"; then
  echo "build_env.sh: torchvision guard did not apply to $TV; check the torchvision version." >&2
  exit 1
fi
"$VENV/bin/python" -c 'import torchvision' || {
  echo "build_env.sh: 'import torchvision' still fails after the guard; check the torchvision and torch versions." >&2
  exit 1
}

step "TEST-ENVIRONMENT SHIM 2: install the import-only sgl_kernel stub in $DIR/shim"
mkdir -p "$DIR/shim"
cp -R "$HERE/shim/sgl_kernel" "$DIR/shim/"
find "$DIR/shim" -name '__pycache__' -prune -exec rm -rf {} +
# ... and on the venv's own path (a .pth file), so a server Pitwall launches from a profile finds it
# without PYTHONPATH: Pitwall's launch sandbox refuses PYTHON* variables in a profile's [env].
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$DIR/shim" > "$SITE/pitwall-test-sgl-kernel-shim.pth"

step "writing the tiny model (config.json + locally trained tokenizer) to $DIR/model"
"$VENV/bin/python" "$HERE/make_tiny_model.py" "$DIR/model"

step "smoke import: sglang server args with the shim on PYTHONPATH"
SGLANG_USE_CPU_ENGINE=1 PYTHONPATH="$DIR/shim" "$VENV/bin/python" -c \
  'import sglang; from sglang.srt.server_args import ServerArgs; print("sglang", sglang.__version__)'

# What pip resolved, for diagnosing a CI/local difference (unpinned requirements follow the index).
"$VENV/bin/pip" freeze --all > "$DIR/pip-freeze.txt"

cat > "$ENV_FILE" <<ENV
# Written by scripts/sglang_cpu/build_env.sh; paths of the real-SGLang CPU test environment.
PYTHON=$VENV/bin/python
VENV=$VENV
SHIM=$DIR/shim
MODEL=$DIR/model
SGLANG_VERSION=$SGLANG_VERSION
TORCH_VERSION=$TORCH_VERSION
RECIPE_SHA256=$HASH
BUILD_SECONDS=$((SECONDS - T0))
ENV
echo "$HASH" > "$DIR/recipe.sha256"
step "done"
echo "sglang-cpu env built in $((SECONDS - T0)) s; $(du -sh "$DIR" | cut -f1) on disk."
cat "$ENV_FILE"
