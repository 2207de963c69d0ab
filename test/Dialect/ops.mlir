// Round trip of every condensate op, in the custom and the generic form.
// RUN: condensate-opt %s -split-input-file | condensate-opt -split-input-file | FileCheck %s
// RUN: condensate-opt %s -split-input-file --mlir-print-op-generic | condensate-opt -split-input-file | FileCheck %s
// RUN: condensate-opt %s -split-input-file --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// Printing is a fixed point: printed IR prints back to the same text.
// RUN: condensate-opt %s -split-input-file -o %t.1.mlir
// RUN: condensate-opt %t.1.mlir -split-input-file -o %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir

// CHECK-LABEL: condensate.model @m1
// CHECK-SAME: layers = 4, q_heads = 8, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f16, schedule = <layers = 4, default = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = exact>, rules = []>{{$}}
// GENERIC: "condensate.model"() <{head_dim = 64 : i64, kv_type = f16, num_kv_heads = 2 : i64, num_layers = 4 : i64, num_q_heads = 8 : i64, page_size = 16 : i64, schedule = #condensate.schedule<layers = 4, default = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = exact>, rules = []>, sym_name = "m1"}> : () -> ()
condensate.model @m1 layers = 4, q_heads = 8, kv_heads = 2, head_dim = 64,
    page_size = 16, kv_type = f16,
    schedule = #condensate.schedule<layers = 4,
      default = #condensate.policy<window = 64, topk = 32, selector = exact>,
      rules = []>

// -----

// CHECK-LABEL: condensate.model @m2
// CHECK-SAME: layers = 30, q_heads = 9, kv_heads = 3, head_dim = 64, page_size = 64, kv_type = bf16, scale = 1.250000e-01, schedule
// CHECK-SAME: = <layers = 30, default = #condensate.policy<anchor = 1, window = 64, window_max = 256, topk = 1024, page_size = 64, tau = 1.000000e-04, max_extra = 8>,
// CHECK-SAME: rules = [#condensate.rule<layers = [0 to 7], policy = #condensate.policy<anchor = 1, window = 1024, page_size = 64>>, #condensate.rule<layers = [15], policy = #condensate.dense>, #condensate.rule<layers = [2, 3], kv_heads = [1], policy = #condensate.dense>]>
// CHECK-SAME: {note = "kept"}
// GENERIC: "condensate.model"() <{{.*}}scale = 1.250000e-01 : f32, schedule = #condensate.schedule<layers = 30,{{.*}}sym_name = "m2"}> {note = "kept"} : () -> ()
condensate.model @m2 layers = 30, q_heads = 9, kv_heads = 3, head_dim = 64,
    page_size = 64, kv_type = bf16, scale = 0.125,
    schedule = #condensate.schedule<layers = 30,
      default = #condensate.policy<anchor = 1, window = 64, window_max = 256,
                                   topk = 1024, page_size = 64, tau = 1.0e-4,
                                   max_extra = 8>,
      rules = [
        #condensate.rule<layers = [0 to 7],
                         policy = #condensate.policy<window = 1024, page_size = 64>>,
        #condensate.rule<layers = [15], policy = #condensate.dense>,
        #condensate.rule<layers = [2, 3], kv_heads = [1], policy = #condensate.dense>
      ]> {note = "kept"}

// -----

// Every optional operand, per-head policies and a spec.
// CHECK-LABEL: func.func @decode_full
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x16xf32>, %[[K:.*]]: memref<?x2x16x16xf16>, %[[V:.*]]: memref<?x2x16x16xf16>, %[[PT:.*]]: memref<?x?xi32>, %[[LEN:.*]]: memref<?xi32>, %[[W:.*]]: memref<?xi32>, %[[S:.*]]: memref<?x2x5x16xf32>, %[[O:.*]]: memref<?x4x16xf32>, %[[ST:.*]]: memref<?x4x5xf32>)
// CHECK: condensate.decode_attention q(%[[Q]] : memref<?x4x16xf32>) kv(%[[K]], %[[V]] : memref<?x2x16x16xf16>) pages(%[[PT]] : memref<?x?xi32>) lens(%[[LEN]] : memref<?xi32>) windows(%[[W]] : memref<?xi32>) summaries(%[[S]] : memref<?x2x5x16xf32>) out(%[[O]] : memref<?x4x16xf32>) stats(%[[ST]] : memref<?x4x5xf32>)
// CHECK-SAME: {head_policies = [#condensate.dense, #condensate.policy<anchor = 1, window = 16, window_max = 64, topk = 48, selector = block_mean, tau = strict, max_extra = 2>],
// CHECK-SAME: policy = #condensate.policy<anchor = 0, window = 32, topk = 16>, scale = 2.500000e-01 : f32,
// CHECK-SAME: spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f16, top_units = 3, extra_units = 2, splits = 2, target = sm_90>}
// GENERIC: "condensate.decode_attention"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{head_policies = {{.*}}, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1>, policy = {{.*}}}> : (memref<?x4x16xf32>, memref<?x2x16x16xf16>, memref<?x2x16x16xf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>, memref<?x2x5x16xf32>, memref<?x4x16xf32>, memref<?x4x5xf32>) -> ()
func.func @decode_full(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>,
                       %v: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>,
                       %len: memref<?xi32>, %w: memref<?xi32>,
                       %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>,
                       %st: memref<?x4x5xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>)
      kv(%k, %v : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) windows(%w : memref<?xi32>)
      summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>)
      stats(%st : memref<?x4x5xf32>)
      {policy = #condensate.policy<anchor = 0, window = 32, topk = 16>,
       head_policies = [#condensate.dense,
         #condensate.policy<window = 16, window_max = 64, topk = 48,
                            selector = block_mean, tau = strict, max_extra = 2>],
       scale = 0.25 : f32,
       spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2,
                               page_size = 16, kv_type = f16, top_units = 3,
                               extra_units = 2, splits = 2, target = sm_90>}
  return
}

