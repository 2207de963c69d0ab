#!/usr/bin/env bash
# Session 16, third GPU call: every shape of GPUAttention (GQA groups 1-8,
# sketch and exact top-k uncertified and certified layers) and the
# certificate's CPU = GPU check against float64, then end to end at Qwen2.5-7B's
# shape (group 7: where one score row per kv head saves the most).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT .carry/run
tar xJf .carry/gpu.tar.xz -C .carry/run
export LD_LIBRARY_PATH=$PWD/.carry/run/lib CONDENSATE_CACHE_DIR=/tmp/condensate-cache
BIN=.carry/run/bin
step() { local name=$1 secs=$2; shift 2; echo "=== $name $(date +%T)"
  timeout $secs "$@" > $OUT/$name.log 2>&1; local rc=$?
  grep -E "OK|PASSED|FAILED|ERROR SUMMARY|^(dense|policy)|sketch certificate|^certificate" $OUT/$name.log | tail -14; echo "=== $name rc=$rc"; }
step attention 300 $BIN/GPUAttentionTest \
  --gtest_filter='Shapes/GPUAttention.*:GPUCertificate.*'
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
bm='{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
step e2e-qwen2.5-7b-32768-b8 110 $BIN/condensate-bench --dummy qwen2.5-7b --context 32768 \
  --batch 8 --steps 32 --warmup 4 --policy "$sk" --policy "$bm" \
  --json $OUT/e2e-qwen2.5-7b-32768-b8.json
echo "=== done $(date +%T)"
