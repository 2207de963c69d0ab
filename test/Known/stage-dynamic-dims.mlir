// KNOWN VERIFIER HOLE (miscompile): the stage ops accept dynamic head counts,
// head_dim and page size, but the loop lowering reads them as static sizes:
// a dynamic Hq becomes a loop bound of -9223372036854775808 and a GQA group
// of kDynamic / Hkv.
// Repro: condensate-opt --convert-condensate-to-loops test/Known/stage-dynamic-dims.mlir
//   | grep -- -9223372036854775808
// Expected: the verifiers require static Hq, Hkv, D and P (as the lowering
// does), or the lowering reads them with memref.dim.
// RUN: condensate-opt %s -verify-diagnostics

func.func @s(%q: memref<?x?x16xf32>, %s: memref<?x?x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x?x?xf32>) {
  // expected-error@+1 {{static}}
  condensate.score_pages block_minmax q(%q : memref<?x?x16xf32>) summaries(%s : memref<?x?x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x?x?xf32>) {page_size = 16 : i64, scale = 0.5 : f32}
  return
}
