#!/usr/bin/env bash
# Session 39, GPU call 4: the A/B of run1.sh twice more, alternating, on
# the shapes run1 did not cover (28/4/128, 16/2/128, 32/8/64) and on
# 14/2/64, whose batch-8 condensate time was the one row slower than base
# in run1 (35.6 against 34.7 us): noise or a loss.
set -u
O=$OUT
export OUT=/tmp/o5
export CALL_SECONDS=${CALL_SECONDS:-320}
source bench/gpu_env.sh
mkdir -p .carry/base && tar xJf .carry/base.tar.xz -C .carry/base
NEW=.carry/run/lib/libCondensateCompiler.so
BASE=.carry/base/lib/libCondensateCompiler.so
ARGS="--shapes 14/2/64,28/4/128,16/2/128,32/8/64 --batches 1,8 --contexts 131072 --no-flex"
for i in 1 2; do
  step cold_new$i 70 python3 bench/bench_cold.py --lib $NEW $ARGS --json $OUT/cold_new$i.json
  CONDENSATE_CACHE_DIR=/tmp/cache-base step cold_base$i 70 python3 bench/bench_cold.py --lib $BASE $ARGS --json $OUT/cold_base$i.json
done
tar czf $O/run5.tar.gz -C /tmp/o5 .
