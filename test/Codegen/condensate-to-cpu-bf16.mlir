// A bf16 cache on the CPU: the append's f32 -> bf16 rounding and the
// attention's bf16 -> f32 widening are integer arithmetic (round to
// nearest even, NaN to a quiet NaN), not fptrunc/fpext: LLVM lowers an
// f32 -> bf16 fptrunc on x86 without AVX512-BF16 to a call of
// __truncsfbf2, which the JIT's process does not provide.
//
// RUN: condensate-opt --condensate-to-cpu %s | FileCheck %s
// RUN: condensate-opt --condensate-to-cpu %s | FileCheck %s --check-prefix=NONE
// CHECK-DAG: llvm.func @tiny_append(
// CHECK-DAG: llvm.func @tiny_layer0(
// NONE-NOT: llvm.fptrunc {{.*}}bf16
// NONE-NOT: llvm.fpext {{.*}}bf16
// NONE-NOT: __truncsfbf2
condensate.model @tiny layers = 1, q_heads = 4, kv_heads = 2, head_dim = 64,
    page_size = 16, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1, default = #condensate.dense>