// -----

// No optional operand: a dense policy on a fully dynamic f32 cache.
// CHECK-LABEL: func.func @decode_min
// CHECK: condensate.decode_attention q(%{{.*}} : memref<?x?x?xf32>) kv(%{{.*}}, %{{.*}} : memref<?x?x?x?xf32>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) out(%{{.*}} : memref<?x?x?xf32>) {policy = #condensate.dense, scale = 1.000000e+00 : f32}
// CHECK-NEXT: return
// GENERIC: operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 1, 0>
func.func @decode_min(%q: memref<?x?x?xf32>, %k: memref<?x?x?x?xf32>,
                      %v: memref<?x?x?x?xf32>, %pt: memref<?x?xi32>,
                      %len: memref<?xi32>, %o: memref<?x?x?xf32>) {
  condensate.decode_attention q(%q : memref<?x?x?xf32>)
      kv(%k, %v : memref<?x?x?x?xf32>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) out(%o : memref<?x?x?xf32>)
      {policy = #condensate.dense, scale = 1.0 : f32}
  return
}

// -----

// The exact selector ranks tokens, not pages: its policy page_size need not
// match the cache's (only block selectors use pages), in an op and in a model.
// CHECK-LABEL: func.func @exact_page_size
// CHECK: condensate.decode_attention {{.*}} {policy = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = exact, page_size = 64>, scale = 2.500000e-01 : f32}
// CHECK: condensate.decode_attention {{.*}} {head_policies = [#condensate.dense, #condensate.policy<anchor = 1, window = 8, topk = 4, selector = exact, page_size = 1024>], policy = #condensate.dense, scale = 2.500000e-01 : f32}
func.func @exact_page_size(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>,
                           %pt: memref<?x?xi32>, %len: memref<?xi32>,
                           %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>)
      kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>)
      {policy = #condensate.policy<window = 64, topk = 32, selector = exact,
                                   page_size = 64>, scale = 0.25 : f32}
  condensate.decode_attention q(%q : memref<?x4x16xf32>)
      kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>)
      {policy = #condensate.dense,
       head_policies = [#condensate.dense,
         #condensate.policy<window = 8, topk = 4, selector = exact,
                            page_size = 1024>], scale = 0.25 : f32}
  return
}

// -----

// CHECK-LABEL: condensate.model @exact_model
// CHECK-SAME: page_size = 32, kv_type = f32, schedule = <layers = 2, default = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = exact>, rules = [#condensate.rule<layers = [1], policy = #condensate.policy<anchor = 1, window = 32, topk = 8, page_size = 32>>]>{{$}}
condensate.model @exact_model layers = 2, q_heads = 4, kv_heads = 2,
    head_dim = 16, page_size = 32, kv_type = f32,
    schedule = #condensate.schedule<layers = 2,
      default = #condensate.policy<window = 64, topk = 32, selector = exact>,
      rules = [#condensate.rule<layers = [1],
                 policy = #condensate.policy<window = 32, topk = 8,
                                             page_size = 32>>]>

// -----

