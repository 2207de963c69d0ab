// condensate-expand-schedule: one function per distinct layer configuration,
// one prefill function per distinct prefill window, one append function, and
// the module's layer table.
// RUN: condensate-opt %s -split-input-file --condensate-expand-schedule -verify-diagnostics | FileCheck %s
// RUN: condensate-opt %S/../../examples/paper.mlir --condensate-expand-schedule | FileCheck %s --check-prefix=PAPER
// RUN: condensate-opt %S/../../examples/paper.mlir --condensate-expand-schedule | FileCheck %s --check-prefix=PAPERN
// A module of 65 models is refused before any is expanded (limits::kMaxModels).
// RUN: python3 -c "print(''.join('condensate.model @m%d layers = 1, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f32, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>\n' % i for i in range(65)))" > %t.many.mlir
// RUN: not condensate-opt %t.many.mlir --condensate-expand-schedule 2>&1 | FileCheck %s --check-prefix=MANY
// MANY: many.mlir:65:1: error: 'condensate.model' op is model 65 of this module; one module expands at most 64 models

// Layers 0, 2 share the default; 1, 3 are dense; layer 4 overrides key/value
// head 1 with an adaptive window, so it gets per-head policies and windows.
// CHECK: module attributes {condensate.layer_tables = {m = {adaptive = array<i64: 4>, append = @m_append, layers = [@m_layer0, @m_layer1, @m_layer0, @m_layer1, @m_layer4], prefill = [@m_prefill, @m_prefill, @m_prefill, @m_prefill, @m_prefill]}}}
// CHECK-NOT: condensate.model
// CHECK-LABEL: func.func @m_layer0
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x16xf32>, %[[K:.*]]: memref<?x2x16x16xf16>, %[[V:.*]]: memref<?x2x16x16xf16>, %[[PT:.*]]: memref<?x?xi32>, %[[LEN:.*]]: memref<?xi32>, %[[W:.*]]: memref<?xi32>, %[[S:.*]]: memref<?x2x5x16xf32>, %[[O:.*]]: memref<?x4x16xf32>, %[[ST:.*]]: memref<?x4x5xf32>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-NEXT: condensate.decode_attention q(%[[Q]] : memref<?x4x16xf32>) kv(%[[K]], %[[V]] : memref<?x2x16x16xf16>) pages(%[[PT]] : memref<?x?xi32>) lens(%[[LEN]] : memref<?xi32>) summaries(%[[S]] : memref<?x2x5x16xf32>) out(%[[O]] : memref<?x4x16xf32>) stats(%[[ST]] : memref<?x4x5xf32>) {policy = #condensate.policy<anchor = 1, window = 64, topk = 32>, scale = 5.000000e-01 : f32}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @m_layer1
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-NEXT: condensate.decode_attention
// CHECK-NOT: windows(
// CHECK-SAME: {policy = #condensate.dense, scale = 5.000000e-01 : f32}
// CHECK-LABEL: func.func @m_layer4
// CHECK-SAME: %[[W4:arg5]]: memref<?xi32>
// CHECK-NEXT: condensate.decode_attention
// CHECK-SAME: windows(%[[W4]] : memref<?xi32>)
// CHECK-SAME: {head_policies = [#condensate.policy<anchor = 1, window = 64, topk = 32>, #condensate.policy<anchor = 1, window = 8, window_max = 32>], policy = #condensate.policy<anchor = 1, window = 64, topk = 32>, scale = 5.000000e-01 : f32}
// Sparse, dense and per-head layers all prefill densely: one function.
// CHECK-LABEL: func.func @m_prefill
// CHECK-SAME: (%[[PQ:.*]]: memref<?x4x16xf32>, %[[PK:.*]]: memref<?x2x16x16xf16>, %[[PV:.*]]: memref<?x2x16x16xf16>, %[[PPT:.*]]: memref<?x?xi32>, %[[PLEN:.*]]: memref<?xi32>, %[[PRS:.*]]: memref<?xi32>, %[[PO:.*]]: memref<?x4x16xf32>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-NEXT: condensate.prefill_attention q(%[[PQ]] : memref<?x4x16xf32>) kv(%[[PK]], %[[PV]] : memref<?x2x16x16xf16>) pages(%[[PPT]] : memref<?x?xi32>) lens(%[[PLEN]] : memref<?xi32>) rows(%[[PRS]] : memref<?xi32>) out(%[[PO]] : memref<?x4x16xf32>) {scale = 5.000000e-01 : f32}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @m_append
// CHECK-SAME: (%{{.*}}: memref<?x2x16xf32>, %{{.*}}: memref<?x2x16xf32>, %{{.*}}: memref<?x2x16x16xf16>, %{{.*}}: memref<?x2x16x16xf16>, %{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x2x5x16xf32>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-NEXT: condensate.append_kv k(%arg0 : memref<?x2x16xf32>) v(%arg1 : memref<?x2x16xf32>) into(%arg2, %arg3 : memref<?x2x16x16xf16>) pages(%arg4 : memref<?x?xi32>) positions(%arg5 : memref<?xi32>) summaries(%arg6 : memref<?x2x5x16xf32>)
// CHECK-NEXT: return
// CHECK-NOT: func.func
condensate.model @m layers = 5, q_heads = 4, kv_heads = 2, head_dim = 16,
    page_size = 16, kv_type = f16, scale = 0.5,
    schedule = #condensate.schedule<layers = 5,
      default = #condensate.policy<anchor = 1, window = 64, topk = 32>,
      rules = [#condensate.rule<layers = [1, 3], policy = #condensate.dense>,
               #condensate.rule<layers = [4], kv_heads = [1],
                 policy = #condensate.policy<window = 8, window_max = 32>>]>

// -----

// Two models and an existing table: entries are merged, sorted by name; the
// default scale is 1/sqrt(head_dim); a later rule overrides an earlier one.
// CHECK: module attributes {condensate.layer_tables = {a = {adaptive = array<i64>, append = @a_append, layers = [@a_layer0, @a_layer1, @a_layer0], prefill = [@a_prefill_w4_a1, @a_prefill_w2_a0, @a_prefill_w4_a1]}, b = {adaptive = array<i64>, append = @b_append, layers = [@b_layer0], prefill = [@b_prefill]}, old = {adaptive = array<i64>, append = @x, layers = []}}}
// CHECK-LABEL: func.func @b_layer0
// CHECK: {policy = #condensate.dense, scale = 0.353553385 : f32}
// CHECK-LABEL: func.func @b_prefill
// CHECK: {scale = 0.353553385 : f32}
// CHECK-LABEL: func.func @b_append
// CHECK-LABEL: func.func @a_layer0
// CHECK-SAME: (%{{.*}}: memref<?x2x8xf32>, %{{.*}}: memref<?x1x1x8xbf16>,
// CHECK: {policy = #condensate.policy<anchor = 1, window = 4, page_size = 1>, scale = 1.250000e-01 : f32}
// CHECK-LABEL: func.func @a_layer1
// CHECK: {policy = #condensate.policy<anchor = 0, window = 2, page_size = 1>, scale = 1.250000e-01 : f32}
// Static window policies prefill in their window, with their anchor.
// CHECK-LABEL: func.func @a_prefill_w4_a1
// CHECK: condensate.prefill_attention
// CHECK-SAME: {anchor = 1 : i64, scale = 1.250000e-01 : f32, window = 4 : i64}
// CHECK-LABEL: func.func @a_prefill_w2_a0
// CHECK: condensate.prefill_attention
// CHECK-SAME: {scale = 1.250000e-01 : f32, window = 2 : i64}
// CHECK-LABEL: func.func @a_append
// CHECK-NOT: func.func
module attributes {condensate.layer_tables = {old = {append = @x, layers = [], adaptive = array<i64>}}} {
  condensate.model @b layers = 1, q_heads = 1, kv_heads = 1, head_dim = 8,
      page_size = 16, kv_type = f32,
      schedule = #condensate.schedule<layers = 1, default = #condensate.dense>
  condensate.model @a layers = 3, q_heads = 2, kv_heads = 1, head_dim = 8,
      page_size = 1, kv_type = bf16, scale = 0.125,
      schedule = #condensate.schedule<layers = 3,
        default = #condensate.policy<window = 4, page_size = 1>,
        rules = [#condensate.rule<layers = [1], policy = #condensate.dense>,
                 #condensate.rule<layers = [1], policy = #condensate.policy<anchor = 0, window = 2, page_size = 1>>]>
}

// -----

// A module without a model is left alone.
// CHECK: {{^}}module {{{$}}
// CHECK-NEXT: func.func @untouched
func.func @untouched() {
  return
}

// -----

func.func @m_layer0() {
  return
}
// expected-error@+1 {{'condensate.model' op cannot expand: symbol @m_layer0 already exists}}
condensate.model @m layers = 1, q_heads = 1, kv_heads = 1, head_dim = 8,
    page_size = 16, kv_type = f32,
    schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

func.func @m_append() {
  return
}
// expected-error@+1 {{'condensate.model' op cannot expand: symbol @m_append already exists}}
condensate.model @m layers = 1, q_heads = 1, kv_heads = 1, head_dim = 8,
    page_size = 16, kv_type = f32,
    schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// The paper's schedule: layers 0..7 share the wide window, 15 is the pillar,
// every other layer shares the adaptive default (and only those are listed
// as adaptive); three layer functions in all.
// PAPER: module attributes {condensate.layer_tables = {paper = {adaptive = array<i64: 8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29>, append = @paper_append, layers = [@paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer15, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8], prefill = [@paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill]}}}
// PAPER-LABEL: func.func @paper_layer0
// PAPER: {policy = #condensate.policy<anchor = 1, window = 1024, topk = 32, selector = exact>, scale = 1.250000e-01 : f32}
// PAPER-LABEL: func.func @paper_layer8
// PAPER: windows(%arg5 : memref<?xi32>)
// PAPER-SAME: {policy = #condensate.policy<anchor = 1, window = 64, window_max = 256, topk = 32, selector = exact>, scale = 1.250000e-01 : f32}
// PAPER-LABEL: func.func @paper_layer15
// PAPER: {policy = #condensate.dense, scale = 1.250000e-01 : f32}
// PAPER-LABEL: func.func @paper_append
// PAPER-NEXT: condensate.append_kv
// PAPER-NOT: func.func
// PAPERN-COUNT-3: condensate.decode_attention
// PAPERN-NOT: condensate.decode_attention
