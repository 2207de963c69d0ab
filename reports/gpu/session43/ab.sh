#!/usr/bin/env bash
# Session 43, call 3: the cold A/B of the re-landed certificate walk
# against the compiler of 543d412 (before it; .carry/base.tar.xz, its
# libCondensateCompiler.so stripped), alternating twice, then one
# end-to-end certified run on dummy Llama-3.2-1B at 32K, batch 8.
# Two calls on one warm machine (the two packs and the tree exceed 64 MiB):
# carry [".carry/base.tar.xz"] running `cp .carry/base.tar.xz /root/`,
# then carry [".carry/gpu.tar.xz"] running this.
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-570}
source bench/gpu_env.sh
nvidia-smi -L
NEW=$PWD/.carry/run/lib/libCondensateCompiler.so
mkdir -p /tmp/base && tar xJf /root/base.tar.xz -C /tmp/base
BASE=$(find /tmp/base -name libCondensateCompiler.so | head -1)
ARGS="--shapes 14/2/64,16/2/128,28/4/128,8/1/256,32/8/128 --batches 1,8 --contexts 131072 --no-flex"
for i in 1 2; do
  step cold_new$i 60 python3 bench/bench_cold.py --lib $NEW $ARGS --json $OUT/cold_new$i.json
  CONDENSATE_CACHE_DIR=/tmp/cache-base step cold_base$i 60 python3 bench/bench_cold.py --lib $BASE $ARGS --json $OUT/cold_base$i.json
done
E2E_CERTIFIED=1 E2E_RUNS=llama-3.2-1b:32768:8 STEPS=e2e OUT=$OUT bash bench/gpu_session.sh
tar czf $O/ab.tar.gz -C /tmp/o .
