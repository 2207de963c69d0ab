#!/usr/bin/env bash
# Session 39, GPU call 6: where the certified step's 7% at 14/2/64, batch 1
# comes from (run6: 101 us against base's 94): each kernel's time under
# Nsight Compute (caches flushed between kernels), one step of every method
# (bench_cold.py --once), this build against fd1a1d0's compiler.
set -u
O=$OUT
export OUT=/tmp/o7
export CALL_SECONDS=${CALL_SECONDS:-260}
source bench/gpu_env.sh
mkdir -p .carry/base && tar xJf .carry/base.tar.xz -C .carry/base
ARGS="--shapes 14/2/64 --batches 1 --contexts 131072 --no-flex --once"
NCU="ncu --csv --metrics gpu__time_duration.sum"
step ncu_c32 110 $NCU python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so $ARGS
CONDENSATE_CACHE_DIR=/tmp/cache-base step ncu_base 110 $NCU python3 bench/bench_cold.py --lib .carry/base/lib/libCondensateCompiler.so $ARGS
tar czf $O/run7.tar.gz -C /tmp/o7 .