// CHECK-LABEL: func.func @prefill
// CHECK: condensate.prefill_attention q(%{{.*}} : memref<?x4x16xf32>) kv(%{{.*}}, %{{.*}} : memref<?x2x16x16xbf16>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) rows(%{{.*}} : memref<?xi32>) out(%{{.*}} : memref<?x4x16xf32>) {scale = 2.500000e-01 : f32}
// CHECK: condensate.prefill_attention {{.*}} {anchor = 4 : i64, scale = 2.500000e-01 : f32, window = 512 : i64}
// GENERIC: "condensate.prefill_attention"({{.*}}) <{anchor = 0 : i64, scale = 2.500000e-01 : f32, window = 0 : i64}> : (memref<?x4x16xf32>, memref<?x2x16x16xbf16>, memref<?x2x16x16xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>, memref<?x4x16xf32>) -> ()
func.func @prefill(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xbf16>,
                   %v: memref<?x2x16x16xbf16>, %pt: memref<?x?xi32>,
                   %len: memref<?xi32>, %rs: memref<?xi32>,
                   %o: memref<?x4x16xf32>) {
  condensate.prefill_attention q(%q : memref<?x4x16xf32>)
      kv(%k, %v : memref<?x2x16x16xbf16>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) rows(%rs : memref<?xi32>)
      out(%o : memref<?x4x16xf32>) {scale = 0.25 : f32}
  condensate.prefill_attention q(%q : memref<?x4x16xf32>)
      kv(%k, %v : memref<?x2x16x16xbf16>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) rows(%rs : memref<?xi32>)
      out(%o : memref<?x4x16xf32>) {scale = 0.25 : f32, window = 512, anchor = 4}
  return
}

// -----

// CHECK-LABEL: func.func @append
// CHECK: condensate.append_kv k(%{{.*}} : memref<?x2x16xf32>) v(%{{.*}} : memref<?x2x16xf32>) into(%{{.*}}, %{{.*}} : memref<?x2x16x16xbf16>) pages(%{{.*}} : memref<?x?xi32>) positions(%{{.*}} : memref<?xi32>) summaries(%{{.*}} : memref<?x2x5x16xf32>)
// CHECK: condensate.append_kv k(%{{.*}} : memref<?x2x16xf32>) v(%{{.*}} : memref<?x2x16xf32>) into(%{{.*}}, %{{.*}} : memref<?x2x16x16xbf16>) pages(%{{.*}} : memref<?x?xi32>) positions(%{{.*}} : memref<?xi32>){{$}}
// GENERIC: "condensate.append_kv"({{.*}}) <{sketch_bits = 0 : i64}> : (memref<?x2x16xf32>, memref<?x2x16xf32>, memref<?x2x16x16xbf16>, memref<?x2x16x16xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?x2x5x16xf32>) -> ()
// GENERIC: "condensate.append_kv"({{.*}}) <{sketch_bits = 0 : i64}> : (memref<?x2x16xf32>, memref<?x2x16xf32>, memref<?x2x16x16xbf16>, memref<?x2x16x16xbf16>, memref<?x?xi32>, memref<?xi32>) -> ()
func.func @append(%kn: memref<?x2x16xf32>, %vn: memref<?x2x16xf32>,
                  %k: memref<?x2x16x16xbf16>, %v: memref<?x2x16x16xbf16>,
                  %pt: memref<?x?xi32>, %pos: memref<?xi32>,
                  %s: memref<?x2x5x16xf32>) {
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%vn : memref<?x2x16xf32>)
      into(%k, %v : memref<?x2x16x16xbf16>) pages(%pt : memref<?x?xi32>)
      positions(%pos : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>)
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%vn : memref<?x2x16xf32>)
      into(%k, %v : memref<?x2x16x16xbf16>) pages(%pt : memref<?x?xi32>)
      positions(%pos : memref<?xi32>)
  return
}

// -----

// CHECK-LABEL: func.func @score_pages
// CHECK: condensate.score_pages block_minmax q(%{{.*}} : memref<?x4x16xf32>) summaries(%{{.*}} : memref<?x2x5x16xf32>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) scores(%{{.*}} : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 2.500000e-01 : f32}
// CHECK: condensate.score_pages block_mean q(%{{.*}} : memref<?x4x16xf32>) summaries(%{{.*}} : memref<?x2x5x16xf32>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) scores(%{{.*}} : memref<?x4x?xf32>) {page_size = 64 : i64, scale = 5.000000e-01 : f32}
// GENERIC: "condensate.score_pages"({{.*}}) <{page_size = 16 : i64, scale = 2.500000e-01 : f32, selector = #condensate<selector block_minmax>}>
// GENERIC: "condensate.score_pages"({{.*}}) <{page_size = 64 : i64, scale = 5.000000e-01 : f32, selector = #condensate<selector block_mean>}>
func.func @score_pages(%q: memref<?x4x16xf32>, %s: memref<?x2x5x16xf32>,
                       %pt: memref<?x?xi32>, %len: memref<?xi32>,
                       %sc: memref<?x4x?xf32>) {
  condensate.score_pages block_minmax q(%q : memref<?x4x16xf32>)
      summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>)
      {page_size = 16 : i64, scale = 0.25 : f32}
  condensate.score_pages block_mean q(%q : memref<?x4x16xf32>)
      summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>)
      {page_size = 64 : i64, scale = 0.5 : f32}
  return
}

