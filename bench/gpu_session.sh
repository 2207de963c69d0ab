#!/usr/bin/env bash
# One GPU-machine session: unpack the carried build (.carry/gpu.tar.xz, made
# by bench/pack_gpu.sh), run the GPU tests, the sanitizers and the benchmark,
# and leave logs under $OUT. Each step has its own time limit so one slow
# step cannot eat the session.
set -u
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
ls /usr/local/cuda/nvvm/libdevice/ 2>&1 | head -2
# join_model NAME FILE: the parts /root/models/NAME.partNN (made by
# bench/split_model.sh FILE NAME) joined into /root/models/NAME.gguf and
# checked against FILE's checksum in scripts/fetch-models.sh (its one home).
join_model() {
  local f=/root/models/$1.gguf sha
  [ -f "$f" ] || cat /root/models/$1.part[0-9][0-9] > "$f"
  sha=$(grep -A1 "fetch $2" scripts/fetch-models.sh | tail -n 1 | tr -d ' \\')
  echo "$sha  $f" | sha256sum -c -
}
# python_tests NAME: the Python package's tests (GPU ones included) over
# the carried libraries and prebuilt kernels, as step NAME; the ops'
# overhead lands in $OUT.
python_tests() {
  rm -rf python/src/condensate/prebuilt
  cp -r .carry/run/prebuilt python/src/condensate/prebuilt
  CONDENSATE_LIBRARY_DIR=$PWD/.carry/run/lib PYTHONPATH=$PWD/python/src \
    CONDENSATE_AOT_PREFIX=$PWD/.carry/run/aot/c-example \
    CONDENSATE_BENCH_OUT=$OUT step "$1" 400 \
    python3 -m pytest -q -rs -p no:cacheprovider python/tests
}
# sanitize NAME TOOL SECONDS FILTER: GPUAttentionTest's FILTER under
# compute-sanitizer TOOL, as step NAME.
sanitize() {
  step "$1" "$3" compute-sanitizer --tool "$2" --error-exitcode 9 \
    $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter="$4"
}
# The sketch scoring and selection tests the sanitizers run: token top-k by
# 2- and 4-bit sketches, with and without the prefilter, and a shape whose
# schedule has sketch and certified layers (not the token top-k's budget
# sweep, 150 s of the same kernels unsanitized).
SKETCH_SANITIZE_FILTER=${SKETCH_SANITIZE_FILTER:-GPUAttentionTokenTopK.ShortCaches:GPUAttentionTokenTopK.PrefilterCaches:*d64_kv2_g1_p64_bf16*}
# aot_test NAME SECONDS: the AOT library, loaded with the runtime alone.
aot_test() {
  CONDENSATE_AOT_PREFIX=.carry/run/aot/aot \
    CONDENSATE_AOT_FAT=.carry/run/aot/aot-fat.json step "$1" "$2" \
    $BIN/AOTLibraryTest --gtest_brief=1
}
# decoder_test NAME SECONDS: the GPU decoder's tests (those that need the
# real model skip without /root/models/model.gguf).
decoder_test() {
  CONDENSATE_MODEL=/root/models/model.gguf step "$1" "$2" \
    $BIN/GPUDecoderTest --gtest_brief=1
}
# The certified 4-bit sketch policy the speed steps share (pages of 64,
# 512 extras), and the same without the output-error bound (no value
# boxes).
CERT512='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":512,"page_size":64}'
CERT512M="${CERT512%\}},\"output_bound\":false}"
for s in ${STEPS:-driver compiler attention large bench memcheck racecheck}; do
  case $s in
    tests) # every GPU test at once, each group its own process and log
        # (tests-NAME; the GPU is mostly idle under one): each attention
        # shape, the token top-k, append, certificate, tuner and
        # large-batch groups, the driver, compiler, AOT, decoder and Python
        # tests, beside compute-sanitizer memcheck (the tensor-core body at
        # batch > 1: head_dim 128, 8 kv heads, groups of 4; the append
        # kernel) and racecheck (head_dim 256), and both over the sketch
        # scoring and selection kernels (SKETCH_SANITIZE_FILTER, as
        # sketch-sanitize). TEST_SECONDS a process
        # (default 420, cut to what CALL_SECONDS leaves).
        T=${TEST_SECONDS:-420}
        for f in $($BIN/GPUAttentionTest --gtest_list_tests |
                   awk '/^[^ ]/ {s = $1; next} s ~ /^Shapes/ {print s $1}'); do
          step "tests-${f##*/}" $T $BIN/GPUAttentionTest --gtest_brief=1 \
            --gtest_filter="$f" > /dev/null &
        done
        for g in GPUAttentionTokenTopK GPUAppend GPUCertificate GPUTuner \
                 GPUAttentionLarge; do
          step "tests-$g" $T $BIN/GPUAttentionTest --gtest_brief=1 \
            --gtest_filter="$g.*" > /dev/null &
        done
        step tests-driver $T $BIN/CondensateCudaDriverTest --gtest_brief=1 > /dev/null &
        step tests-compiler $T $BIN/GPUCompilerTest --gtest_brief=1 > /dev/null &
        aot_test tests-aot $T > /dev/null &
        decoder_test tests-decoder $T > /dev/null &
        sanitize tests-memcheck memcheck $T \
          '*d128_kv8_g4_p64_bf16*:GPUAppend.*' > /dev/null &
        sanitize tests-racecheck racecheck $T '*d256_kv1_g8_p64_bf16*' > /dev/null &
        for tool in memcheck racecheck; do
          sanitize "tests-sketch-$tool" $tool $T "$SKETCH_SANITIZE_FILTER" > /dev/null &
        done
        python_tests tests-python > /dev/null &
        wait
        echo "=== tests done ($(date +%T))"
        for l in "$OUT"/tests-*.log; do
          printf '%-44s %s\n' "$(basename "$l" .log)" "$(grep -hE \
            'PASSED  \]|FAILED  \]|SKIPPED \]|ERROR SUMMARY|RACECHECK SUMMARY| in [0-9.]+s' "$l" |
            tr '\n' ' ')"
        done
        grep -h -m3 -A3 "Failure" "$OUT"/tests-*.log | head -30 ;;
    cold-ab) # the cold sweep (bench/bench_cold.py, COLD_AB_ARGS) of the
        # carried build (run) and of each build carried as a delta
        # (bench/pack_delta.sh; .carry/builds/NAME), each in its own
        # process beside its own SDPA, ROUNDS times (default 1), the order
        # reversed each round so that drift between processes shows; then
        # COLD_AB_METHOD's times (default dense) side by side
        # (bench_cold.py --compare). COLD_AB_SECONDS a sweep (default 150).
        order=run
        for d in .carry/builds/*/lib; do
          [ -f "$d/libCondensateCompiler.so" ] && order="$order $(basename "$(dirname "$d")")"
        done
        files=""
        for r in $(seq "${ROUNDS:-1}"); do
          for n in $order; do
            dir=$PWD/.carry/builds/$n/lib
            [ "$n" = run ] && dir=$PWD/.carry/run/lib
            step "cold-ab-$n-$r" "${COLD_AB_SECONDS:-150}" \
              env LD_LIBRARY_PATH="$dir:$LD_LIBRARY_PATH" \
              CONDENSATE_CACHE_DIR="/tmp/condensate-cache-$n" \
              python3 bench/bench_cold.py --lib "$dir/libCondensateCompiler.so" \
              ${COLD_AB_ARGS:---shapes 32/8/128,28/4/128,16/2/128,32/8/64,14/2/64,8/1/256 --batches 1,8,32 --contexts 16384,131072 --no-flex} \
              --json "$OUT/cold-ab-$n-$r.json" > /dev/null
            [ -f "$OUT/cold-ab-$n-$r.json" ] && files="$files $OUT/cold-ab-$n-$r.json"
          done
          order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
        done
        [ -n "$files" ] && python3 bench/bench_cold.py --compare $files \
          --method "${COLD_AB_METHOD:-dense}" ;;
    driver) step driver 60 $BIN/CondensateCudaDriverTest --gtest_brief=1 ;;
    compiler) step compiler 60 $BIN/GPUCompilerTest --gtest_brief=1 ;;
    aot) aot_test aot 60 ;;
    cexample) # examples/c: plain C, the runtime alone, an AOT library
        step cexample 60 $BIN/condensate-c-example .carry/run/aot/c-example.json ;;
    python) python_tests python ;;
    attention) step attention 450 $BIN/GPUAttentionTest --gtest_brief=1 \
        --gtest_filter='-GPUAttentionLarge.*' ;;
    certificate) step certificate 120 $BIN/GPUAttentionTest --gtest_brief=1 \
        --gtest_filter='GPUCertificate.*' ;;
    large) step large 300 $BIN/GPUAttentionTest --gtest_brief=1 \
        --gtest_filter='GPUAttentionLarge.*' ;;
    full) CONDENSATE_GPU_FULL=1 step full 400 $BIN/GPUAttentionTest \
        --gtest_brief=1 --gtest_filter='GPUAttentionLarge.*' ;;
    bench) step bench 300 python3 bench/bench_attention.py \
        --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/bench.json" ;;
    cold) # the cold-L2 sweep of real-model shapes (BENCHMARKS.md)
        step cold ${COLD_SECONDS:-560} python3 bench/bench_cold.py \
          --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
          ${COLD_ARGS:-} ;;
    tune) # condensate-tune per real-model shape, dense and block top-k
        # (~1K) (TUNE_POLICIES=sketch: 4-bit sketch top-1024), tuned for batch 1 and 8 at 16K and 128K: default against
        # tuned in $OUT/tune.log, the records in $OUT/tune-records.tar.gz
        mkdir -p /tmp/tune
        for shape in ${TUNE_SHAPES:-32/8/128 64/8/128 28/4/128 16/2/128 32/8/64 14/2/64 8/1/256}; do
          IFS=/ read -r hq hkv d <<< "$shape"
          for pol in ${TUNE_POLICIES:-dense block}; do
            case $pol in
              dense) sched='"dense"' ;;
              block) sched='{"anchor": 1, "window": 64, "topk": 960, "selector": "block_minmax", "page_size": 64}' ;;
              sketch) sched='{"anchor": 1, "window": 64, "topk": 1024, "selector": "sketch", "bits": 4, "page_size": 64}' ;;
            esac
            spec=/tmp/tune/$hq-$hkv-$d-$pol.json
            echo "{\"model\": {\"layers\": 1, \"q_heads\": $hq, \"kv_heads\": $hkv, \"head_dim\": $d, \"page_size\": 64, \"kv_type\": \"bf16\"}, \"schedule\": $sched}" > $spec
            echo "### $shape $pol" >> "$OUT/tune.log"
            timeout ${TUNE_SECONDS:-120} $BIN/condensate-tune $spec --quiet \
              --batch=${TUNE_BATCHES:-1,8} --context=${TUNE_CONTEXTS:-16384,131072} \
              --record=/tmp/tune/$hq-$hkv-$d-$pol.record.json >> "$OUT/tune.log" 2>&1
            echo "rc=$?" >> "$OUT/tune.log"
          done
        done
        tar czf "$OUT/tune-records.tar.gz" -C /tmp/tune .
        grep -E "^###|^best|rejected|error|rc=" "$OUT/tune.log" ;;
    quick) step quick 150 python3 bench/bench_attention.py --quick \
        --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/quick.json" ;;
    ncu) # hardware counters of the scoring, attention and certificate
        # kernels at batch 32 / 32K (one launch each after warm-up)
        step ncu 240 ncu --target-processes all \
          --kernel-name regex:'score_pages|sparse_attend|certify|dense_attend|select_topk' \
          --launch-skip 0 --launch-count 12 \
          --section SpeedOfLight --section MemoryWorkloadAnalysis \
          --section Occupancy --section LaunchStats --section WarpStateStats \
          python3 bench/bench_attention.py --configs 32x32768 --iters 2 \
          --lib .carry/run/lib/libCondensateCompiler.so ;;
    memcheck) sanitize memcheck memcheck 150 '*d64_kv3_g3_p16_f32*:GPUAppend.*' ;;
    racecheck) sanitize racecheck racecheck 150 '*d128_kv8_g4_p64_bf16*' ;;
    sketch-sanitize) # memcheck and racecheck of the sketch scoring and
        # selection kernels (SKETCH_SANITIZE_FILTER)
        for tool in memcheck racecheck; do
          sanitize "sketch-$tool" $tool 240 "$SKETCH_SANITIZE_FILTER"
        done ;;
    prefill) # the generated prefill kernel against float64, and CPU = GPU
        step prefill 240 $BIN/PrefillTest --gtest_brief=1 ;;
    prefill-sanitize) # memcheck and racecheck of the prefill kernel
        for tool in memcheck racecheck; do
          step "prefill-$tool" 200 compute-sanitizer --tool $tool \
            --error-exitcode 9 $BIN/PrefillTest --gtest_brief=1 \
            --gtest_filter="${PREFILL_SANITIZE_FILTER:-GPU*}"
        done ;;
    prefill-bench) # against torch SDPA (flash, cuDNN, efficient), cold L2
        step prefill-bench ${PREFILL_SECONDS:-400} python3 bench/bench_prefill.py \
          --lib .carry/run/lib/libCondensateCompiler.so \
          --json "$OUT/prefill.json" ${PREFILL_ARGS:-} ;;
    prefill-e2e) # whole-model prefill of a long prompt (dummy weights,
        # the model's own attention: --prefill-window 0)
        for run in ${PREFILL_E2E_RUNS:-qwen2.5-0.5b:32000 llama-3.2-1b:32768 llama-3-8b:32768}; do
          IFS=: read -r arch ctx <<< "$run"
          step "prefill-e2e-$arch-$ctx" 240 $BIN/condensate-bench --dummy $arch \
            --context $ctx --batch 1 --steps 4 --warmup 1 --prefill-window 0 \
            --json "$OUT/prefill-e2e-$arch-$ctx.json"
        done ;;
    model) # join the model parts carried by earlier calls
        # (bench/split_model.sh SmolLM2-135M-Instruct.Q4_1.gguf model)
        if [ ! -f /root/models/model.gguf ]; then
          cat /root/models/model.part[0-9][0-9] > /root/models/model.gguf
        fi
        ls -la /root/models/ ;;
    join-model) # join JOIN_NAME's parts (bench/split_model.sh MODEL NAME)
        join_model "$JOIN_NAME" "$JOIN_FILE" ;;
    mainjob) # the README's main job on the GPU (after `model`): the
        # certified policy against dense, then its kernels under Nsight
        # Compute (4 tokens, summed by name)
        args=(--device gpu --model /root/models/model.gguf --chat
              --prompt-file reports/gpu/session30/main-job-prompt.txt
              --policy @examples/certified.mlir)
        step mainjob 100 $BIN/condensate-decode "${args[@]}" \
          --max-new-tokens 64 --compare dense
        timeout 100 ncu --target-processes all --metrics gpu__time_duration.sum \
          --csv --log-file "$OUT/ncu-mainjob.csv" $BIN/condensate-decode \
          "${args[@]}" --max-new-tokens 4 > /dev/null 2>&1
        python3 bench/ncu_step.py "$OUT/ncu-mainjob.csv" > "$OUT/ncu-mainjob.txt"
        rm -f "$OUT/ncu-mainjob.csv"; head -16 "$OUT/ncu-mainjob.txt" ;;
    open32k) # certified open extras at 32K on dummy Llama-3.2-1B (the walk
        # takes everything): against 512 extras at batch 8, and one step's
        # kernels at batch 1 under Nsight Compute
        cert=$CERT512M
        open="${cert/512/32768}"
        step e2e-open 120 $BIN/condensate-bench --dummy llama-3.2-1b \
          --context 32768 --batch 8 --steps 16 --warmup 2 \
          --policy "$cert" --policy "$open" --json "$OUT/e2e-open.json"
        timeout 90 ncu --target-processes all --profile-from-start off \
          --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu-open.csv" \
          $BIN/condensate-bench --dummy llama-3.2-1b --context 32768 \
          --batch 1 --steps 2 --warmup 1 --profile --policy "$open" \
          > /dev/null 2>&1
        python3 bench/ncu_step.py "$OUT/ncu-open.csv" > "$OUT/ncu-open.txt"
        rm -f "$OUT/ncu-open.csv"; head -14 "$OUT/ncu-open.txt" ;;
    qwen32k) # Qwen2.5-Coder-0.5B (join-model with JOIN_NAME=qwen) on the
        # fidelity study's 32K natural prompts, 64 tokens: dense against
        # the certified 4-bit sketch policy with open extras and no value
        # boxes at QWEN_TAU (the study's cert-mass-TAU; 0.01 kept the
        # study's runs identical at 32K) and against sketch top-1024
        cert="{\"anchor\":1,\"window\":64,\"topk\":192,\"selector\":\"sketch\",\"bits\":4,\"tau\":${QWEN_TAU:-0.01},\"max_extra\":32768,\"output_bound\":false}"
        sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
        for id in ${QWEN_PROMPTS:-natural-32768-s7 natural-32768-0}; do
          python3 -c 'import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["id"] == sys.argv[2]:
        sys.stdout.write(d["text"])' \
            reports/fidelity/qwen2.5-tau/32k-natural3-plusL/prompts.jsonl \
            "$id" > "/tmp/$id.txt"
          for pol in cert sketch; do
            [ $pol = cert ] && p=$cert || p=$sk
            step "qwen32k-$id-$pol" ${QWEN_SECONDS:-200} $BIN/condensate-decode \
              --device gpu --model /root/models/qwen.gguf \
              --prompt-file "/tmp/$id.txt" --max-new-tokens 64 --ignore-eos \
              --policy "$p" --compare dense
          done
        done ;;
    decoder) decoder_test decoder 300 ;;
    e2e) # end-to-end decode speed on dummy weights of real architectures
        # (condensate-bench): dense against sketch and page top-1024
        sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
        bm='{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
        # E2E_CERTIFIED=1 adds a certified sketch policy (pages of 64) with
        # 512 extras (examples/certified.mlir's open extras, 32768, are
        # slow on the GPU: docs/CERTIFICATE.md, "Open extras"), and the
        # same without the output-error bound (no value boxes)
        cert=$CERT512
        certm=$CERT512M
        pols=(--policy "$sk" --policy "$bm")
        [ "${E2E_CERTIFIED:-0}" = 1 ] && pols+=(--policy "$cert" --policy "$certm")
        for run in ${E2E_RUNS:-llama-3-8b:32768:8 llama-3-8b:32768:1 llama-3.2-1b:32768:8 qwen2.5-7b:32768:8 llama-3.2-1b:130000:8 llama-3-8b:130000:1}; do
          IFS=: read -r arch ctx batch <<< "$run"
          step "e2e-$arch-$ctx-b$batch" 240 $BIN/condensate-bench --dummy $arch \
            --context $ctx --batch $batch --steps 32 --warmup 4 \
            "${pols[@]}" --json "$OUT/e2e-$arch-$ctx-b$batch.json"
        done ;;
    ncu-sketch) # kernel times of the sketch top-1024 and certified sketch
        # decode kernels on dummy Llama-3.2-1B at 32K x 8. Layers sharing a
        # policy run model_layer0's kernels; the skip passes dense's merges
        # (3 steps x 16 layers).
        sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
        cert=$CERT512
        step ncu-sketch 300 ncu --target-processes all \
          --kernel-name regex:'layer0_(score_sketch|select_topk|precertify|sparse_attend|certify|merge)' --launch-skip 48 --launch-count 24 \
          --metrics gpu__time_duration.sum $BIN/condensate-bench \
          --dummy llama-3.2-1b --context 32768 --batch 8 --steps 2 --warmup 1 \
          --policy "$sk" --policy "$cert" ;;
    ncu-sketch-8b) # kernel times of sketch top-1024 on dummy Llama-3-8B at
        # 32K x 8 (the skip passes dense's 3 steps x 32 layers x 2 kernels).
        # NCU_SECTIONS=1 adds the speed-of-light, memory, occupancy and
        # warp-state sections: 20 replays a kernel, too slow with 32 GB of
        # weights to save and restore, so use it with
        # NCU_MODEL=llama-3.2-1b NCU_SKIP=96 (16 layers)
        sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
        sections=(--metrics gpu__time_duration.sum)
        [ "${NCU_SECTIONS:-0}" = 1 ] && sections=(--section SpeedOfLight \
          --section MemoryWorkloadAnalysis --section Occupancy \
          --section LaunchStats --section WarpStateStats \
          --section SchedulerStats --section ComputeWorkloadAnalysis)
        step ncu-sketch-8b 300 ncu --target-processes all \
          --kernel-name regex:'layer0_(score_sketch|select_topk|sparse_attend|merge|dense_attend)' \
          --launch-skip ${NCU_SKIP:-200} --launch-count ${NCU_COUNT:-12} "${sections[@]}" \
          $BIN/condensate-bench --dummy ${NCU_MODEL:-llama-3-8b} --context 32768 \
          --batch 8 --steps 2 --warmup 1 --policy "$sk" ;;
    ncu-step) # every kernel of one decode step of each policy (dense,
        # sketch top-1024, block_minmax), dummy NCU_STEP_MODEL (default
        # Llama-3-8B) at NCU_STEP_CONTEXT x NCU_STEP_BATCH (default 32768
        # x 8): condensate-bench --profile brackets the step, ncu times its
        # kernels; bench/ncu_step.py sums them by name. Under ncu the
        # prefill's launches (an append a position) are slow: Llama-3.2-1B
        # at 130000 x 8 took 166 s, Qwen2.5-7B at 130000 x 4 over 280 s
        # (reports/gpu/session24/run1).
        step ncu-step ${NCU_STEP_SECONDS:-400} ncu --target-processes all \
          --profile-from-start off --metrics gpu__time_duration.sum --csv \
          --log-file "$OUT/ncu-step.csv" \
          $BIN/condensate-bench --dummy ${NCU_STEP_MODEL:-llama-3-8b} \
          --context ${NCU_STEP_CONTEXT:-32768} --batch ${NCU_STEP_BATCH:-8} \
          --steps 2 --warmup 1 --profile \
          --policy '{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}' \
          --policy '{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
        python3 bench/ncu_step.py "$OUT/ncu-step.csv" | tee "$OUT/ncu-step.txt" ;;
    gemma-model) # join the Gemma-3-270M parts carried by earlier calls
        join_model gemma models/gemma-3-270m-q4_k_m.gguf ;;
    gemma) # Gemma-3-270M at a ~21.6K-token prompt (its window: 32K):
        # the model's own attention, uncertified sketch top-1024 and the
        # certified sketch policy on its global layers, against dense
        cat /usr/share/common-licenses/* | head -c 100000 > /tmp/prompt-gemma.txt
        for pol in dense \
          '{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4,"page_size":64}' \
          "$CERT512"; do
          case $pol in dense) n=dense ;; *tau*) n=certified ;; *) n=sketch1024 ;; esac
          step "gemma-$n" 200 $BIN/condensate-decode --device gpu \
            --model /root/models/gemma.gguf --prompt-file /tmp/prompt-gemma.txt \
            --max-new-tokens 128 --ignore-eos --policy "$pol" --compare dense
        done ;;
    decode8k)
        cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 \
          | head -c 36500 > /tmp/prompt8k.txt
        head -c 3800 /usr/share/common-licenses/GPL-3 > /tmp/prompt1k.txt
        for pol in dense paper; do
          step "decode8k-$pol" 200 $BIN/condensate-decode --device gpu \
            --model /root/models/model.gguf --prompt-file /tmp/prompt8k.txt \
            --max-new-tokens 256 --ignore-eos --policy $pol --compare dense \
            --json
        done
        step decode-chat 120 $BIN/condensate-decode --device gpu \
          --model /root/models/model.gguf --chat --prompt \
          "Summarize the following license text in two sentences. $(cat /tmp/prompt1k.txt)" \
          --max-new-tokens 64 --compare dense ;;
  esac
done
