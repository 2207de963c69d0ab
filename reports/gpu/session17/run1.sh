#!/usr/bin/env bash
# Session 17, first GPU call: the certificate's CPU = GPU check (its sketch
# layer now has open extras: 4096 slots, so the GPU certify marks the
# extras it took in shared memory) and every GPUAttention shape (their
# certified sketch layer has open extras too).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]|sketch certificate|^certificate|passes'
step attention 480 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:Shapes/GPUAttention.*'
echo "=== done $(date +%T)"
