#!/usr/bin/env bash
# Session 44, one call: the transposed tensor-core attention body (groups
# of <= 8: S^T = K Q^T, O^T += V^T P^T) and the attend-occupancy knob.
#   1. GPUAttentionTest's tensor-core shapes, the certificate and short
#      token top-k in four gtest shards, side by side with
#      compute-sanitizer memcheck (group 4, head_dim 128) and racecheck
#      (head_dim 256);
#   2. the cold sweep (bench/bench_cold.py) of six real-model shapes at
#      batch 1 and 8, 16K and 128K: our dense and sparse steps against
#      SDPA in the same process (compare the ratios with BENCHMARKS.md's);
# Carry [".carry/gpu.tar.xz"] (bench/pack_gpu.sh).
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-440}
source bench/gpu_env.sh
nvidia-smi -L
F='Shapes/GPUAttention.*bf16*:GPUCertificate.*:GPUAttentionTokenTopK.ShortCaches'
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 280 $BIN/GPUAttentionTest \
    --gtest_filter="$F" > $OUT/shard$i.log 2>&1 &
done
timeout 280 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d128_kv8_g4_p64_bf16*' > $OUT/memcheck.log 2>&1 &
timeout 280 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d256_kv1_g8_p64_bf16*' > $OUT/racecheck.log 2>&1 &
wait
echo "=== tests done $(date +%T)"
grep -hE "OK \]|FAILED|Failure|PASSED" $OUT/shard*.log | tail -30
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/memcheck.log $OUT/racecheck.log
step cold 110 python3 bench/bench_cold.py --lib $PWD/.carry/run/lib/libCondensateCompiler.so \
  --shapes 32/8/128,28/4/128,16/2/128,32/8/64,14/2/64,8/1/256 --batches 1,8 \
  --contexts 16384,131072 --no-flex --json $OUT/cold.json
tar czf $O/run.tar.gz -C /tmp/o .
