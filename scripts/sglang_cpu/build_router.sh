#!/usr/bin/env bash
# Build the real router's environment for the `real_sglang` tier: sglang-router 0.3.2 (the
# SGLang Model Gateway release SGLang 0.5.23's own PD tests start, a manylinux binary wheel with
# no CUDA dependency) in its own venv beside the SGLang CPU one.
#
# TEST ENVIRONMENT ONLY. Layout: $DIR/router/venv, and $DIR/router/pitwall-sglang-router.env
# (ROUTER_PYTHON, ROUTER_VERSION) for the tests. DIR as in build_env.sh. Idempotent: when the env
# file names this version, nothing is rebuilt; `--force` rebuilds.
set -euo pipefail

DIR="${PITWALL_SGLANG_CPU_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pitwall/sglang-cpu}"
PY="${PITWALL_SGLANG_CPU_PYTHON:-python3.11}"
ROUTER_VERSION="0.3.2"
OUT="$DIR/router"
ENV_FILE="$OUT/pitwall-sglang-router.env"
if [[ "${1:-}" != "--force" && -f "$ENV_FILE" ]] && grep -qx "ROUTER_VERSION=$ROUTER_VERSION" "$ENV_FILE"; then
  echo "sglang-router $ROUTER_VERSION env up to date in $OUT; nothing to do."
  exit 0
fi
rm -rf "$OUT"
mkdir -p "$OUT"
"$PY" -m venv "$OUT/venv"
"$OUT/venv/bin/pip" install -q --disable-pip-version-check "sglang-router==$ROUTER_VERSION"
"$OUT/venv/bin/python" -c "import sglang_router.launch_router" # the module the tier starts
printf 'ROUTER_PYTHON=%s\nROUTER_VERSION=%s\n' "$OUT/venv/bin/python" "$ROUTER_VERSION" > "$ENV_FILE"
echo "sglang-router $ROUTER_VERSION env built in $OUT"