// -----

// CHECK-LABEL: func.func @score_sketch
// CHECK: condensate.score_sketch q(%{{.*}} : memref<?x4x16xf32>) summaries(%{{.*}} : memref<?x2x7x16xf32>) pages(%{{.*}} : memref<?x8xi32>) lens(%{{.*}} : memref<?xi32>) scores(%{{.*}} : memref<?x4x128xf32>) {bits = 4 : i64, page_size = 16 : i64, scale = 2.500000e-01 : f32}
// GENERIC: "condensate.score_sketch"({{.*}}) <{bits = 4 : i64, page_size = 16 : i64, scale = 2.500000e-01 : f32}> : (memref<?x4x16xf32>, memref<?x2x7x16xf32>, memref<?x8xi32>, memref<?xi32>, memref<?x4x128xf32>) -> ()
func.func @score_sketch(%q: memref<?x4x16xf32>, %s: memref<?x2x7x16xf32>,
                        %pt: memref<?x8xi32>, %len: memref<?xi32>,
                        %sc: memref<?x4x128xf32>) {
  condensate.score_sketch q(%q : memref<?x4x16xf32>)
      summaries(%s : memref<?x2x7x16xf32>) pages(%pt : memref<?x8xi32>)
      lens(%len : memref<?xi32>) scores(%sc : memref<?x4x128xf32>)
      {page_size = 16 : i64, bits = 4 : i64, scale = 0.25 : f32}
  return
}

// -----

// With widths: each page's interval width per query head, which the
// certificate's lower bounds take.
// CHECK-LABEL: func.func @score_sketch_widths
// CHECK: condensate.score_sketch {{.*}} scores(%{{.*}} : memref<?x4x128xf32>) widths(%{{.*}} : memref<?x4x8xf32>) {bits = 2 : i64
// GENERIC: "condensate.score_sketch"({{.*}}) <{bits = 2 : i64, page_size = 16 : i64, scale = 2.500000e-01 : f32}> : (memref<?x4x16xf32>, memref<?x2x6x16xf32>, memref<?x8xi32>, memref<?xi32>, memref<?x4x128xf32>, memref<?x4x8xf32>) -> ()
func.func @score_sketch_widths(%q: memref<?x4x16xf32>,
                               %s: memref<?x2x6x16xf32>,
                               %pt: memref<?x8xi32>, %len: memref<?xi32>,
                               %sc: memref<?x4x128xf32>,
                               %w: memref<?x4x8xf32>) {
  condensate.score_sketch q(%q : memref<?x4x16xf32>)
      summaries(%s : memref<?x2x6x16xf32>) pages(%pt : memref<?x8xi32>)
      lens(%len : memref<?xi32>) scores(%sc : memref<?x4x128xf32>)
      widths(%w : memref<?x4x8xf32>)
      {page_size = 16 : i64, bits = 2 : i64, scale = 0.25 : f32}
  return
}

// -----

// One row per key/value head: each its group's max.
// CHECK-LABEL: func.func @score_sketch_per_group
// CHECK: condensate.score_sketch {{.*}} scores(%{{.*}} : memref<?x2x128xf32>)
func.func @score_sketch_per_group(%q: memref<?x4x16xf32>,
                                  %s: memref<?x2x7x16xf32>,
                                  %pt: memref<?x8xi32>, %len: memref<?xi32>,
                                  %sc: memref<?x2x128xf32>) {
  condensate.score_sketch q(%q : memref<?x4x16xf32>)
      summaries(%s : memref<?x2x7x16xf32>) pages(%pt : memref<?x8xi32>)
      lens(%len : memref<?xi32>) scores(%sc : memref<?x2x128xf32>)
      {page_size = 16 : i64, bits = 4 : i64, scale = 0.25 : f32}
  return
}

// -----

