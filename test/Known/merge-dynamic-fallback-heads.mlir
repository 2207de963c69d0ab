// KNOWN VERIFIER HOLE (division by zero): condensate.merge requires static
// Hq and D, but not the key/value head count of 'fallback', which both
// lowerings divide by: the GQA group becomes Hq / kDynamic = 0 and the
// fallback flag of head h is read at h / 0 (`arith.divsi %h, %c0`).
// Repro: condensate-opt --convert-condensate-to-loops test/Known/merge-dynamic-fallback-heads.mlir | grep 'divsi.*%c0 '
//   (same with --convert-condensate-to-gpu).
// Expected: with 'fallback', Hkv must be static like the other stage ops'.
// RUN: condensate-opt %s -verify-diagnostics

func.func @merge(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %f: memref<?x?xi32>, %pod: memref<?x4x16x16xf32>, %pmld: memref<?x4x16x3xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op key/value head count must be static in a stage op (run condensate-specialize)}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x?xi32>) dense(%pod, %pmld : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}
