#!/usr/bin/env bash
# Session 18, third GPU call: the tensor-core body software-pipelined (each
# iteration loads the next tile's rows before its arithmetic), dense splits
# sized by kv heads (about 512 blocks a sequence), empty dense splits that
# exit at once and a merge that stops at the last live split. Five shapes
# (both bodies) and the certificate suite against the float64 reference,
# then the cold sweep.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]|passes'
step attention3 260 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:*d128_kv8_g4_p64_bf16*:*d128_kv2_g7_p64_bf16*:*d64_kv1_g16_p16_bf16*:*d256_kv2_g2_p16_bf16*:*d64_kv3_g3_p16_f32*'
STEP_FILTER='' step cold 300 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json"
echo "=== done $(date +%T)"