// CHECK-LABEL: func.func @score_tokens
// CHECK: condensate.score_tokens q(%{{.*}} : memref<?x4x16xf32>) k(%{{.*}} : memref<?x2x16x16xf32>) pages(%{{.*}} : memref<?x8xi32>) lens(%{{.*}} : memref<?xi32>) scores(%{{.*}} : memref<?x4x128xf32>) {scale = 2.500000e-01 : f32}
// GENERIC: "condensate.score_tokens"({{.*}}) <{scale = 2.500000e-01 : f32}> : (memref<?x4x16xf32>, memref<?x2x16x16xf32>, memref<?x8xi32>, memref<?xi32>, memref<?x4x128xf32>) -> ()
func.func @score_tokens(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>,
                        %pt: memref<?x8xi32>, %len: memref<?xi32>,
                        %sc: memref<?x4x128xf32>) {
  condensate.score_tokens q(%q : memref<?x4x16xf32>)
      k(%k : memref<?x2x16x16xf32>) pages(%pt : memref<?x8xi32>)
      lens(%len : memref<?xi32>) scores(%sc : memref<?x4x128xf32>)
      {scale = 0.25 : f32}
  return
}

// -----

// CHECK-LABEL: func.func @select_topk
// CHECK: condensate.select_topk page scores(%{{.*}} : memref<?x4x?xf32>) lens(%{{.*}} : memref<?xi32>) indices(%{{.*}} : memref<?x2x6xi32>) {anchor = 1 : i64, base = 4 : i64, page_size = 16 : i64, window = 64 : i64, window_max = 64 : i64}
// CHECK: condensate.select_topk token scores(%{{.*}} : memref<?x4x?xf32>) lens(%{{.*}} : memref<?xi32>) windows(%{{.*}} : memref<?xi32>) indices(%{{.*}} : memref<?x2x6xi32>) {anchor = 0 : i64, base = 6 : i64, page_size = 16 : i64, window = 8 : i64, window_max = 32 : i64}
// GENERIC: "condensate.select_topk"(%arg0, %arg1, %arg3) <{anchor = 1 : i64, base = 4 : i64, granularity = #condensate<granularity page>, page_size = 16 : i64, window = 64 : i64, window_max = 64 : i64}> : (memref<?x4x?xf32>, memref<?xi32>, memref<?x2x6xi32>) -> ()
// GENERIC: "condensate.select_topk"(%arg0, %arg1, %arg2, %arg3) <{anchor = 0 : i64, base = 6 : i64, granularity = #condensate<granularity token>, page_size = 16 : i64, window = 8 : i64, window_max = 32 : i64}>
func.func @select_topk(%sc: memref<?x4x?xf32>, %len: memref<?xi32>,
                       %w: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>)
      {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
       page_size = 16 : i64, base = 4 : i64}
  condensate.select_topk token scores(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) windows(%w : memref<?xi32>)
      indices(%idx : memref<?x2x6xi32>)
      {anchor = 0 : i64, window = 8 : i64, window_max = 32 : i64,
       page_size = 16 : i64, base = 6 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @sparse_attend
// CHECK: condensate.sparse_attend page q(%{{.*}} : memref<?x4x16xf32>) kv(%{{.*}}, %{{.*}} : memref<?x2x16x16xf16>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) indices(%{{.*}} : memref<?x2x6xi32>) partials(%{{.*}}, %{{.*}} : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, count = 4 : i64, first = 0 : i64, include_forced = true, scale = 2.500000e-01 : f32, window = 64 : i64, window_max = 64 : i64}
// CHECK: condensate.sparse_attend token q(%{{.*}} : memref<?x4x16xf32>) kv(%{{.*}}, %{{.*}} : memref<?x2x16x16xf16>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) windows(%{{.*}} : memref<?xi32>) indices(%{{.*}} : memref<?x2x6xi32>) limits(%{{.*}} : memref<?x2xi32>) partials(%{{.*}}, %{{.*}} : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 0 : i64, count = 2 : i64, first = 4 : i64, include_forced = false, scale = 2.500000e-01 : f32, window = 8 : i64, window_max = 16 : i64}
// CHECK: condensate.sparse_attend page q(%{{.*}} : memref<?x4x16xf32>) kv(%{{.*}}, %{{.*}} : memref<?x2x16x16xf16>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) partials(%{{.*}}, %{{.*}} : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 4 : i64, count = 0 : i64, first = 0 : i64, include_forced = true, scale = 2.500000e-01 : f32, window = 60 : i64, window_max = 60 : i64}
// GENERIC: "condensate.sparse_attend"({{.*}}) <{anchor = 1 : i64, count = 4 : i64, first = 0 : i64, granularity = #condensate<granularity page>, include_forced = true, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 1, 0, 0, 1, 1>,
// GENERIC: "condensate.sparse_attend"({{.*}}) <{anchor = 0 : i64, count = 2 : i64, first = 4 : i64, granularity = #condensate<granularity token>, include_forced = false, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1>,
// GENERIC: "condensate.sparse_attend"({{.*}}) <{anchor = 4 : i64, count = 0 : i64, first = 0 : i64, granularity = #condensate<granularity page>, include_forced = true, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1>,
func.func @sparse_attend(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>,
                         %v: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>,
                         %len: memref<?xi32>, %w: memref<?xi32>,
                         %idx: memref<?x2x6xi32>, %lim: memref<?x2xi32>,
                         %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>)
      kv(%k, %v : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>)
      partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
       first = 0 : i64, count = 4 : i64, include_forced = true,
       scale = 0.25 : f32}
  condensate.sparse_attend token q(%q : memref<?x4x16xf32>)
      kv(%k, %v : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) windows(%w : memref<?xi32>)
      indices(%idx : memref<?x2x6xi32>) limits(%lim : memref<?x2xi32>)
      partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      {anchor = 0 : i64, window = 8 : i64, window_max = 16 : i64,
       first = 4 : i64, count = 2 : i64, include_forced = false,
       scale = 0.25 : f32}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>)
      kv(%k, %v : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>)
      partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      {anchor = 4 : i64, window = 60 : i64, window_max = 60 : i64,
       first = 0 : i64, count = 0 : i64, include_forced = true,
       scale = 0.25 : f32}
  return
}

