#!/usr/bin/env bash
# Session 45, call 1: every GPU test on the build with batch-aware dense
# splits (a dense_attend launch runs ceil(512 / (batch x kv heads)) splits
# at most; split 0's block writes the others empty) and session 44's
# transposed tensor-core body: each GPUAttention shape in its own process,
# the token top-k, append, certificate, large-batch and decoder tests, and
# compute-sanitizer memcheck (group 4, head_dim 128, batch > 1) and
# racecheck (head_dim 256) side by side. Carry [".carry/gpu.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o
source bench/gpu_env.sh
nvidia-smi -L
i=0
for f in $($BIN/GPUAttentionTest --gtest_list_tests | awk '/^Shapes/ {s=$1} /Matches/ {print s $1}') \
         'GPUAttentionTokenTopK.*' 'GPUAppend.*:GPUCertificate.*' 'GPUAttentionLarge.*'; do
  timeout ${TEST_SECONDS:-420} $BIN/GPUAttentionTest --gtest_filter="$f" > $OUT/test$i.log 2>&1 &
  i=$((i + 1))
done
timeout ${TEST_SECONDS:-420} $BIN/GPUDecoderTest > $OUT/decoder.log 2>&1 &
timeout ${TEST_SECONDS:-420} compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d128_kv8_g4_p64_bf16*' > $OUT/memcheck.log 2>&1 &
timeout ${TEST_SECONDS:-420} compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d256_kv1_g8_p64_bf16*' > $OUT/racecheck.log 2>&1 &
wait
echo "=== tests done $(date +%T)"
grep -hE "OK \]|FAILED  \]|SKIPPED \]|tests? ran" $OUT/test*.log $OUT/decoder.log
grep -h -m3 -A3 "Failure" $OUT/test*.log $OUT/decoder.log | head -30
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/memcheck.log $OUT/racecheck.log
for f in $OUT/*.log; do head -c 200000 $f > $f.tmp && mv $f.tmp $f; done
tar czf $O/run.tar.gz -C /tmp/o .
