#!/usr/bin/env bash
# Session 45: this commit's build against another compiler, cold in L2
# (bench/bench_cold.py), each build in its own process beside its own
# SDPA. OTHER names the other build, carried as .carry/$OTHER.tar.xz (its
# compiler and runtime libraries):
#   call 2, OTHER=base (default): main 4d0a164, whose dense_attend
#     launches every split, at batch 8 and 32, 16K and 32K, where the
#     batch-aware split count differs (batch 1 launches the same splits);
#   call 3, OTHER=var SHAPES=8/1/256,14/2/64,16/2/128,28/4/128
#     BATCHES=1,2 CONTEXTS=16384,131072: a variant whose kMinDenseChunk is
#     128 (16K: 128 splits of 128 tokens where 256 gave 64, for 1 to 4 kv
#     heads) and kLongDenseChunk 512 (past 128 splits, chunks of 512
#     tokens: 256 splits of 128K for 1 and 2 kv heads where 1024 gave 128;
#     the two touch disjoint contexts).
# Carry [".carry/gpu.tar.xz", ".carry/$OTHER.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-560}
source bench/gpu_env.sh
nvidia-smi -L
OTHER=${OTHER:-base}
mkdir -p /tmp/$OTHER && tar xJf .carry/$OTHER.tar.xz -C /tmp/$OTHER
S=${SHAPES:-32/8/128,28/4/128,14/2/64,8/1/256}
A="--shapes $S --batches ${BATCHES:-8,32} --contexts ${CONTEXTS:-16384,32768} --no-flex"
step cold-new 270 env CONDENSATE_CACHE_DIR=/tmp/cache-new python3 bench/bench_cold.py \
  --lib $PWD/.carry/run/lib/libCondensateCompiler.so $A --json $OUT/$OTHER-new.json
step cold-$OTHER 270 env LD_LIBRARY_PATH=/tmp/$OTHER/lib:$LD_LIBRARY_PATH \
  CONDENSATE_CACHE_DIR=/tmp/cache-$OTHER python3 bench/bench_cold.py \
  --lib /tmp/$OTHER/lib/libCondensateCompiler.so $A --json $OUT/$OTHER.json
tar czf $O/$OTHER.tar.gz -C /tmp/o .
