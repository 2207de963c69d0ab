#!/usr/bin/env bash
# Session 26, first GPU call: session 25's append_kv change (a prefill's
# rows in one call; before, one launch a position). Checks: the GPU append
# tests (GPU = CPU append bit for bit; one call = row by row), memcheck and
# racecheck on them, the GPU decoder tests. Then whole-model prefill on
# dummy weights, this build's condensate-bench against the same source
# with the decoder's old prefill append (one call a position;
# .carry/rowbench.tar.xz), both over this build's libraries, in the same
# call: prefill seconds, the model's own attention (--prefill-window 0)
# and the dummy default (window 1024).
set -u
source bench/gpu_env.sh
mkdir -p .carry/rb && tar xJf .carry/rowbench.tar.xz -C .carry/rb
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure'
step append 150 $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAppend.*'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure'
for tool in memcheck racecheck; do
  step append-$tool 120 compute-sanitizer --tool $tool --error-exitcode 9 \
    $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAppend.*'
done
STEP_FILTER='^device|^dense'
for run in qwen2.5-0.5b:32000 llama-3.2-1b:32768; do
  IFS=: read -r arch ctx <<< "$run"
  for w in 0 1024; do
    for v in rows:.carry/rb/rowbench/bin one:$BIN; do
      IFS=: read -r tag dir <<< "$v"
      name=prefill-$tag-$arch-$ctx-w$w
      step $name 100 $dir/condensate-bench --dummy $arch --context $ctx \
        --batch 1 --steps 2 --warmup 1 --prefill-window $w --json /tmp/$name.json
      python3 -c "import json,sys; print('$name prefill_seconds', json.load(open('/tmp/$name.json'))['prefill_seconds'])" | tee -a "$OUT/prefill.txt"
    done
  done
done
# a call returns 8 files: the prefill logs as one
for f in "$OUT"/prefill-*.log; do echo "### $f"; cat "$f"; done > "$OUT/prefill.log"
rm -f "$OUT"/prefill-*.log
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure'
step decoder 200 $BIN/GPUDecoderTest --gtest_brief=1
echo "=== done $(date +%T)"
