// KNOWN BUG (out-of-bounds writes at run time): select_topk with base = 0
// and candidates present treats every candidate as "above the threshold"
// and stores them all into indices[b, g, 0 ..], past the index slots, and
// then finds no extras. condensate-decompose emits exactly this for every
// certified policy without top-k, e.g.
//   #condensate.policy<window = 64, tau = 1.0e-3, max_extra = 2>
// gives select_topk base = 0 on indices memref<?xHkvx2xi32>: long contexts
// write past the 2 slots, and the extra pages are never found (-1), so the
// certificate can only fall back to dense attention.
// Repro: condensate-opt --condensate-to-cpu test/Known/select-topk-zero-base.mlir |
//   mlir-runner -e main -entry-point-result=void \
//     -shared-libs=/usr/lib/llvm-22/lib/libmlir_runner_utils.so
// A zero-slot index view into a guarded buffer: the guard cells (7) must
// survive. With two extra slots, the extras are the two best units (all
// scores tie: units 0 and 1).
// RUN: condensate-opt --condensate-to-cpu %s | mlir-runner -e main -entry-point-result=void -shared-libs=%llvm_lib_dir/libmlir_runner_utils.so,%llvm_lib_dir/libmlir_c_runner_utils.so | FileCheck %s

// CHECK: data =
// CHECK-NEXT: [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7],
// CHECK-NEXT: [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]
// CHECK: data =
// CHECK-NEXT: [0, 1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7],
// CHECK-NEXT: [0, 1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]

func.func private @printMemrefI32(memref<*xi32>)

func.func @fill(%big: memref<1x2x16xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %seven = arith.constant 7 : i32
  scf.for %g = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      memref.store %seven, %big[%c0, %g, %j] : memref<1x2x16xi32>
    }
  }
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %len_v = arith.constant 128 : i32
  %one = arith.constant 1.0 : f32
  // One sequence of 128 tokens = 8 pages of 16; 4 query heads, 2 kv heads;
  // pages 0..6 are candidates (page 7 is the window).
  %scores = memref.alloc() : memref<1x4x8xf32>
  scf.for %h = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      memref.store %one, %scores[%c0, %h, %j] : memref<1x4x8xf32>
    }
  }
  %lens = memref.alloc() : memref<1xi32>
  memref.store %len_v, %lens[%c0] : memref<1xi32>
  %big = memref.alloc() : memref<1x2x16xi32>
  %u = memref.cast %big : memref<1x2x16xi32> to memref<*xi32>

  call @fill(%big) : (memref<1x2x16xi32>) -> ()
  %idx0 = memref.subview %big[0, 0, 0] [1, 2, 0] [1, 1, 1] : memref<1x2x16xi32> to memref<1x2x0xi32, strided<[32, 16, 1]>>
  condensate.select_topk page scores(%scores : memref<1x4x8xf32>) lens(%lens : memref<1xi32>) indices(%idx0 : memref<1x2x0xi32, strided<[32, 16, 1]>>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base = 0 : i64}
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()

  call @fill(%big) : (memref<1x2x16xi32>) -> ()
  %idx2 = memref.subview %big[0, 0, 0] [1, 2, 2] [1, 1, 1] : memref<1x2x16xi32> to memref<1x2x2xi32, strided<[32, 16, 1]>>
  condensate.select_topk page scores(%scores : memref<1x4x8xf32>) lens(%lens : memref<1xi32>) indices(%idx2 : memref<1x2x2xi32, strided<[32, 16, 1]>>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base = 0 : i64}
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}
