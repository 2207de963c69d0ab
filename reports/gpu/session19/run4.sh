#!/usr/bin/env bash
# Session 19, fourth GPU call: the Python inductor test with its new
# tolerance, then the tuned JIT end to end: condensate-bench on dummy
# Llama-3.2-1B weights (32/8/64, where the tuner picks lane groups at
# batch 1) at 130K tokens, batch 1, dense, with the default kernels (an
# empty cache), with --tune (tunes, stores the record, then decodes) and
# again with --tune on that cache (the record is found: no tuning), and the
# defaults once more.
set -u
source bench/gpu_env.sh
rm -rf python/src/condensate/prebuilt
cp -r .carry/run/prebuilt python/src/condensate/prebuilt
CONDENSATE_LIBRARY_DIR=$PWD/.carry/run/lib PYTHONPATH=$PWD/python/src \
  STEP_FILTER='passed|failed' step python-compile 120 python3 -m pytest -q \
  -p no:cacheprovider python/tests/test_gpu.py -k torch_compile
B="$BIN/condensate-bench --dummy llama-3.2-1b --context 130000 --batch 1 --steps 32 --warmup 4"
STEP_FILTER='tok/s|dense|tuned|error'
CONDENSATE_CACHE_DIR=/tmp/cache-default step bench-default 90 $B --json "$OUT/default.json"
CONDENSATE_CACHE_DIR=/tmp/cache-tuned step bench-tune 150 $B --tune --json "$OUT/tune.json"
CONDENSATE_CACHE_DIR=/tmp/cache-tuned step bench-tuned 90 $B --tune --json "$OUT/tuned.json"
CONDENSATE_CACHE_DIR=/tmp/cache-default step bench-default2 90 $B
ls /tmp/cache-tuned/*.tune.json
echo "=== done $(date +%T)"
