// The PTX pipeline finds libdevice by itself: with no CUDA_* variable set,
// the toolkit's default location is searched and the math calls
// (__nv_expf, __nv_fmaf, ...) are linked in, so the PTX has no unresolved
// `.extern .func`.
// REQUIRES: default-libdevice
// RUN: env -u CUDA_ROOT -u CUDA_HOME -u CUDA_PATH condensate-opt --condensate-to-ptx %s | FileCheck %s

// CHECK: gpu.binary @condensate_kernels
// CHECK-NOT: .extern .func __nv_
condensate.model @m layers = 1, q_heads = 4, kv_heads = 2, head_dim = 64,
    page_size = 16, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1, default = #condensate.dense>
