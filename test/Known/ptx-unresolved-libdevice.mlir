// KNOWN BUG (unloadable PTX, no diagnostic): condensate-to-ptx lowers
// math.exp / math.fma / math.absf to libdevice calls (__nv_fast_expf,
// __nv_expf, __nv_fmaf, __nv_fabsf) and links libdevice only when CUDA_ROOT,
// CUDA_HOME or CUDA_PATH names a CUDA toolkit (this MLIR build has no
// built-in toolkit path). Without them the pipeline still exits 0, and the
// gpu.binary's PTX declares the calls `.extern .func`; ptxas (or the driver's
// JIT) then fails with "Unresolved extern function '__nv_fast_expf'".
// condensate-translate --emit=ptx and the runtime's GPU compiler share the
// pipeline and the problem.
// Repro: env -u CUDA_ROOT -u CUDA_HOME -u CUDA_PATH \
//   condensate-opt --condensate-to-ptx test/Known/ptx-unresolved-libdevice.mlir \
//   | grep -o '__nv_[a-z_]*' | sort -u
// Expected: the pipeline finds libdevice (a toolkit-path option defaulting to
// the toolkit found at configure time) or fails with a diagnostic naming the
// missing libdevice.bc.
// RUN: env -u CUDA_ROOT -u CUDA_HOME -u CUDA_PATH condensate-opt --condensate-to-ptx %s | FileCheck %s

// CHECK: gpu.binary @condensate_kernels
// CHECK-NOT: __nv_
condensate.model @m layers = 1, q_heads = 4, kv_heads = 2, head_dim = 64,
    page_size = 16, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1, default = #condensate.dense>
