#!/usr/bin/env bash
# Session 34, GPU call 2: run 1's memcheck step failed one check of
# d64_kv2_g1_p64_bf16 (layer 13, the certified 2-bit sketch at tau 0.2:
# relative error 2.9e-2 against the reference on the kernel's decisions;
# memcheck itself: 0 errors) and its shapes step ran past 200 s on a fresh
# cache. Is it programmatic launch (CONDENSATE_GRID_DEPENDENCY) or the
# check's randomness? The shape 4 times each way, under memcheck once each
# way, then the whole shapes suite (what the GPU time left allows: run 2
# was cut to its first loop and one memcheck).
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
STEP_FILTER='PASSED|FAILED|Failure|Expected|layer|tests ran|SUMMARY'
F='*d64_kv2_g1_p64_bf16*'
for gd in 1 0; do
  CONDENSATE_GRID_DEPENDENCY=$gd step repeat-gd$gd ${REPEAT_SECONDS:-90} $BIN/GPUAttentionTest \
    --gtest_brief=1 --gtest_filter="$F" --gtest_repeat=4
done
for gd in ${MEMCHECK_GD:-0 1}; do
  CONDENSATE_GRID_DEPENDENCY=$gd step memcheck-gd$gd 60 compute-sanitizer \
    --tool memcheck --error-exitcode 9 $BIN/GPUAttentionTest --gtest_brief=1 \
    --gtest_filter="$F"
done
[ -n "${NO_SHAPES:-}" ] ||
  step shapes 240 $BIN/GPUAttentionTest --gtest_filter='Shapes/*:GPUCertificate.*'
echo "=== done $(date +%T)"
