// KNOWN VERIFIER HOLE (crash / silent miscompile): the stage ops accept a
// head_dim that is not a multiple of the 8-lane rows the lowering uses.
//  - D = 4: convert-condensate-to-loops crashes in LowerScorePages
//    (vector.reduction of a null value); merge lowers to nothing.
//  - D = 12: only lanes 0..7 are read and written.
// Repro: condensate-opt --convert-condensate-to-loops test/Known/stage-head-dim.mlir
//   (split 1 segfaults; with -split-input-file split 2 prints an empty function).
// Expected: the verifiers reject D % 8 != 0 as #condensate.spec does.
// RUN: condensate-opt %s -split-input-file -verify-diagnostics

func.func @score_pages_d4(%q: memref<?x4x4xf32>, %s: memref<?x2x5x4xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{head_dim}}
  condensate.score_pages block_minmax q(%q : memref<?x4x4xf32>) summaries(%s : memref<?x2x5x4xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 0.5 : f32}
  return
}

// -----

func.func @merge_d4(%po: memref<?x4x1x4xf32>, %pml: memref<?x4x1x3xf32>, %o: memref<?x4x4xf32>) {
  // expected-error@+1 {{head_dim}}
  condensate.merge partials(%po, %pml : memref<?x4x1x4xf32>, memref<?x4x1x3xf32>) out(%o : memref<?x4x4xf32>)
  return
}

// -----

func.func @merge_d12(%po: memref<?x4x1x12xf32>, %pml: memref<?x4x1x3xf32>, %o: memref<?x4x12xf32>) {
  // expected-error@+1 {{head_dim}}
  condensate.merge partials(%po, %pml : memref<?x4x1x12xf32>, memref<?x4x1x3xf32>) out(%o : memref<?x4x12xf32>)
  return
}
