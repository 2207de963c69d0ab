#!/usr/bin/env bash
# Session 45, call 3: more dense splits for one or two kv heads at batch 1
# and 2: a variant build whose kLongDenseChunk is 512 (past 128 splits,
# chunks of 512 tokens: 256 splits of 128K where 1024 gave 128;
# `.carry/var.tar.xz`, compiler and runtime libraries) against this
# commit's build, cold (bench/bench_cold.py), each in its own process
# beside its own SDPA. Carry [".carry/gpu.tar.xz", ".carry/var.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-560}
source bench/gpu_env.sh
nvidia-smi -L
mkdir -p /tmp/var && tar xJf .carry/var.tar.xz -C /tmp/var
A="--shapes 8/1/256,14/2/64,16/2/128 --batches 1,2 --contexts 131072,262144 --no-flex"
step var-new 250 env CONDENSATE_CACHE_DIR=/tmp/cache-new python3 bench/bench_cold.py \
  --lib $PWD/.carry/run/lib/libCondensateCompiler.so $A --json $OUT/var-new.json
step var-512 250 env LD_LIBRARY_PATH=/tmp/var/lib:$LD_LIBRARY_PATH \
  CONDENSATE_CACHE_DIR=/tmp/cache-var python3 bench/bench_cold.py \
  --lib /tmp/var/lib/libCondensateCompiler.so $A --json $OUT/var-512.json
tar czf $O/var.tar.gz -C /tmp/o .
