#!/usr/bin/env bash
# Session 39, GPU call 5: the sparse splits capped at 32 (.carry/gpu.tar.xz)
# against fd1a1d0's compiler (.carry/base.tar.xz), cold, in separate
# processes, twice alternating: runs 1 and 5 found the certified step 4-10%
# slower than base with the branch's cap of 64 (the merge and the
# certificate walk every split of the buffers; the branch's build and base
# together with this one exceed what a call carries, so the cap of 64 is
# compared through base); then the certificate and one shape against
# float64.
set -u
O=$OUT
export OUT=/tmp/o6
export CALL_SECONDS=${CALL_SECONDS:-400}
source bench/gpu_env.sh
mkdir -p .carry/base && tar xJf .carry/base.tar.xz -C .carry/base
ARGS="--shapes 14/2/64,16/2/128,28/4/128,8/1/256,32/8/128 --batches 1,8 --contexts 131072 --no-flex"
for i in 1 2; do
  step cold_c32_$i 70 python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so $ARGS --json $OUT/cold_c32_$i.json
  CONDENSATE_CACHE_DIR=/tmp/cache-base step cold_base_$i 70 python3 bench/bench_cold.py --lib .carry/base/lib/libCondensateCompiler.so $ARGS --json $OUT/cold_base_$i.json
done
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran'
step tests 80 $BIN/GPUAttentionTest --gtest_filter='*GPUCertificate*:*d64_kv2_g1_p64*'
tar czf $O/run6.tar.gz -C /tmp/o6 .
