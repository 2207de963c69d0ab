// condensate.select_topk with base = 0 run on the CPU: the op condensate-
// decompose emits for a certified policy without top-k (e.g.
// #condensate.policy<window = 64, tau = 1.0e-3, max_extra = 2>). There is no
// base set: the index slots hold only the ranked extras, and nothing is
// written past them (this used to store every candidate into slots 0.. and
// find no extras).
// REQUIRES: mlir-runner
// RUN: condensate-opt --condensate-to-cpu %s | mlir-runner -e main -entry-point-result=void -shared-libs=%llvm_lib_dir/libmlir_runner_utils.so,%llvm_lib_dir/libmlir_c_runner_utils.so | FileCheck %s

// One sequence of 128 tokens = 8 pages of 16; 4 query heads, 2 kv heads;
// pages 0..6 are candidates (page 7 is the window). The index views sit in
// a 16-wide buffer filled with 7s: the guard cells must survive.

// A zero-slot view: nothing is written.
// CHECK: data =
// CHECK-NEXT: [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7],
// CHECK-NEXT: [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]
// Two slots, all scores tied: the extras are units 0 and 1.
// CHECK: data =
// CHECK-NEXT: [0, 1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7],
// CHECK-NEXT: [0, 1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]
// Three slots, scores rising with the page: the best candidates first
// (6, 5, 4), never the window page 7.
// CHECK: data =
// CHECK-NEXT: [6, 5, 4, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7],
// CHECK-NEXT: [6, 5, 4, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]
// Ten slots for 7 candidates: the order runs out and the rest are -1.
// CHECK: data =
// CHECK-NEXT: [6, 5, 4, 3, 2, 1, 0, -1, -1, -1, 7, 7, 7, 7, 7, 7],
// CHECK-NEXT: [6, 5, 4, 3, 2, 1, 0, -1, -1, -1, 7, 7, 7, 7, 7, 7]

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

  // Page j now scores j on every query head.
  scf.for %h = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %ji = arith.index_cast %j : index to i32
      %jf = arith.sitofp %ji : i32 to f32
      memref.store %jf, %scores[%c0, %h, %j] : memref<1x4x8xf32>
    }
  }
  call @fill(%big) : (memref<1x2x16xi32>) -> ()
  %idx3 = memref.subview %big[0, 0, 0] [1, 2, 3] [1, 1, 1] : memref<1x2x16xi32> to memref<1x2x3xi32, strided<[32, 16, 1]>>
  condensate.select_topk page scores(%scores : memref<1x4x8xf32>) lens(%lens : memref<1xi32>) indices(%idx3 : memref<1x2x3xi32, strided<[32, 16, 1]>>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base = 0 : i64}
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()

  call @fill(%big) : (memref<1x2x16xi32>) -> ()
  %idx10 = memref.subview %big[0, 0, 0] [1, 2, 10] [1, 1, 1] : memref<1x2x16xi32> to memref<1x2x10xi32, strided<[32, 16, 1]>>
  condensate.select_topk page scores(%scores : memref<1x4x8xf32>) lens(%lens : memref<1xi32>) indices(%idx10 : memref<1x2x10xi32, strided<[32, 16, 1]>>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base = 0 : i64}
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()

  memref.dealloc %big : memref<1x2x16xi32>
  memref.dealloc %lens : memref<1xi32>
  memref.dealloc %scores : memref<1x4x8xf32>
  return
}
