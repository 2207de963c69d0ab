// KNOWN VERIFIER HOLES: the stage verifiers compare I64Attr values through
// their uint64_t getters, so negative values slip through or are printed
// wrapped:
//  - window_max = -1 passes "window_max >= window" (select_topk,
//    sparse_attend, certify) and reaches the lowering as -1;
//  - dense_attend chunk = -5 passes "chunk must be > 0";
//  - select_topk base = -1 is reported as "base 18446744073709551615".
// Repro: condensate-opt -split-input-file -verify-diagnostics test/Known/stage-negative-attrs.mlir
// RUN: condensate-opt %s -split-input-file -verify-diagnostics

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{window_max (-1) must be >= window (64)}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = -1 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>) {
  // expected-error@+1 {{window_max (-2) must be >= window (0)}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) {anchor = 4 : i64, window = 0 : i64, window_max = -2 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x4xf32>) {
  // expected-error@+1 {{window_max (-1) must be >= window (64)}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x4xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = -1 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x?x16xf32>, %pml: memref<?x4x?x3xf32>) {
  // expected-error@+1 {{chunk must be > 0, got -5}}
  condensate.dense_attend q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x?x16xf32>, memref<?x4x?x3xf32>) {chunk = -5 : i64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{budget mismatch: base -1 must be in [0, 6] (the index slots)}}
  condensate.select_topk token scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = -1 : i64}
  return
}
