#!/usr/bin/env bash
# Session 19, third GPU call: long contexts and large batches against the
# float64 reference, the AOT library and the Python package's GPU tests,
# then the cold sweep of two shapes not re-measured since session 18's
# final kernels (28/4/128 and 32/8/64, batch 1).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]|passed|failed'
step large 150 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUAttentionLarge.*'
CONDENSATE_AOT_PREFIX=.carry/run/aot/aot \
  CONDENSATE_AOT_FAT=.carry/run/aot/aot-fat.json step aot 60 \
  $BIN/AOTLibraryTest --gtest_brief=1
rm -rf python/src/condensate/prebuilt
cp -r .carry/run/prebuilt python/src/condensate/prebuilt
CONDENSATE_LIBRARY_DIR=$PWD/.carry/run/lib PYTHONPATH=$PWD/python/src \
  CONDENSATE_AOT_PREFIX=$PWD/.carry/run/aot/c-example \
  step python 170 python3 -m pytest -q -rs -p no:cacheprovider python/tests
STEP_FILTER='' step cold 130 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
  --shapes 28/4/128,32/8/64 --batches 1
echo "=== done $(date +%T)"
