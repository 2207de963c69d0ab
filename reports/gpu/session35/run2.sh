#!/usr/bin/env bash
# Session 35, GPU call 2: the ring again, with each tile's page-table
# lookups issued an iteration before its copies (run 1's rings waited for
# them at every copy, with the L1 mostly given to shared memory), against
# the register prefetch, cold, alternating; then this build's GPU tests at
# the default knobs (every attention shape and policy against float64,
# the certificate's CPU = GPU decisions, append), the rings (3 stages)
# against float64 on three tensor-core shapes, and memcheck of a ring.
set -u
O=$OUT
export OUT=/tmp/o
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
ARGS="--shapes 32/8/128,28/4/128,32/8/64,14/2/64 --batches 1,8 --contexts 32768,131072 --no-flex"
for run in regs-1 s3-1 s2-1 regs-2 s3-2; do
  case ${run%-*} in
    regs) export CONDENSATE_TUNING='{"attend_stages": 1}' ;;
    s3) export CONDENSATE_TUNING='{"attend_stages": 3}' ;;
    s2) export CONDENSATE_TUNING='{"attend_stages": 2}' ;;
  esac
  STEP_FILTER='^\| (32/8/128|14/2/64)|rror' step ab-$run 60 \
    python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
    --json $OUT/ab-$run.json $ARGS
done
unset CONDENSATE_TUNING
STEP_FILTER='^\[  FAILED|^\[  PASSED|Failure|tests ran|rror'
step shapes 330 $BIN/GPUAttentionTest \
  --gtest_filter='Shapes/*:GPUCertificate.*:GPUAppend.*'
CONDENSATE_TUNING='{"attend_stages": 3}' step ring-shapes 90 \
  $BIN/GPUAttentionTest --gtest_filter='*d128_kv8_g4_p64_bf16*:*d64_kv1_g16_p16_bf16*:*d128_kv2_g7_p64_bf16*'
CONDENSATE_TUNING='{"attend_stages": 3}' step ring-memcheck 60 \
  compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d64_kv2_g1_p64_bf16*'
echo "=== done $(date +%T)"
tar czf $O/run2.tar.gz -C /tmp o
