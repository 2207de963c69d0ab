#!/usr/bin/env bash
# Session 36, GPU call 3: BENCHMARKS.md's measurements on this build (the
# head_dim-256 attention on tensor cores with its ring): the cold sweep
# and Nsight Compute of every kernel at B1/128K, under a time limit that
# leaves the results to pack.
set -u
O=$OUT
export OUT=/tmp/o
mkdir -p $OUT
COLD_SECONDS=330 STEPS="cold ncu" timeout 545 bash bench/benchmarks.sh \
  > $OUT/benchmarks-run.log 2>&1
tail -5 $OUT/benchmarks-run.log
tar czf $O/benchmarks.tar.gz -C /tmp/o .