// -----

// The split count is the static dimension 2 of the partials (16 and 4 here);
// there is no chunk attribute.
// CHECK-LABEL: func.func @dense_attend
// CHECK: condensate.dense_attend q(%{{.*}} : memref<?x4x16xf32>) kv(%{{.*}}, %{{.*}} : memref<?x2x16x16xf32>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) partials(%{{.*}}, %{{.*}} : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
// CHECK: condensate.dense_attend q(%{{.*}} : memref<?x4x16xf32>) kv(%{{.*}}, %{{.*}} : memref<?x2x16x16xf32>) pages(%{{.*}} : memref<?x?xi32>) lens(%{{.*}} : memref<?xi32>) mask(%{{.*}} : memref<?x2xi32>) partials(%{{.*}}, %{{.*}} : memref<?x4x4x16xf32>, memref<?x4x4x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
// GENERIC: "condensate.dense_attend"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg6, %arg7) <{scale = 2.500000e-01 : f32}> : (memref<?x4x16xf32>, memref<?x2x16x16xf32>, memref<?x2x16x16xf32>, memref<?x?xi32>, memref<?xi32>, memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) -> ()
// GENERIC: "condensate.dense_attend"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg8, %arg9) <{scale = 2.500000e-01 : f32}> : (memref<?x4x16xf32>, memref<?x2x16x16xf32>, memref<?x2x16x16xf32>, memref<?x?xi32>, memref<?xi32>, memref<?x2xi32>, memref<?x4x4x16xf32>, memref<?x4x4x3xf32>) -> ()
func.func @dense_attend(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>,
                        %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>,
                        %len: memref<?xi32>, %mask: memref<?x2xi32>,
                        %po: memref<?x4x16x16xf32>, %pml: memref<?x4x16x3xf32>,
                        %po4: memref<?x4x4x16xf32>, %pml4: memref<?x4x4x3xf32>) {
  condensate.dense_attend q(%q : memref<?x4x16xf32>)
      kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>)
      partials(%po, %pml : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>)
      {scale = 0.25 : f32}
  condensate.dense_attend q(%q : memref<?x4x16xf32>)
      kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>)
      lens(%len : memref<?xi32>) mask(%mask : memref<?x2xi32>)
      partials(%po4, %pml4 : memref<?x4x4x16xf32>, memref<?x4x4x3xf32>)
      {scale = 0.25 : f32}
  return
}

// -----

