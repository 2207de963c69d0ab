#!/usr/bin/env bash
# Session 23, fourth GPU call: end to end on dummy weights (condensate-bench
# via bench/gpu_session.sh's e2e step), 130000 tokens x batch 4: Qwen2.5-7B
# with the certified sketch policy beside dense, sketch and block top-1024;
# then Llama-3-8B. This build (run2's score_sketch, run3's prefilter).
set -u
STEPS=e2e E2E_CERTIFIED=1 E2E_RUNS="qwen2.5-7b:130000:4" bash bench/gpu_session.sh
STEPS=e2e E2E_RUNS="llama-3-8b:130000:4" bash bench/gpu_session.sh
echo "=== done $(date +%T)"
