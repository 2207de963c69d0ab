// The launch plan extracted from the host functions after the GPU lowering
// (what an AOT manifest carries): layer, prefill and append functions, scratch
// buffers, and every kernel launch with its grid and memref views written
// as expressions over argument dimensions (argI.dimJ).
//
// RUN: condensate-opt --condensate-to-ptx --condensate-test-launch-plan %s -o /dev/null | FileCheck %s
// RUN: condensate-opt --condensate-to-ptx --condensate-test-launch-plan="json=true target=sm_80" %s -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: not condensate-opt --condensate-test-launch-plan %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=ERR

// Layer 0: block top-k (score, select, sparse attend, merge); layer 1: dense.
condensate.model @lp layers = 2, q_heads = 4, kv_heads = 2, head_dim = 64,
    page_size = 16, kv_type = f16,
    schedule = #condensate.schedule<layers = 2,
      default = #condensate.policy<anchor = 1, window = 32, topk = 32>,
      rules = [#condensate.rule<layers = [1], policy = #condensate.dense>]>

// CHECK-LABEL: // launch plan of @lp for sm_90
// CHECK-NEXT: layers: @lp_layer0 @lp_layer1
// CHECK-NEXT: prefill: @lp_prefill @lp_prefill
// CHECK-NEXT: append: @lp_append
// CHECK-NEXT: adaptive:{{$}}

// The append: one block per sequence; seven ABI arguments, f16 pages.
// CHECK-LABEL: func @lp_append args 7
// CHECK-NEXT:   launch lp_append_append_kv grid (arg0.dim0, 1, 1) block (128, 1, 1)
// CHECK-NEXT:     arg 0 f32 offset 0 sizes [arg0.dim0, 2, 64] strides [128, 64, 1]
// CHECK:          arg 2 f16 offset 0 sizes [arg2.dim0, 2, 16, 64] strides [2048, 1024, 64, 1]
// CHECK:          arg 6 f32 offset 0 sizes [arg6.dim0, 2, 5, 64] strides [640, 320, 64, 1]

// Block top-k: page scores [B, Hq, MP] in scratch, then selection,
// attention and merge, each reading the previous stage's scratch.
// CHECK-LABEL: func @lp_layer0 args 9
// CHECK-NEXT:   scratch 0 f32 [arg0.dim0, 4, arg3.dim1]
// CHECK-NEXT:   scratch 1 i32 [arg0.dim0, 2, 2]
// CHECK:        launch lp_layer0_score_pages grid (ceildiv(arg3.dim1, 64), 2, arg0.dim0)
// CHECK:          arg 6 f32 offset 0 sizes [arg6.dim0, 2, 5, 64]
// CHECK:          scratch 0 f32 offset 0 sizes [arg0.dim0, 4, arg3.dim1]
// Every launch on sm_90 is programmatic (its kernel waits at entry).
// CHECK:        launch lp_layer0_select_topk grid (2, arg0.dim0, 1) block (1024, 1, 1) shared 225280 grid_dependency
// CHECK:          scratch 1 i32 offset 0 sizes [arg0.dim0, 2, 2] strides [4, 2, 1]
// CHECK:        launch lp_layer0_sparse_attend
// CHECK:        launch lp_layer0_merge grid (mul(arg7.dim0, 4), 1, 1)
// CHECK:          arg 8 f32 offset 0 sizes [arg8.dim0, 4, 5] strides [20, 5, 1]

// Dense: split-KV partials in scratch, merged into out.
// CHECK-LABEL: func @lp_layer1 args 9
// CHECK:        launch lp_layer1_dense_attend
// CHECK-NOT:    launch lp_layer1_score
// CHECK:        launch lp_layer1_merge

// Prefill: one block per tile of 32 rows (two query heads of a group, 64
// vectors), key/value head and sequence; no scratch.
// CHECK-LABEL: func @lp_prefill args 7
// CHECK-NEXT:   launch lp_prefill_prefill grid (ceildiv(arg0.dim0, 32), 2, arg4.dim0) block (128, 1, 1)
// CHECK-NEXT:     arg 0 f32 offset 0 sizes [arg0.dim0, 4, 64] strides [256, 64, 1]
// CHECK:          arg 5 i32 offset 0 sizes [arg5.dim0] strides [1]
// CHECK-NEXT:     arg 6 f32 offset 0 sizes [arg6.dim0, 4, 64] strides [256, 64, 1]

// JSON: "adaptive": []
// JSON: "append": "lp_append"
// JSON: "format": "condensate-launch-plan-1"
// JSON: "grid_dependency": true
// JSON: "prefill": [
// JSON-NEXT: "lp_prefill",
// JSON-NEXT: "lp_prefill"
// JSON: "target": "sm_80"

// ERR: error: no layer tables: run the GPU lowering first
