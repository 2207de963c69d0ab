// condensate-specialize: every decode attention gets a #condensate.spec;
// dynamic dimensions are pinned from the options by memref.cast.
// REQUIRES: split-file
// RUN: split-file %s %t
// RUN: condensate-opt %t/static.mlir -split-input-file --condensate-specialize | FileCheck %s --check-prefix=STATIC
// RUN: condensate-opt %t/static.mlir -split-input-file --condensate-specialize="target=sm_90" | FileCheck %s --check-prefix=SM90
// RUN: condensate-opt %t/static.mlir -split-input-file --condensate-specialize="target=sm_80 splits=4" | FileCheck %s --check-prefix=SPLITS
// RUN: condensate-opt %t/casts.mlir -split-input-file --condensate-specialize="head-dim=64 q-heads=8 kv-heads=2 page-size=16" | FileCheck %s --check-prefix=CAST
// RUN: condensate-opt %t/errors.mlir -split-input-file --condensate-specialize="q-heads=8 kv-heads=2 page-size=32" -verify-diagnostics
// RUN: condensate-opt %t/exact.mlir --condensate-specialize="page-size=32" -verify-diagnostics | FileCheck %s --check-prefix=EXACT
// RUN: condensate-opt %t/missing.mlir -split-input-file --condensate-specialize="q-heads=6" -verify-diagnostics
// RUN: condensate-opt %t/target.mlir --condensate-specialize="target=sm_75" -verify-diagnostics

//--- static.mlir

// Static operands: no cast; budgets from the policy (32 tokens = 2 pages).
// STATIC-LABEL: func.func @uniform
// STATIC-NOT: memref.cast
// STATIC: condensate.decode_attention q(%arg0 : memref<?x4x16xf32>) kv(%arg1, %arg2 : memref<?x2x16x16xf16>)
// STATIC-SAME: spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f16, top_units = 2, extra_units = 0, splits = 1, target = cpu>}
// SM90-LABEL: func.func @uniform
// SM90: spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f16, top_units = 2, extra_units = 0, splits = 4, target = sm_90>}
// SPLITS-LABEL: func.func @uniform
// SPLITS: spec = #condensate.spec<{{.*}}, splits = 4, target = sm_80>}
func.func @uniform(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %v: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<anchor = 1, window = 64, topk = 32>, scale = 0.25 : f32}
  return
}

// -----

// Per-head policies: the budgets are the largest over the heads (exact
// top-100 keeps 100 token units; block_mean certifies with 3 extra pages).
// STATIC-LABEL: func.func @per_head
// STATIC: spec = #condensate.spec<head_dim = 16, q_heads = 6, kv_heads = 3, page_size = 16, kv_type = bf16, top_units = 100, extra_units = 3, splits = 1, target = cpu>}
// A GPU may split the largest condensate set, 1 + 64 + 100 = 165 slots,
// into blocks of 32 (a launch runs as many as its batch needs).
// SM90-LABEL: func.func @per_head
// SM90: top_units = 100, extra_units = 3, splits = 6, target = sm_90>}
func.func @per_head(%q: memref<?x6x16xf32>, %k: memref<?x3x16x16xbf16>, %v: memref<?x3x16x16xbf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x3x5x16xf32>, %o: memref<?x6x16xf32>) {
  condensate.decode_attention q(%q : memref<?x6x16xf32>) kv(%k, %v : memref<?x3x16x16xbf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x3x5x16xf32>) out(%o : memref<?x6x16xf32>) {policy = #condensate.dense, head_policies = [#condensate.policy<window = 64, topk = 100, selector = exact>, #condensate.dense, #condensate.policy<window = 16, topk = 40, selector = block_mean, tau = 1.0e-3, max_extra = 3>], scale = 0.25 : f32}
  return
}

// -----

// Dense: nothing to keep.
// STATIC-LABEL: func.func @dense
// STATIC: spec = #condensate.spec<head_dim = 64, q_heads = 8, kv_heads = 8, page_size = 64, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
// SM90-LABEL: func.func @dense
// SM90: top_units = 0, extra_units = 0, splits = 1, target = sm_90>}
func.func @dense(%q: memref<?x8x64xf32>, %k: memref<?x8x64x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x8x64xf32>) {
  condensate.decode_attention q(%q : memref<?x8x64xf32>) kv(%k, %k : memref<?x8x64x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x8x64xf32>) {policy = #condensate.dense, scale = 0.125 : f32}
  return
}

// -----

// Large exact sets: 1 + 1024 + 1024 = 2049 slots -> 3 splits on the CPU
// (one per 1024), at most 32 on a GPU (one per 32 slots, clamped);
// 1 + 64 + 8192 slots -> 9 on the CPU, 32 on a GPU.
// STATIC-LABEL: func.func @large
// STATIC: top_units = 1024, extra_units = 0, splits = 3, target = cpu>}
// STATIC: top_units = 8192, extra_units = 0, splits = 9, target = cpu>}
// SM90-LABEL: func.func @large
// SM90: top_units = 1024, extra_units = 0, splits = 32, target = sm_90>}
// SM90: top_units = 8192, extra_units = 0, splits = 32, target = sm_90>}
func.func @large(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 1024, topk = 1024, selector = exact>, scale = 0.25 : f32}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 64, topk = 8192, selector = exact>, scale = 0.25 : f32}
  return
}

