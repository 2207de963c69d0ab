#!/usr/bin/env bash
# Packs what the GPU machine needs from this machine's build (it has no
# LLVM/MLIR): the runtime library and the GPU test and tool binaries,
# stripped and compressed into .carry/gpu.tar.xz (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
cmake --build "$B" --target GPUAttentionTest GPUCompilerTest \
  CondensateCudaDriverTest condensate-translate CondensateRuntime \
  CondensateCompiler condensate-decode condensate-bench condensate-tune \
  GPUDecoderTest \
  AOTLibraryTest condensate-c-example PrefillTest
rm -rf .carry/stage && mkdir -p .carry/stage/bin .carry/stage/lib .carry/stage/aot
cp "$B"/runtime/libCondensateRuntime.so "$B"/runtime/libCondensateCompiler.so \
   .carry/stage/lib/
cp "$B"/test/unit/aot/AOTLibraryTest .carry/stage/bin/
cp "$B"/test/unit/aot/aot.ptx "$B"/test/unit/aot/aot.json \
   "$B"/test/unit/aot/aot-fat.* "$B"/test/unit/aot/c-example.json \
   "$B"/test/unit/aot/c-example.sm_* .carry/stage/aot/
cp "$B"/test/unit/aot/condensate-c-example .carry/stage/bin/
# The Python package's prebuilt libraries (what pip install ./python packs).
cmake -DTRANSLATE="$B"/tools/condensate-translate/condensate-translate \
  -DSPECS_DIR=python/prebuilt -DOUT_DIR=.carry/stage/prebuilt \
  -P python/prebuilt/Build.cmake
cp "$B"/test/unit/runtime/GPUAttentionTest "$B"/test/unit/runtime/GPUCompilerTest \
   "$B"/test/unit/runtime/PrefillTest \
   "$B"/test/unit/cuda/CondensateCudaDriverTest \
   "$B"/tools/condensate-translate/condensate-translate .carry/stage/bin/
cp "$B"/tools/condensate-decode/condensate-decode \
   "$B"/tools/condensate-bench/condensate-bench \
   "$B"/tools/condensate-tune/condensate-tune \
   "$B"/test/unit/decoder/GPUDecoderTest .carry/stage/bin/
# The CPU decoder links OpenBLAS, which the GPU machine lacks.
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "$(ldconfig -p | awk -v l=$lib '$1 == l {print $NF; exit}')" .carry/stage/lib/
done
strip --strip-unneeded .carry/stage/lib/* .carry/stage/bin/*
tar cf - -C .carry/stage . | xz -T2 -4 > .carry/gpu.tar.xz
rm -rf .carry/stage
ls -la .carry/gpu.tar.xz
# The model is over the 64 MiB a call may carry: two parts, each carried by
# its own call and copied to /root/models/ (gpu_session.sh's `model` step
# joins them).
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$MODEL" ] && [ ! -f .carry/model.part01 ]; then
  split -b 50000000 -d -a 2 "$MODEL" .carry/model.part
fi
# Gemma-3-270M (scripts/fetch-models.sh gemma3), when fetched: six parts
# for six calls, copied to /root/models/ (the `gemma-model` step joins them).
GEMMA=models/gemma-3-270m-q4_k_m.gguf
if [ -f "$GEMMA" ] && [ ! -f .carry/gemma.part00 ]; then
  split -b 44000000 -d -a 2 "$GEMMA" .carry/gemma.part
fi
ls -la .carry/
