// KNOWN BUG (GPU miscompile, zeros): condensate.merge accepts partials with
// a dynamic split count (dimension 2) and the loop lowering walks them with
// memref.dim, but the GPU lowering unrolls its weighted-sum pass over
// staticDim(partial_ml, 2) = kDynamic: no split is read (no load of
// partial_o at all) and every output row is 0 * (1 / Z) = 0. Only the max
// pass uses memref.dim.
// Repro: condensate-opt --convert-condensate-to-gpu test/Known/merge-gpu-dynamic-splits.mlir | grep -c 'load %arg0'
//   (prints 0).
// Expected: the GPU merge walks dynamic splits (or the verifier requires
// static split counts in merge, as it does for sparse/dense attend).
// RUN: condensate-opt %s --convert-condensate-to-gpu | FileCheck %s

// CHECK: gpu.func @merge_dyn_merge(
// CHECK: load %arg0[
func.func @merge_dyn(%po: memref<?x4x?x16xf32>, %pml: memref<?x4x?x3xf32>, %o: memref<?x4x16xf32>) {
  condensate.merge partials(%po, %pml : memref<?x4x?x16xf32>, memref<?x4x?x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}
