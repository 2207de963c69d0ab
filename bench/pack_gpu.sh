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
# The models are over the 64 MiB a call may carry: parts of 33 MB
# (bench/split_model.sh), each carried by its own call and copied to
# /root/models/; gpu_session.sh's `model`, `gemma-model` and `join-model`
# (JOIN_NAME=qwen) steps join them. Gemma-3-270M and Qwen2.5-Coder-0.5B
# only when fetched (scripts/fetch-models.sh).
. scripts/default-model.env
for m in model:"$CONDENSATE_DEFAULT_MODEL" \
         gemma:models/gemma-3-270m-q4_k_m.gguf \
         qwen:models/Qwen2.5-Coder-0.5B-Instruct.gguf; do
  name=${m%%:*} file=${m#*:}
  if [ -f "$file" ] && [ ! -f ".carry/$name.part00" ]; then
    bash bench/split_model.sh "$file" "$name" > /dev/null
  fi
done
ls -la .carry/