// -----

// An op that already has a spec is left alone, whatever the options.
// STATIC-LABEL: func.func @already
// STATIC: spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 5, extra_units = 1, splits = 7, target = sm_80>}
// SM90-LABEL: func.func @already
// SM90: splits = 7, target = sm_80>}
// SPLITS-LABEL: func.func @already
// SPLITS: splits = 7, target = sm_80>}
func.func @already(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 5, extra_units = 1, splits = 7, target = sm_80>}
  return
}

//--- casts.mlir

// Every dynamic head/head_dim/page dimension is cast to the option's size;
// page table, lens and windows keep their types.
// CAST-LABEL: func.func @dynamic
// CAST-SAME: (%[[Q:.*]]: memref<?x?x?xf32>, %[[K:.*]]: memref<?x?x?x?xf16>, %[[V:.*]]: memref<?x?x?x?xf16>, %[[PT:.*]]: memref<?x?xi32>, %[[LEN:.*]]: memref<?xi32>, %[[W:.*]]: memref<?xi32>, %[[S:.*]]: memref<?x?x5x?xf32>, %[[O:.*]]: memref<?x?x?xf32>, %[[ST:.*]]: memref<?x?x5xf32>)
// CAST-DAG: %[[QC:.*]] = memref.cast %[[Q]] : memref<?x?x?xf32> to memref<?x8x64xf32>
// CAST-DAG: %[[KC:.*]] = memref.cast %[[K]] : memref<?x?x?x?xf16> to memref<?x2x16x64xf16>
// CAST-DAG: %[[VC:.*]] = memref.cast %[[V]] : memref<?x?x?x?xf16> to memref<?x2x16x64xf16>
// CAST-DAG: %[[OC:.*]] = memref.cast %[[O]] : memref<?x?x?xf32> to memref<?x8x64xf32>
// CAST-DAG: %[[SC:.*]] = memref.cast %[[S]] : memref<?x?x5x?xf32> to memref<?x2x5x64xf32>
// CAST-DAG: %[[STC:.*]] = memref.cast %[[ST]] : memref<?x?x5xf32> to memref<?x8x5xf32>
// CAST-NOT: memref.cast
// CAST: condensate.decode_attention q(%[[QC]] : memref<?x8x64xf32>) kv(%[[KC]], %[[VC]] : memref<?x2x16x64xf16>) pages(%[[PT]] : memref<?x?xi32>) lens(%[[LEN]] : memref<?xi32>) windows(%[[W]] : memref<?xi32>) summaries(%[[SC]] : memref<?x2x5x64xf32>) out(%[[OC]] : memref<?x8x64xf32>) stats(%[[STC]] : memref<?x8x5xf32>)
// CAST-SAME: spec = #condensate.spec<head_dim = 64, q_heads = 8, kv_heads = 2, page_size = 16, kv_type = f16, top_units = 2, extra_units = 4, splits = 1, target = cpu>}
func.func @dynamic(%q: memref<?x?x?xf32>, %k: memref<?x?x?x?xf16>, %v: memref<?x?x?x?xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %w: memref<?xi32>, %s: memref<?x?x5x?xf32>, %o: memref<?x?x?xf32>, %st: memref<?x?x5xf32>) {
  condensate.decode_attention q(%q : memref<?x?x?xf32>) kv(%k, %v : memref<?x?x?x?xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) windows(%w : memref<?xi32>) summaries(%s : memref<?x?x5x?xf32>) out(%o : memref<?x?x?xf32>) stats(%st : memref<?x?x5xf32>) {policy = #condensate.policy<anchor = 1, window = 64, window_max = 128, topk = 32, tau = 1.0e-3, max_extra = 4>, scale = 0.125 : f32}
  return
}

// -----

// Only the operands whose types are not already static are cast; options
// that agree with a static size are fine.
// CAST-LABEL: func.func @partial
// (k and v are one value here; each operand gets its own cast.)
// CAST: %[[KC:.*]] = memref.cast %arg1 : memref<?x2x?x64xf32> to memref<?x2x16x64xf32>
// CAST-NEXT: %[[VC:.*]] = memref.cast %arg1 : memref<?x2x?x64xf32> to memref<?x2x16x64xf32>
// CAST-NOT: memref.cast
// CAST: condensate.decode_attention q(%arg0 : memref<?x8x64xf32>) kv(%[[KC]], %[[VC]] : memref<?x2x16x64xf32>)
// CAST-SAME: out(%arg4 : memref<?x8x64xf32>) {policy = #condensate.dense, scale = 1.250000e-01 : f32, spec = #condensate.spec<head_dim = 64, q_heads = 8, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
func.func @partial(%q: memref<?x8x64xf32>, %k: memref<?x2x?x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x8x64xf32>) {
  condensate.decode_attention q(%q : memref<?x8x64xf32>) kv(%k, %k : memref<?x2x?x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x8x64xf32>) {policy = #condensate.dense, scale = 0.125 : f32}
  return
}

//--- errors.mlir

func.func @no_head_dim(%q: memref<?x8x?xf32>, %k: memref<?x2x32x?xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x8x?xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op cannot specialise: head_dim is dynamic; give it with head-dim=N}}
  condensate.decode_attention q(%q : memref<?x8x?xf32>) kv(%k, %k : memref<?x2x32x?xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x8x?xf32>) {policy = #condensate.dense, scale = 0.125 : f32}
  return
}

// -----

func.func @conflict(%q: memref<?x4x64xf32>, %k: memref<?x2x32x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x64xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op cannot specialise: q-heads=8 conflicts with the operand type's query head count 4}}
  condensate.decode_attention q(%q : memref<?x4x64xf32>) kv(%k, %k : memref<?x2x32x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x64xf32>) {policy = #condensate.dense, scale = 0.125 : f32}
  return
}

// -----

func.func @conflict_page(%q: memref<?x8x64xf32>, %k: memref<?x2x16x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x8x64xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op cannot specialise: page-size=32 conflicts with the operand type's page size 16}}
  condensate.decode_attention q(%q : memref<?x8x64xf32>) kv(%k, %k : memref<?x2x16x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x8x64xf32>) {policy = #condensate.dense, scale = 0.125 : f32}
  return
}

// -----

// The static head_dim 12 cannot make a valid spec.
func.func @bad_spec(%q: memref<?x8x12xf32>, %k: memref<?x2x32x12xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x8x12xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op spec head_dim must be a positive multiple of 8 up to 512, got 12}}
  condensate.decode_attention q(%q : memref<?x8x12xf32>) kv(%k, %k : memref<?x2x32x12xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x8x12xf32>) {policy = #condensate.dense, scale = 0.125 : f32}
  return
}

// -----

// Once the page size is pinned by the option, the block policy's page size
// (the default, 16) no longer matches the cache: the pass re-verifies the op.
func.func @policy_page(%q: memref<?x8x64xf32>, %k: memref<?x2x?x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x64xf32>, %o: memref<?x8x64xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op policy page_size 16 does not match the KV cache page size 32}}
  condensate.decode_attention q(%q : memref<?x8x64xf32>) kv(%k, %k : memref<?x2x?x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x64xf32>) out(%o : memref<?x8x64xf32>) {policy = #condensate.policy<window = 64, topk = 16>, scale = 0.125 : f32}
  return
}

//--- exact.mlir

// The exact selector ranks tokens: its policy page size (the default, 16)
// is not checked against the pinned page size 32.
// EXACT-LABEL: func.func @exact_page
// EXACT: %[[KC:.*]] = memref.cast %arg1 : memref<?x2x?x64xf32> to memref<?x2x32x64xf32>
// EXACT: condensate.decode_attention q(%arg0 : memref<?x8x64xf32>) kv(%[[KC]], %{{.*}} : memref<?x2x32x64xf32>)
// EXACT-SAME: {policy = #condensate.policy<anchor = 1, window = 64, topk = 16, selector = exact>, scale = 1.250000e-01 : f32, spec = #condensate.spec<head_dim = 64, q_heads = 8, kv_heads = 2, page_size = 32, kv_type = f32, top_units = 16, extra_units = 0, splits = 1, target = cpu>}
func.func @exact_page(%q: memref<?x8x64xf32>, %k: memref<?x2x?x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x8x64xf32>) {
  condensate.decode_attention q(%q : memref<?x8x64xf32>) kv(%k, %k : memref<?x2x?x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x8x64xf32>) {policy = #condensate.policy<window = 64, topk = 16, selector = exact>, scale = 0.125 : f32}
  return
}

//--- missing.mlir

// Every dimension left dynamic and not given is reported, in order.
func.func @missing(%q: memref<?x?x?xf32>, %k: memref<?x?x?x?xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x?x?xf32>) {
  // expected-error@+3 {{'condensate.decode_attention' op cannot specialise: head_dim is dynamic; give it with head-dim=N}}
  // expected-error@+2 {{'condensate.decode_attention' op cannot specialise: key/value head count is dynamic; give it with kv-heads=N}}
  // expected-error@+1 {{'condensate.decode_attention' op cannot specialise: page size is dynamic; give it with page-size=N}}
  condensate.decode_attention q(%q : memref<?x?x?xf32>) kv(%k, %k : memref<?x?x?x?xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x?x?xf32>) {policy = #condensate.dense, scale = 0.125 : f32}
  return
}

// -----

// q-heads=6 against 4 static key/value heads.
func.func @gqa(%q: memref<?x?x64xf32>, %k: memref<?x4x16x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x?x64xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op cannot specialise: GQA ratio: 6 query heads is not a multiple of 4 key/value heads}}
  condensate.decode_attention q(%q : memref<?x?x64xf32>) kv(%k, %k : memref<?x4x16x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x?x64xf32>) {policy = #condensate.dense, scale = 0.125 : f32}
  return
}

//--- target.mlir

// expected-error@+1 {{condensate-specialize: unknown target 'sm_75'; expected cpu, sm_80 or sm_90}}
module {
}
