#!/usr/bin/env bash
# Session 45, call 3: more dense splits for few kv heads at batch 1 and 2:
# a variant build (`.carry/var.tar.xz`, compiler and runtime libraries)
# whose kMinDenseChunk is 128 (16K: 128 splits of 128 tokens where 256
# gave 64, for 1 to 4 kv heads) and kLongDenseChunk 512 (past 128 splits
# chunks of 512 tokens: 256 splits of 128K for 1 and 2 kv heads where
# 1024 gave 128; the two touch disjoint contexts) against this commit's
# build, cold (bench/bench_cold.py), each in its own process beside its
# own SDPA. Carry [".carry/gpu.tar.xz", ".carry/var.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-560}
source bench/gpu_env.sh
nvidia-smi -L
mkdir -p /tmp/var && tar xJf .carry/var.tar.xz -C /tmp/var
A="--shapes 8/1/256,14/2/64,16/2/128,28/4/128 --batches 1,2 --contexts 16384,131072 --no-flex"
step var-new 250 env CONDENSATE_CACHE_DIR=/tmp/cache-new python3 bench/bench_cold.py \
  --lib $PWD/.carry/run/lib/libCondensateCompiler.so $A --json $OUT/var-new.json
step var 250 env LD_LIBRARY_PATH=/tmp/var/lib:$LD_LIBRARY_PATH \
  CONDENSATE_CACHE_DIR=/tmp/cache-var python3 bench/bench_cold.py \
  --lib /tmp/var/lib/libCondensateCompiler.so $A --json $OUT/var.json
tar czf $O/var.tar.gz -C /tmp/o .
