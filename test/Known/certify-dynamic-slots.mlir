// KNOWN VERIFIER HOLE (out-of-bounds reads): condensate.certify accepts
// indices with a dynamic slot count (dimension 2), but both lowerings read
// it as a static size: the extra-slot walk runs to kDynamic - base_units =
// 9223372036854775804 (`scf.for ... to %c9223372036854775804`), reading
// indices past the row for a group that needs extras.
// Repro: condensate-opt --convert-condensate-to-loops test/Known/certify-dynamic-slots.mlir | grep 9223372036854775804
//   (same with --convert-condensate-to-gpu).
// Expected: the verifier requires a static slot count, as select_topk does.
// RUN: condensate-opt %s -verify-diagnostics

func.func @certify(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x?xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x2xi32>, %st: memref<?x4x4xf32>) {
  // expected-error@+1 {{'condensate.certify' op indices must have a static unit count (dimension 2)}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x?xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>) stats(%st : memref<?x4x4xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}
