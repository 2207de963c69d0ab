#!/usr/bin/env bash
# Session 45, call 2: batch-aware dense splits against main 4d0a164 (the
# same kernels launching every split: `.carry/base.tar.xz`, its compiler
# and runtime libraries), cold in L2 (bench/bench_cold.py), each build in
# its own process beside its own SDPA: four real-model shapes at batch 8
# and 32, 16K and 32K, where the batch changes the split count (batch 1
# launches the same splits as before). Carry [".carry/gpu.tar.xz",
# ".carry/base.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-560}
source bench/gpu_env.sh
nvidia-smi -L
mkdir -p /tmp/base && tar xJf .carry/base.tar.xz -C /tmp/base
S=${SHAPES:-32/8/128,28/4/128,14/2/64,8/1/256}
A="--shapes $S --batches ${BATCHES:-8,32} --contexts ${CONTEXTS:-16384,32768} --no-flex"
step cold-new 270 env CONDENSATE_CACHE_DIR=/tmp/cache-new python3 bench/bench_cold.py \
  --lib $PWD/.carry/run/lib/libCondensateCompiler.so $A --json $OUT/cold-new.json
step cold-base 270 env LD_LIBRARY_PATH=/tmp/base/lib:$LD_LIBRARY_PATH \
  CONDENSATE_CACHE_DIR=/tmp/cache-base python3 bench/bench_cold.py \
  --lib /tmp/base/lib/libCondensateCompiler.so $A --json $OUT/cold-base.json
tar czf $O/ab.tar.gz -C /tmp/o .
