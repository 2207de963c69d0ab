#!/usr/bin/env bash
# Session 18, fourth GPU call: the cold sweep with dense splits past 64 only
# for chunks of 2048 tokens or more (denseSplitRange); the bench checks
# layer 0 of every case against SDPA before timing it.
set -u
source bench/gpu_env.sh
STEP_FILTER='' step cold 200 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json"
echo "=== done $(date +%T)"
