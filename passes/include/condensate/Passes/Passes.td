//===- Passes.td - condensate transformation passes --------*- tablegen -*-===//
//
// Passes that stay inside the condensate dialect: schedule expansion,
// specialisation and decomposition into stages. Sorted by pipeline order.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_PASSES_TD
#define CONDENSATE_PASSES_TD

include "mlir/Pass/PassBase.td"

def CondensateExpandSchedule
    : Pass<"condensate-expand-schedule", "::mlir::ModuleOp"> {
  let summary = "Turns a model's layer schedule into per-layer functions";
  let description = [{
    Every `condensate.model` becomes one `func.func` per distinct layer
    configuration (the tuple of per-key/value-head policies), each holding a
    single `condensate.decode_attention`, one `func.func` per distinct
    prefill window holding a `condensate.prefill_attention` (a layer whose
    key/value heads share one static window policy prefills in that window,
    every other layer densely), one `func.func` holding the
    `condensate.append_kv` of the model's cache, and an entry in the module
    attribute `condensate.layer_tables` that maps each layer to its function
    (an attribute, so it survives the lowering to LLVM for the runtime). Layers
    with identical configurations share a function. Every function has the
    same signature, so a runtime calls any layer the same way; functions are
    marked `llvm.emit_c_interface`.

    Before:

    ```mlir
    condensate.model @m layers = 3, q_heads = 4, kv_heads = 2, head_dim = 64,
        page_size = 16, kv_type = f16,
        schedule = #condensate.schedule<layers = 3,
          default = #condensate.policy<anchor = 1, window = 64, topk = 32>,
          rules = [#condensate.rule<layers = [1], policy = #condensate.dense>]>
    ```

    After (abridged):

    ```mlir
    func.func @m_layer0(%q: memref<?x4x64xf32>, %k: memref<?x2x16x64xf16>, ...)
        attributes {llvm.emit_c_interface} {
      condensate.decode_attention q(%q : ...) ... {policy = #condensate.policy<...>, scale = 0.125 : f32}
      return
    }
    func.func @m_layer1(...) { condensate.decode_attention ... {policy = #condensate.dense, ...} }
    func.func @m_prefill(...) { condensate.prefill_attention ... {scale = 0.125 : f32} }
    func.func @m_append(...) { condensate.append_kv ... }
    module attributes {condensate.layer_tables = {m = {adaptive = array<i64>,
        append = @m_append, layers = [@m_layer0, @m_layer1, @m_layer0],
        prefill = [@m_prefill, @m_prefill, @m_prefill]}}}
    ```
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect",
    "::mlir::condensate::CondensateDialect"
  ];
}

def CondensateSpecialize
    : Pass<"condensate-specialize", "::mlir::ModuleOp"> {
  let summary = "Pins head_dim, dtype, GQA group, page size and budget";
  let description = [{
    Gives every `condensate.decode_attention` a `#condensate.spec`: the head
    dimension, head counts (hence the GQA group), page size and KV storage
    type read from its operand types, completed by the pass options where an
    operand type leaves a dimension dynamic (the operand is then cast to the
    static type, and a conflicting static size is an error); the number of
    units top-k keeps and the certificate may add, from the policies; and the
    number of splits of the sparse attention, chosen for the target (one on
    the CPU; on a GPU the most a launch runs, enough to fill the streaming
    multiprocessors with one sequence: each launch runs fewer at larger
    batches).

    Before:

    ```mlir
    condensate.decode_attention q(%q : memref<?x?x?xf32>) kv(%k, %v : memref<?x?x?x?xf16>) ...
        {policy = #condensate.policy<anchor = 1, window = 64, topk = 32, page_size = 16>, scale = 0.125 : f32}
    ```

    After `--condensate-specialize="head-dim=64 q-heads=8 kv-heads=2 page-size=16"`:

    ```mlir
    %q2 = memref.cast %q : memref<?x?x?xf32> to memref<?x8x64xf32>
    %k2 = memref.cast %k : memref<?x?x?x?xf16> to memref<?x2x16x64xf16>
    ...
    condensate.decode_attention q(%q2 : memref<?x8x64xf32>) ...
        {policy = ..., scale = 0.125 : f32,
         spec = #condensate.spec<head_dim = 64, q_heads = 8, kv_heads = 2,
                page_size = 16, kv_type = f16, top_units = 2, extra_units = 0,
                splits = 1, target = cpu>}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Target to specialise for: cpu, sm_80 or sm_90">,
    Option<"headDim", "head-dim", "int64_t", /*default=*/"0",
           "Head dimension for operands whose type leaves it dynamic">,
    Option<"qHeads", "q-heads", "int64_t", /*default=*/"0",
           "Query heads for operands whose type leaves them dynamic">,
    Option<"kvHeads", "kv-heads", "int64_t", /*default=*/"0",
           "Key/value heads for operands whose type leaves them dynamic">,
    Option<"pageSize", "page-size", "int64_t", /*default=*/"0",
           "Page size for operands whose type leaves it dynamic">,
    Option<"splits", "splits", "int64_t", /*default=*/"0",
           "Sparse-attention splits (0: chosen for the target)">
  ];
  let dependentDialects = [
    "::mlir::memref::MemRefDialect",
    "::mlir::condensate::CondensateDialect"
  ];
}

def CondensateDecompose
    : Pass<"condensate-decompose", "::mlir::ModuleOp"> {
  let summary = "Decomposes decode attention into its stages";
  let description = [{
    Rewrites every specialised `condensate.decode_attention` into stages on
    scratch buffers it allocates: page or token scoring, top-k selection,
    sparse attention into split partials, the certificate (with extra units
    and dense fallback when tau > 0, and, given summaries and stats, the box
    of omitted values the merge turns into the output-error bound), dense
    attention for pillar heads, and the merge. Key/value heads with
    different policies are handled as separate runs of heads on subviews of
    the operands.

    Before:

    ```mlir
    condensate.decode_attention ... {policy = #condensate.policy<anchor = 1,
        window = 64, topk = 32, page_size = 16>, spec = #condensate.spec<...>}
    ```

    After (abridged):

    ```mlir
    %scores = memref.alloc(%b, %mp) : memref<?x8x?xf32>
    condensate.score_pages block_minmax q(...) summaries(...) ... scores(%scores ...)
    %idx = memref.alloc(%b) : memref<?x2x2xi32>
    condensate.select_topk page scores(%scores ...) ... indices(%idx ...)
    condensate.sparse_attend page q(...) ... indices(%idx ...) partials(%po, %pml ...)
    condensate.merge partials(%po, %pml ...) out(%out ...)
    memref.dealloc %scores : memref<?x8x?xf32>
    ```
  }];
  let options = [
    Option<"denseSplits", "dense-splits", "int64_t", /*default=*/"0",
           "Dense-attention splits per sequence (0: chosen for the target)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::condensate::CondensateDialect"
  ];
}

#endif // CONDENSATE_PASSES_TD
