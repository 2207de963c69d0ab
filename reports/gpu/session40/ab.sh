#!/usr/bin/env bash
# Session 40: the certificate's walk over a row's splits (m and Z of the
# base partials) in one round with the group's heads side by side
# (session 39's branch ran the heads one after another in a branch per
# head, and each head's splits in 8 rounds: Nsight Compute found certify
# 26.7 us against 19.9 at 14/2/64, batch 1, once sparse lists had 32
# splits). Runs after real-kv.sh in the same warm machine, which leaves
# this build unpacked in /root/run; carry .carry/base.tar.xz (main
# 7195fe5's libCondensateCompiler.so, stripped: the certify and merge
# code it was built from is main's before this change).
# The full GPU suite, memcheck and racecheck on the certificate and
# token top-k tests, Nsight Compute at 14/2/64 B1, and a cold A/B against
# the base compiler, twice, alternating.
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-560}
export CALL_START=$(date +%s)
mkdir -p $OUT .carry/base && tar xJf .carry/base.tar.xz -C .carry/base
R=/root/run
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-}
export CONDENSATE_CACHE_DIR=/tmp/condensate-cache
mkdir -p .carry && ln -sfn $R .carry/run
source <(sed -n '/^step()/,/^}/p' bench/gpu_env.sh)
NEW=$R/lib/libCondensateCompiler.so
BASE=.carry/base/lib/libCondensateCompiler.so
STEP_FILTER='FAILED|Failure|PASSED|tests ran|ERROR SUMMARY'
step tests 150 $R/bin/GPUAttentionTest
step memcheck 90 compute-sanitizer --tool memcheck $R/bin/GPUAttentionTest --gtest_filter='*GPUCertificate*:*TokenTopK.Short*'
step racecheck 90 compute-sanitizer --tool racecheck $R/bin/GPUAttentionTest --gtest_filter='*GPUCertificate*'
unset STEP_FILTER
NCU="ncu --csv --metrics gpu__time_duration.sum"
step ncu_new 40 $NCU python3 bench/bench_cold.py --lib $NEW --shapes 14/2/64 --batches 1 --contexts 131072 --no-flex --once
ARGS="--shapes 14/2/64,16/2/128,28/4/128,8/1/256,32/8/128 --batches 1,8 --contexts 131072 --no-flex"
for i in 1 2; do
  step cold_new$i 45 python3 bench/bench_cold.py --lib $NEW $ARGS --json $OUT/cold_new$i.json
  CONDENSATE_CACHE_DIR=/tmp/cache-base step cold_base$i 45 python3 bench/bench_cold.py --lib $BASE $ARGS --json $OUT/cold_base$i.json
done
tar czf $O/ab.tar.gz -C /tmp/o .