// CHECK-LABEL: func.func @certify
// CHECK: condensate.certify page scores(%{{.*}} : memref<?x4x?xf32>) lens(%{{.*}} : memref<?xi32>) indices(%{{.*}} : memref<?x2x6xi32>) base(%{{.*}}, %{{.*}} : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) extra(%{{.*}} : memref<?x2xi32>) fallback(%{{.*}} : memref<?x2xi32>) stats(%{{.*}} : memref<?x4x5xf32>) {anchor = 1 : i64, base_units = 4 : i64, page_size = 16 : i64, tau = 1.000000e-04 : f64, window = 64 : i64, window_max = 64 : i64}
// CHECK: condensate.certify token scores(%{{.*}} : memref<?x4x?xf32>) lens(%{{.*}} : memref<?xi32>) windows(%{{.*}} : memref<?xi32>) indices(%{{.*}} : memref<?x2x6xi32>) base({{.*}}) extra({{.*}}) fallback({{.*}}) stats({{.*}}) {anchor = 0 : i64, base_units = 6 : i64, page_size = 16 : i64, tau = 0.000000e+00 : f64, window = 8 : i64, window_max = 32 : i64}
// CHECK: condensate.certify page {{.*}} stats(%{{.*}} : memref<?x4x5xf32>) summaries(%{{.*}} : memref<?x2x5x16xf32>) pages(%{{.*}} : memref<?x?xi32>) vbox(%{{.*}} : memref<?x2x2x16xf32>) {anchor = 1 : i64,
// GENERIC: "condensate.certify"(%arg0, %arg1, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8) <{anchor = 1 : i64, base_units = 4 : i64, granularity = #condensate<granularity page>, operandSegmentSizes = array<i32: 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0>, page_size = 16 : i64, tau = 1.000000e-04 : f64,
// GENERIC: "condensate.certify"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8) <{anchor = 0 : i64, base_units = 6 : i64, granularity = #condensate<granularity token>, operandSegmentSizes = array<i32: 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0>, page_size = 16 : i64, tau = 0.000000e+00 : f64,
// GENERIC: "condensate.certify"(%arg0, %arg1, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11) <{anchor = 1 : i64, base_units = 4 : i64, granularity = #condensate<granularity page>, operandSegmentSizes = array<i32: 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1>,
func.func @certify(%sc: memref<?x4x?xf32>, %len: memref<?xi32>,
                   %w: memref<?xi32>, %idx: memref<?x2x6xi32>,
                   %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>,
                   %e: memref<?x2xi32>, %f: memref<?x2xi32>,
                   %st: memref<?x4x5xf32>, %s: memref<?x2x5x16xf32>,
                   %pt: memref<?x?xi32>, %vb: memref<?x2x2x16xf32>) {
  condensate.certify page scores(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>)
      base(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>)
      stats(%st : memref<?x4x5xf32>)
      {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
       page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-04 : f64}
  condensate.certify token scores(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) windows(%w : memref<?xi32>)
      indices(%idx : memref<?x2x6xi32>)
      base(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>)
      stats(%st : memref<?x4x5xf32>)
      {anchor = 0 : i64, window = 8 : i64, window_max = 32 : i64,
       page_size = 16 : i64, base_units = 6 : i64, tau = 0.0 : f64}
  condensate.certify page scores(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>)
      base(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>)
      stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x16xf32>)
      pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x2x2x16xf32>)
      {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
       page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-04 : f64}
  condensate.certify page scores(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>)
      base(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>)
      stats(%st : memref<?x4x5xf32>) early(%e : memref<?x2xi32>)
      {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
       page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-04 : f64}
  return
}

// -----

// With widths (token units): the extras' lower bounds join Z.
// CHECK-LABEL: func.func @certify_widths
// CHECK: condensate.certify token scores(%{{.*}} : memref<?x4x128xf32>) widths(%{{.*}} : memref<?x4x8xf32>) lens(%{{.*}} : memref<?xi32>) indices
// GENERIC: "condensate.certify"({{.*}}) <{{.*}}operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0>
func.func @certify_widths(%sc: memref<?x4x128xf32>, %w: memref<?x4x8xf32>,
                          %len: memref<?xi32>, %idx: memref<?x2x6xi32>,
                          %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>,
                          %e: memref<?x2xi32>, %f: memref<?x2xi32>,
                          %st: memref<?x4x5xf32>) {
  condensate.certify token scores(%sc : memref<?x4x128xf32>)
      widths(%w : memref<?x4x8xf32>)
      lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>)
      base(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>)
      stats(%st : memref<?x4x5xf32>)
      {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64,
       page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-02 : f64}
  return
}

// -----

// CHECK-LABEL: func.func @precertify
// CHECK: condensate.precertify token q(%{{.*}} : memref<?x4x16xf32>) k(%{{.*}} : memref<?x2x16x16xf16>) pages(%{{.*}} : memref<?x?xi32>) scores(%[[SC:.*]] : memref<?x4x?xf32>) bounds(%[[SC]] : memref<?x4x?xf32>) lens(%{{.*}} : memref<?xi32>) indices(%{{.*}} : memref<?x2x6xi32>) early(%{{.*}} : memref<?x2xi32>) {anchor = 1 : i64, base_units = 4 : i64, page_size = 16 : i64, scale = 2.500000e-01 : f32, tau = 1.000000e-02 : f64, window = 16 : i64, window_max = 16 : i64}
// CHECK: condensate.precertify page {{.*}} windows(%{{.*}} : memref<?xi32>) indices
// CHECK: condensate.precertify token {{.*}} {anchor = 1 : i64, base_units = 4 : i64, extras_in_z, page_size = 16 : i64
func.func @precertify(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>,
                      %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>,
                      %len: memref<?xi32>, %w: memref<?xi32>,
                      %idx: memref<?x2x6xi32>, %e: memref<?x2xi32>) {
  condensate.precertify token q(%q : memref<?x4x16xf32>)
      k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>)
      scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>)
      early(%e : memref<?x2xi32>)
      {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64,
       page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-02 : f64,
       scale = 0.25 : f32}
  condensate.precertify page q(%q : memref<?x4x16xf32>)
      k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>)
      scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) windows(%w : memref<?xi32>)
      indices(%idx : memref<?x2x6xi32>) early(%e : memref<?x2xi32>)
      {anchor = 0 : i64, window = 8 : i64, window_max = 32 : i64,
       page_size = 16 : i64, base_units = 6 : i64, tau = 0.5 : f64,
       scale = 0.25 : f32}
  condensate.precertify token q(%q : memref<?x4x16xf32>)
      k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>)
      scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>)
      lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>)
      early(%e : memref<?x2xi32>)
      {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64,
       page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-02 : f64,
       scale = 0.25 : f32, extras_in_z}
  return
}

