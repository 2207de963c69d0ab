#!/usr/bin/env bash
# Session 48, GPU call 1 (carry [".carry/gpu.tar.xz"]), on this session's
# build (bench/pack_gpu.sh, recompressed with xz -9e; its kernels are
# main's): BENCHMARKS.md's cold sweep of the seven shapes (bench/
# benchmarks.sh `cold`), then the checks (every GPU test against the
# float64 reference, compute-sanitizer memcheck and racecheck: `checks`).
# run2.sh follows on the same warm machine.
set -u
O=$OUT
export OUT=/tmp/o
mkdir -p $OUT
nvidia-smi -L
export CALL_SECONDS=${CALL_SECONDS:-550}
COLD_SECONDS=${COLD_SECONDS:-320} TEST_SECONDS=${TEST_SECONDS:-170} \
  STEPS="cold checks" bash bench/benchmarks.sh > $OUT/benchmarks-run.log 2>&1
tail -36 $OUT/benchmarks-run.log
tar czf $O/benchmarks.tar.gz -C /tmp/o .
