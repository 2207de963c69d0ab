// condensate.select_topk over tokens with a score row per query head (what
// the certificate takes) ranks each head's scores less that head's largest
// over the forced positions (anchor and window); with one row per key/value
// head, or over pages, by the plain max (codegen's rankRelative).
// REQUIRES: mlir-runner
// RUN: condensate-opt --condensate-to-cpu %s | mlir-runner -e main -entry-point-result=void -shared-libs=%llvm_lib_dir/libmlir_runner_utils.so,%llvm_lib_dir/libmlir_c_runner_utils.so | FileCheck %s

// One sequence of 8 tokens; anchor 1, window 2: tokens 1..5 are candidates.
// Head 0 sits high (forced tokens 0, 6, 7 score 10; candidates 9, 8.5, 1,
// 1, 1), head 1 low (forced 0; candidates -5, -5, -0.5, -1, -5). Plain
// max: 9, 8.5, 1, 1, 1 -> tokens 1, 2, 3, 4, 5. Relative to each head:
// max(-1, -5), max(-1.5, -5), max(-9, -0.5), max(-9, -1), max(-9, -5) =
// -1, -1.5, -0.5, -1, -5 -> tokens 3, 1, 4 (tied with 1: the lower unit
// first), 2, 5.
// CHECK: data =
// CHECK-NEXT: {{\[}}[3, 1, 4, 2, 5]]
// The same scores as one row per key/value head (their max): plain.
// CHECK: data =
// CHECK-NEXT: {{\[}}[1, 2, 3, 4, 5]]
// A base of two (written in unit order), then the extras in rank order.
// CHECK: data =
// CHECK-NEXT: {{\[}}[1, 3, 4, 2, 5]]

func.func private @printMemrefI32(memref<*xi32>)

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %h0 = arith.constant dense<[10.0, 9.0, 8.5, 1.0, 1.0, 1.0, 10.0, 10.0]> : vector<8xf32>
  %h1 = arith.constant dense<[0.0, -5.0, -5.0, -0.5, -1.0, -5.0, 0.0, 0.0]> : vector<8xf32>
  %hmax = arith.maximumf %h0, %h1 : vector<8xf32>
  %len_v = arith.constant 8 : i32
  %lens = memref.alloc() : memref<1xi32>
  memref.store %len_v, %lens[%c0] : memref<1xi32>

  %heads = memref.alloc() : memref<1x2x8xf32>
  vector.store %h0, %heads[%c0, %c0, %c0] : memref<1x2x8xf32>, vector<8xf32>
  vector.store %h1, %heads[%c0, %c1, %c0] : memref<1x2x8xf32>, vector<8xf32>
  %rows = memref.alloc() : memref<1x1x8xf32>
  vector.store %hmax, %rows[%c0, %c0, %c0] : memref<1x1x8xf32>, vector<8xf32>

  %idx = memref.alloc() : memref<1x1x5xi32>
  %u = memref.cast %idx : memref<1x1x5xi32> to memref<*xi32>
  condensate.select_topk token scores(%heads : memref<1x2x8xf32>) lens(%lens : memref<1xi32>) indices(%idx : memref<1x1x5xi32>) {anchor = 1 : i64, window = 2 : i64, window_max = 2 : i64, page_size = 4 : i64, base = 0 : i64}
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  condensate.select_topk token scores(%rows : memref<1x1x8xf32>) lens(%lens : memref<1xi32>) indices(%idx : memref<1x1x5xi32>) {anchor = 1 : i64, window = 2 : i64, window_max = 2 : i64, page_size = 4 : i64, base = 0 : i64}
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  condensate.select_topk token scores(%heads : memref<1x2x8xf32>) lens(%lens : memref<1xi32>) indices(%idx : memref<1x1x5xi32>) {anchor = 1 : i64, window = 2 : i64, window_max = 2 : i64, page_size = 4 : i64, base = 2 : i64}
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()

  memref.dealloc %idx : memref<1x1x5xi32>
  memref.dealloc %rows : memref<1x1x8xf32>
  memref.dealloc %heads : memref<1x2x8xf32>
  memref.dealloc %lens : memref<1xi32>
  return
}
