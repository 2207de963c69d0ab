#!/usr/bin/env bash
# Session 26, fourth GPU call: selection ranked relative to each head
# (token units with a score row per query head: the certified exact and
# sketch policies; codegen's rankRelative, warpRankOffsets in select_topk's
# kernels and precertify's). Checks: every GPU attention test but the
# large ones (the shapes against float64 with their certified layers,
# token top-k through the prefilter, the certificate against the CPU's),
# then racecheck on a group-4 shape.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|heads'
step attention 420 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='-GPUAttentionLarge.*'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure|RACECHECK SUMMARY'
step racecheck 140 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
echo "=== done $(date +%T)"
