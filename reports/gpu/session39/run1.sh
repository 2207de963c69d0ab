#!/usr/bin/env bash
# Session 39, written for the next GPU call (not run: the session's device
# time ran out). The certificate's walk over a row's splits (m and Z of the
# base partials) one thread a head, the heads side by side: it ran one head
# after another in a branch per head, and session 39's Nsight Compute found
# certify 26.7 us against 19.9 at 14/2/64, batch 1 once sparse lists had 32
# splits (reports/gpu/session37/run7). Carry .carry/gpu.tar.xz (this
# branch: lib/ and bin/GPUAttentionTest, xz -9e) and .carry/base.tar.xz
# (main 7195fe5's libCondensateCompiler.so, stripped, under lib/); the two
# and the tree just fit the 64 MiB a call carries.
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-540}
source bench/gpu_env.sh
mkdir -p .carry/base && tar xJf .carry/base.tar.xz -C .carry/base
NEW=.carry/run/lib/libCondensateCompiler.so
BASE=.carry/base/lib/libCondensateCompiler.so
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran'
step tests 200 $BIN/GPUAttentionTest --gtest_filter='*GPUCertificate*:*TokenTopK*:*d128_kv2_g7*:*d64_kv1_g16*'
unset STEP_FILTER
NCU="ncu --csv --metrics gpu__time_duration.sum"
step ncu_new 40 $NCU python3 bench/bench_cold.py --lib $NEW --shapes 14/2/64 --batches 1 --contexts 131072 --no-flex --once
ARGS="--shapes 14/2/64,16/2/128,28/4/128,8/1/256,32/8/128 --batches 1,8 --contexts 131072 --no-flex"
for i in 1 2; do
  step cold_new$i 70 python3 bench/bench_cold.py --lib $NEW $ARGS --json $OUT/cold_new$i.json
  CONDENSATE_CACHE_DIR=/tmp/cache-base step cold_base$i 70 python3 bench/bench_cold.py --lib $BASE $ARGS --json $OUT/cold_base$i.json
done
tar czf $O/run1.tar.gz -C /tmp/o .
