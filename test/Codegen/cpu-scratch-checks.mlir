// Every scratch buffer of a lowered CPU layer is tested after its malloc:
// on null the function frees the buffers it holds, writes
// kWorkspaceFailed (-1) to stats[0, 0, StatFallback] and returns.
// RUN: condensate-opt %S/Inputs/certified_minmax.mlir --condensate-expand-schedule --condensate-specialize --condensate-decompose --convert-condensate-to-loops | FileCheck %s

// CHECK-LABEL: func.func @certified_layer0
// CHECK-SAME: %[[STATS:arg8]]: memref<?x9x5xf32>
// CHECK: %[[A:.*]] = memref.alloc(%{{.*}}) : memref<?x3x1x64xf32>
// CHECK: %[[PA:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: cf.cond_br %{{.*}}, ^[[FAILA:bb[0-9]+]], ^[[OKA:bb[0-9]+]]
// CHECK: ^[[FAILA]]:
// CHECK-NOT: memref.dealloc
// CHECK: scf.if
// CHECK: %[[SENTINEL:.*]] = arith.constant -1.000000e+00 : f32
// CHECK: %[[COL:.*]] = arith.constant 3 : index
// CHECK: memref.store %[[SENTINEL]], %[[STATS]][%{{.*}}, %{{.*}}, %[[COL]]]
// CHECK: return
// CHECK: ^[[OKA]]:
// The second buffer's failure path frees the first.
// CHECK: %[[B:.*]] = memref.alloc(%{{.*}}) : memref<?x3x1x3xf32>
// CHECK: cf.cond_br %{{.*}}, ^[[FAILB:bb[0-9]+]], ^[[OKB:bb[0-9]+]]
// CHECK: ^[[FAILB]]:
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: return
// CHECK: ^[[OKB]]:
// CHECK: scf.for