// -----

// CHECK-LABEL: func.func @merge
// CHECK: condensate.merge partials(%{{.*}}, %{{.*}} : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%{{.*}} : memref<?x4x16xf32>){{$}}
// CHECK: condensate.merge partials(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>, memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) fallback(%{{.*}} : memref<?x2xi32>) dense(%{{.*}}, %{{.*}} : memref<?x4x3x16xf32>, memref<?x4x3x3xf32>) out(%{{.*}} : memref<?x4x16xf32>) stats(%{{.*}} : memref<?x4x5xf32>){{$}}
// CHECK: condensate.merge partials(%{{.*}}, %{{.*}} : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%{{.*}} : memref<?x4x16xf32>) stats(%{{.*}} : memref<?x4x5xf32>) {stats_eps = 0.000000e+00 : f32}
// CHECK: condensate.merge partials(%{{.*}}, %{{.*}} : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%{{.*}} : memref<?x4x16xf32>) stats(%{{.*}} : memref<?x4x5xf32>) {stats_eps = 0x7FC00000 : f32}
// CHECK: condensate.merge partials({{.*}}) fallback(%{{.*}} : memref<?x2xi32>) dense({{.*}}) out(%{{.*}} : memref<?x4x16xf32>) stats(%{{.*}} : memref<?x4x5xf32>) vbox(%{{.*}} : memref<?x2x2x16xf32>){{$}}
// GENERIC: "condensate.merge"({{.*}}) <{operandSegmentSizes = array<i32: 2, 0, 0, 1, 0, 0>}>
// GENERIC: "condensate.merge"({{.*}}) <{operandSegmentSizes = array<i32: 4, 1, 2, 1, 1, 0>}>
// GENERIC: "condensate.merge"({{.*}}) <{operandSegmentSizes = array<i32: 2, 0, 0, 1, 1, 0>, stats_eps = 0.000000e+00 : f32}>
// GENERIC: "condensate.merge"({{.*}}) <{operandSegmentSizes = array<i32: 2, 0, 0, 1, 1, 0>, stats_eps = 0x7FC00000 : f32}>
// GENERIC: "condensate.merge"({{.*}}) <{operandSegmentSizes = array<i32: 4, 1, 2, 1, 1, 1>}>
func.func @merge(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>,
                 %po2: memref<?x4x1x16xf32>, %pml2: memref<?x4x1x3xf32>,
                 %f: memref<?x2xi32>, %pod: memref<?x4x3x16xf32>,
                 %pmld: memref<?x4x3x3xf32>, %o: memref<?x4x16xf32>,
                 %st: memref<?x4x5xf32>, %vb: memref<?x2x2x16xf32>) {
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      out(%o : memref<?x4x16xf32>)
  condensate.merge partials(%po, %pml, %po2, %pml2 : memref<?x4x2x16xf32>,
          memref<?x4x2x3xf32>, memref<?x4x1x16xf32>, memref<?x4x1x3xf32>)
      fallback(%f : memref<?x2xi32>)
      dense(%pod, %pmld : memref<?x4x3x16xf32>, memref<?x4x3x3xf32>)
      out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>)
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>)
      {stats_eps = 0.0 : f32}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>)
      out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>)
      {stats_eps = 0x7FC00000 : f32}
  condensate.merge partials(%po, %pml, %po2, %pml2 : memref<?x4x2x16xf32>,
          memref<?x4x2x3xf32>, memref<?x4x1x16xf32>, memref<?x4x1x3xf32>)
      fallback(%f : memref<?x2xi32>)
      dense(%pod, %pmld : memref<?x4x3x16xf32>, memref<?x4x3x3xf32>)
      out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>)
      vbox(%vb : memref<?x2x2x16xf32>)
  return
}
