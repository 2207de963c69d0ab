//===- Passes.td - condensate lowerings ---------------------*- tablegen -*-===//
//
// Conversions out of the condensate dialect: to loops for the CPU, and to GPU
// kernels for NVIDIA targets. Sorted by name.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_PASSES_TD
#define CONDENSATE_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertCondensateToLoops
    : Pass<"convert-condensate-to-loops", "::mlir::ModuleOp"> {
  let summary = "Lowers condensate stages to scf loops for the CPU";
  let description = [{
    Rewrites every stage op (and `condensate.append_kv`) into scf loops over
    memrefs with arith, math and vector arithmetic: head-dimension rows are
    processed 8 lanes at a time, softmax is online (running max, sum and
    output per split), top-k is a radix search over order-preserving
    integer keys, and the certificate accumulates omitted mass in f64.
    The result lowers to LLVM with the standard conversions.

    Every scratch buffer the stages allocate (`memref.alloc`, malloc on the
    CPU) is checked: when one comes back null, the function frees what it
    holds, writes `kWorkspaceFailed` to the first stats entry (when it has
    the decode-attention signature) and returns, and the runtime reports the
    error. A write through a null pointer cannot happen.

    Before:

    ```mlir
    condensate.merge partials(%po, %pml : memref<?x4x1x64xf32>, memref<?x4x1x3xf32>)
        out(%out : memref<?x4x64xf32>)
    ```

    After (abridged):

    ```mlir
    scf.for %b = %c0 to %batch step %c1 {
      scf.for %h = %c0 to %c4 step %c1 {
        %m = scf.for %s = ... iter_args(%acc = %neg_inf) -> (f32) { ... }
        ...
        vector.store %row0, %out[%b, %h, %c0] : memref<?x4x64xf32>, vector<8xf32>
      }
    }
    ```
  }];
  let options = [
    Option<"kvShare", "kv-share", "bool", /*default=*/"false",
           "The decode stages compute the calling thread's share of the "
           "key/value heads, read from condensate_cpu_kv_share, which the "
           "host provides (AttentionABI.h): a layer may then run as one "
           "call a thread">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::func::FuncDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def ConvertCondensateToGPU
    : Pass<"convert-condensate-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lowers condensate stages to GPU kernels with explicit mapping";
  let description = [{
    Every stage op becomes a `gpu.func` kernel in one `gpu.module` and a
    `gpu.launch_func` in its host function; scratch buffers stay host-side
    `memref.alloc`s, so the host function reads as a launch plan (buffers,
    grids, arguments) that condensate-translate turns into a manifest.

    Thread mapping:
    - sparse_attend / dense_attend: one block per (split, kv head,
      sequence); lane groups of L lanes read one key and value row each with
      16-byte vector loads (L = head_dim * bytes / 16, at most 32), serve all
      G query heads of the GQA group from registers, keep online-softmax
      state per head, and combine through shared memory into the split's
      partial (m, l, count, o). The loop over rows is software-pipelined:
      each round loads the next round's rows before its arithmetic.
    - score_pages / score_tokens / score_sketch: a lane group per page (or
      token) and kv head, 256 threads per block; grid (blocks, Hkv, B); a
      block wholly past its sequence's context (the page table is as wide
      as the longest context allowed) only stores -inf.
      score_pages carries launch bounds for 4 (or 3) resident blocks per SM
      where the registers its loads hold leave room. score_sketch gives a
      lane group 4 pages, loading the next one's box and first word rows
      before scoring the current one; it computes a
      page's box and slack terms once, then walks its word rows, summing
      each row's token dot products over the lane group with one transposed
      butterfly (laneSumTransposed: N/2 + N/4 + ... shuffles for N sums).
    - select_topk: one 1024-thread block per (kv head, sequence); ranking
      keys cached in dynamic shared memory (as many as the chip's opt-in
      limit holds: 56832 units on sm_90); 8-bit radix search (4 shared-memory
      histogram passes, warp-aggregated with match.any, the first pass
      counted while the keys are cached) for the base-th largest key
      and, when the op ranks extras, for the (base + extras)-th; each warp
      walks a contiguous range of units, warp scans writing the base set in
      unit order and appending the extras to a shared list where each one's
      rank is counted (1024 extras a list: more take a radix search and
      two passes a further 1024).
    - certify: one block per (kv head, sequence), omitted mass in f64;
      the omitted-value box (only for groups that certify) with one warp
      per page row, lanes over channels, rows combined through shared
      memory.
    - merge: one warp per (sequence, query head), lanes over head_dim; the
      output-error bound by a warp sum.
    - append_kv: one block per sequence.

    Before:

    ```mlir
    condensate.merge partials(%po, %pml : memref<?x32x4x128xf32>, memref<?x32x4x3xf32>)
        out(%out : memref<?x32x128xf32>)
    ```

    After (abridged):

    ```mlir
    gpu.launch_func @condensate_kernels::@attn_merge
        blocks in (%blocks, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%po : memref<?x32x4x128xf32>, %pml : ..., %out : ...)
    gpu.module @condensate_kernels {
      gpu.func @attn_merge(...) kernel { ... }
    }
    ```
  }];
  let options = [
    Option<"moduleName", "module-name", "std::string",
           /*default=*/"\"condensate_kernels\"",
           "Name of the gpu.module that receives the kernels">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "GPU architecture: sizes the dynamic shared memory a kernel may "
           "claim (select_topk's key cache); sm_80 and later have the "
           "tensor cores the attention kernels use">,
    Option<"gridDependency", "grid-dependency", "bool", /*default=*/"true",
           "On sm_90 and later every kernel waits for the grids before it "
           "at entry (griddepcontrol) and its launches are marked "
           "programmatic, so a launch can overlap the previous kernel's "
           "tail">,
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"true",
           "Attention kernels multiply on tensor cores (mma.sync, bf16 "
           "caches, head_dim 64, 128 or 256 (256 with a cp.async ring), GQA "
           "group <= 16) where the chip has them; off: CUDA-core lane "
           "groups everywhere">,
    Option<"attendWarps", "attend-warps", "int64_t", /*default=*/"0",
           "Warps (tensor-core body) or lane groups (CUDA-core body) per "
           "attention block; 0: as many as 128 threads and the combine's "
           "shared memory allow. A request the shared memory cannot hold "
           "is cut to what it can">,
    Option<"sketchOccupancy", "sketch-occupancy", "int64_t",
           /*default=*/"0",
           "Resident warps per SM the key-sketch scoring kernels are built "
           "for (launch bounds: ptxas keeps each thread within 65536 / (32 "
           "N) registers, spilling if it must); 0: the lowering's rule (32 "
           "warps where the kernel's live values fit in 64 registers)">,
    Option<"attendOccupancy", "attend-occupancy", "int64_t",
           /*default=*/"0",
           "Resident warps per SM the attention kernels (dense_attend, "
           "sparse_attend) are built for (launch bounds: ptxas keeps each "
           "thread within the registers of ceil(N / warps a block) blocks, "
           "spilling if it must); 0: no bound, ptxas's own allocation">,
    Option<"attendStages", "attend-stages", "int64_t", /*default=*/"0",
           "Pipeline depth of the tensor-core attention loop: 1 keeps one "
           "tile's rows prefetched in registers; N >= 2 copies each warp's "
           "tiles asynchronously (cp.async) into a ring of N tiles in "
           "shared memory, N - 1 of them in flight while it multiplies one "
           "(cut to what the shared memory holds); 0: the lowering's rule "
           "(registers at head_dim 64 and 128, where the rings measured "
           "slower on the H100; a ring of 2 at 256, where 1 keeps the "
           "attention on CUDA cores)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

//===----------------------------------------------------------------------===//
// Test passes
//===----------------------------------------------------------------------===//

def CondensateTestLaunchPlan : Pass<"condensate-test-launch-plan", "ModuleOp"> {
  let summary = "Prints the launch plan of every lowered model (tests only)";
  let description = [{
    Runs `extractLaunchPlan` (condensate/Codegen/LaunchPlan.h) on every
    model of the module's `condensate.layer_tables` and prints each plan
    to standard output, one line per function, launch and kernel parameter
    (or, with `json=true`, as the manifest's JSON): the scratch buffers,
    kernel launches, grids and memref views of every host function, written
    as expressions over argument dimensions. This is what the runtime's manifest carries; the
    test pass lets lit check the extraction without the runtime. The
    module must have been lowered by convert-condensate-to-gpu (or the
    whole condensate-to-ptx pipeline) first. The IR is unchanged.

    ```
    condensate-opt --condensate-to-ptx --condensate-test-launch-plan m.mlir
    // launch plan of @m for sm_90
    layers: @m_layer0 @m_layer1
    ...
    func @m_layer0 args 9
      scratch 0 f32 [arg0.dim0, 4, arg3.dim1]
      launch m_layer0_score_pages grid (ceildiv(arg3.dim1, 64), 2, arg0.dim0) block (256, 1, 1)
        arg 0 f32 offset 0 sizes [arg0.dim0, 4, 64] strides [256, 64, 1]
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"sm_90\"",
           "Target recorded in the plan">,
    Option<"json", "json", "bool", /*default=*/"false",
           "Print the manifest's JSON instead of one line per item">
  ];
}

#endif // CONDENSATE_CODEGEN_PASSES_TD
