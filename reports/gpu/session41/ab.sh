#!/usr/bin/env bash
# Session 41: session 40's ab.sh (the certificate's one-round walk over a
# row's splits, the group's heads side by side) without real-kv.sh before
# it, in two calls on one warm machine, since the pack of this branch and
# the base compiler do not fit one call's 64 MiB beside the tree:
#   1. carry [".carry/base.tar.xz"] (the libCondensateCompiler.so of main,
#      stripped; its certify and merge are this branch's base), run
#        cp .carry/base.tar.xz /root/
#   2. carry [".carry/gpu.tar.xz"] (bench/pack_gpu.sh on this branch), run
#        bash reports/gpu/session41/ab.sh
# check.sh (the full GPU attention suite, memcheck and racecheck on the
# certificate and token top-k tests, Nsight Compute at 14/2/64 B1), then
# a cold A/B against the base compiler, twice, alternating.
set -u
# check.sh sets O, OUT, BIN, NEW and `step`.
export CALL_SECONDS=${CALL_SECONDS:-560}
source reports/gpu/session41/check.sh
mkdir -p /tmp/base && tar xJf /root/base.tar.xz -C /tmp/base
BASE=/tmp/base/lib/libCondensateCompiler.so
ARGS="--shapes 14/2/64,16/2/128,28/4/128,8/1/256,32/8/128 --batches 1,8 --contexts 131072 --no-flex"
for i in 1 2; do
  step cold_new$i 45 python3 bench/bench_cold.py --lib $NEW $ARGS --json $OUT/cold_new$i.json
  CONDENSATE_CACHE_DIR=/tmp/cache-base step cold_base$i 45 python3 bench/bench_cold.py --lib $BASE $ARGS --json $OUT/cold_base$i.json
done
tar czf $O/ab.tar.gz -C /tmp/o .
