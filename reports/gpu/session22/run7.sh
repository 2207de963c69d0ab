#!/usr/bin/env bash
# Session 22, seventh GPU call: end to end on the dummy Qwen2.5-7B at
# 130000 x 4 with the certified sketch policy (512 extras) beside dense,
# sketch and block top-1024, after the warp-reduced mass sums (run6/).
set -u
source bench/gpu_env.sh
STEPS=e2e E2E_CERTIFIED=1 E2E_RUNS="qwen2.5-7b:130000:4" bash bench/gpu_session.sh
echo "=== done $(date +%T)"
