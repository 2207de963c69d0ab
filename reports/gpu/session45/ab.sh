#!/usr/bin/env bash
# Session 45: one compiler build timed cold in L2 (bench/bench_cold.py)
# beside its own SDPA. LIB names the build: .carry/$LIB.tar.xz (its
# compiler and runtime libraries, stripped, xz -9e), unpacked to /root/$LIB
# where the call carries it, else found there from an earlier call on the
# same warm machine (two builds and the tree exceed the 64 MiB a call
# carries, so each build travels in its own call). Builds:
#   new: this commit's (batch-aware dense splits: a launch runs
#     ceil(512 / (batch x kv heads)) splits at most);
#   base: main 4d0a164's, whose dense_attend launches every split;
#   var: this commit's with kMinDenseChunk 128 (16K: 128 splits of 128
#     tokens where 256 gave 64, for 1 to 4 kv heads) and kLongDenseChunk
#     512 (past 128 splits, chunks of 512 tokens: 256 splits of 128K for 1
#     and 2 kv heads where 1024 gave 128; the two touch disjoint contexts).
# Calls: LIB=base, LIB=new (batch 8 and 32, 16K and 32K, where the split
# count differs: batch 1 launches the same splits); then VAR=1 LIB=var and
# VAR=1 LIB=new (1 to 4 kv heads at batch 1 and 2, 16K and 128K); then
# FULL=1 LIB=v2 and FULL=1 LIB=new (six shapes, batch 1 to 32, 16K to
# 128K).
# Carry [".carry/$LIB.tar.xz"] (none where /root/$LIB is there).
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-560}
source bench/gpu_env.sh
nvidia-smi -L
L=${LIB:?LIB=new, base or var}
if [ -f .carry/$L.tar.xz ]; then
  mkdir -p /root/$L && tar xJf .carry/$L.tar.xz -C /root/$L
fi
if [ -n "${FULL:-}" ]; then
  A="--shapes 32/8/128,28/4/128,16/2/128,32/8/64,14/2/64,8/1/256 --batches 1,2,8,32 --contexts 16384,32768,131072"
  N=full-$L
elif [ -n "${VAR:-}" ]; then
  A="--shapes 8/1/256,14/2/64,16/2/128,28/4/128 --batches 1,2 --contexts 16384,131072"
  N=var-$L
else
  A="--shapes 32/8/128,28/4/128,14/2/64,8/1/256 --batches 8,32 --contexts 16384,32768"
  N=batch-$L
fi
step $N 540 env LD_LIBRARY_PATH=/root/$L/lib:$LD_LIBRARY_PATH \
  CONDENSATE_CACHE_DIR=/tmp/cache-$L python3 bench/bench_cold.py \
  --lib /root/$L/lib/libCondensateCompiler.so $A --no-flex --json $OUT/$N.json
tar czf $O/$N.tar.gz -C /tmp/o $N.json $N.log
