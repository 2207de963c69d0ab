#!/usr/bin/env bash
# Session 41, with the device time left after the refusals (under 700 s):
# the certificate walk's correctness on the GPU without the cold A/B
# (ab.sh): the full GPU attention suite, memcheck and racecheck on the
# certificate and token top-k tests, and Nsight Compute at 14/2/64 B1
# 128K (certify's time against session 39's 26.7 us, base 19.9).
# Carry [".carry/gpu.tar.xz"] (bench/pack_gpu.sh on this branch).
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-380}
source bench/gpu_env.sh
nvidia-smi -L
NEW=$PWD/.carry/run/lib/libCondensateCompiler.so
STEP_FILTER='FAILED|Failure|PASSED|tests ran|ERROR SUMMARY'
step tests 150 $BIN/GPUAttentionTest
step memcheck 70 compute-sanitizer --tool memcheck $BIN/GPUAttentionTest --gtest_filter='*GPUCertificate*:*TokenTopK.Short*'
step racecheck 70 compute-sanitizer --tool racecheck $BIN/GPUAttentionTest --gtest_filter='*GPUCertificate*'
unset STEP_FILTER
step ncu_new 60 ncu --csv --metrics gpu__time_duration.sum python3 bench/bench_cold.py --lib $NEW --shapes 14/2/64 --batches 1 --contexts 131072 --no-flex --once
grep -E '"(certify|score|select|sparse|merge|dense)[^"]*"' $OUT/ncu_new.log | awk -F'","' '{print $5, $NF}' | sort | uniq -c | head -30
tar czf $O/check.tar.gz -C /tmp/o .
